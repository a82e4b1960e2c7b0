"""query_batching: see README.md; run as ``python -m experiments.query_batching.run``."""
