"""Reciprocal Rank Fusion: hand-derived values, tie-breaking, and ranx as an oracle."""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import ConfigError
from rag.retrieval.fuse import ranked_ids, rrf, rrf_runs


def test_rrf_hand_derived_values_and_tie_order():
    # a is 1st in run 1 and 3rd in run 2; c is 3rd then 1st; b and d are 2nd once each.
    fused = rrf([["a", "b", "c"], ["c", "d", "a"]])
    assert fused["a"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 3))
    assert fused["c"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert fused["b"] == pytest.approx(1 / (60 + 2))
    assert fused["d"] == pytest.approx(1 / (60 + 2))
    # equal scores are ordered by id, so the output never depends on input order
    assert list(fused) == ["a", "c", "b", "d"]


def test_rrf_scored_runs_rank_by_score_then_id():
    # scores only matter through ranks: x=5 is rank 1; a and z tie at 1.0 -> a (rank 2), z (rank 3)
    fused = rrf([{"z": 1.0, "x": 5.0, "a": 1.0}], k=10)
    assert fused == pytest.approx({"x": 1 / 11, "a": 1 / 12, "z": 1 / 13})
    assert list(fused) == ["x", "a", "z"]


def test_rrf_other_k_and_missing_docs():
    fused = rrf([["a"], ["b", "a"]], k=1)
    assert fused == pytest.approx({"a": 1 / 2 + 1 / 3, "b": 1 / 2})


def test_rrf_single_run_keeps_order_and_empty_input():
    assert list(rrf([["q", "b", "m"]])) == ["q", "b", "m"]
    assert rrf([]) == {}
    assert rrf([[], {}]) == {}


def test_rrf_rejects_bad_k_and_duplicate_ids():
    with pytest.raises(ConfigError, match="k must be positive"):
        rrf([["a"]], k=0)
    with pytest.raises(ConfigError, match="repeats ids"):
        rrf([["a", "b", "a"]])


def test_ranked_ids_of_dict_and_list():
    assert ranked_ids({"b": 0.5, "a": 0.5, "c": 0.9}) == ["c", "a", "b"]
    assert ranked_ids(["b", "a"]) == ["b", "a"]


def test_rrf_runs_fuses_query_by_query():
    r1 = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"x": 1.0}}
    r2 = {"q1": {"b": 3.0}}
    fused = rrf_runs([r1, r2])
    assert fused["q1"] == pytest.approx({"b": 1 / 62 + 1 / 61, "a": 1 / 61})
    assert fused["q2"] == pytest.approx({"x": 1 / 61})


def test_rrf_matches_ranx_fuse():
    import ranx

    rng = np.random.default_rng(0)
    docs = [f"d{i:02d}" for i in range(40)]
    runs = []
    for _ in range(3):
        run = {}
        for q in ("q1", "q2", "q3"):
            chosen = rng.choice(docs, size=25, replace=False)
            scores = rng.permutation(np.linspace(0.1, 10.0, 25))  # distinct scores: no ties
            run[q] = {str(d): float(s) for d, s in zip(chosen, scores, strict=True)}
        runs.append(run)
    ours = rrf_runs(runs, k=60)
    theirs = ranx.fuse(runs=[ranx.Run(r) for r in runs], method="rrf", params={"k": 60}).to_dict()
    assert set(ours) == set(theirs)
    for q in ours:
        assert set(ours[q]) == set(theirs[q])
        for d, s in ours[q].items():
            assert s == pytest.approx(theirs[q][d], rel=1e-9)
