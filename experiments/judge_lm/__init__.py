"""judge_lm: see README.md; run as ``python -m experiments.judge_lm.run``."""
