"""extractive_spans: see README.md; run as ``python -m experiments.extractive_spans.run``."""
