"""judge_e5: see README.md; run as ``python -m experiments.judge_e5.run``."""
