"""judge_crossencoder: see README.md; run as ``python -m experiments.judge_crossencoder.run``."""
