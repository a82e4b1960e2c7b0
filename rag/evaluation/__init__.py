"""Evaluation: gold sets, evidence matching, IR metrics, statistics, SciFact, answer and
faithfulness grades."""
