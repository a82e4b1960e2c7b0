"""The LLM-judge bench: the paired balanced-accuracy comparison and one real small run."""

from __future__ import annotations

import numpy as np
import pytest

from rag.bench.judges import keep_timing, model_time, run
from rag.evaluation.judge_validation import paired_balanced_accuracy


def test_identical_judges_differ_by_nothing():
    rng = np.random.default_rng(1)
    y = rng.random(60) < 0.4
    a = rng.random(60) < 0.5
    r = paired_balanced_accuracy(y, a, a.copy(), n_resamples=200, n_permutations=200)
    assert r["diff"] == 0.0 and r["p"] == 1.0 and r["ci_low"] == 0.0 == r["ci_high"]


def test_a_perfect_judge_beats_a_coin_with_a_small_p():
    rng = np.random.default_rng(2)
    y = rng.random(80) < 0.5
    coin = rng.random(80) < 0.5
    r = paired_balanced_accuracy(y, y.copy(), coin, n_resamples=300, n_permutations=2000)
    assert r["diff"] > 0.3 and r["ci_low"] > 0.1 and r["p"] < 0.01


@pytest.mark.slow
def test_a_real_local_model_judges_the_first_pairs(shared_dir):
    doc = run("smollm2-135m", limit=4)
    assert doc["pairs"] == 4
    assert doc["other"]["n"] + doc["other"]["n_failures"] == 4
    assert doc["offline"]["n"] == 4 and doc["offline"]["judge"]
    assert set(doc["paired_other_minus_offline"]) == {"diff", "ci_low", "ci_high", "p"}


def test_exactly_one_other_judge_is_named():
    with pytest.raises(ValueError, match="exactly one"):
        run()
    with pytest.raises(ValueError, match="exactly one"):
        run("smollm2-135m", embedder="minilm")


def test_an_llm_judges_seconds_count_only_the_pairs_it_computed():
    # 181 of 340 pairs came from the cache: the rate is the fresh calls' model time over 159
    assert model_time({"fresh_calls": 159, "latency_s": 3687.3}) == {
        "seconds_per_pair": 23.19, "pairs_computed": 159}  # fmt: skip
    assert model_time({"fresh_calls": 0, "latency_s": 0.4})["seconds_per_pair"] is None


def test_a_fully_cached_rerun_keeps_the_earlier_timing_of_the_same_judge_only():
    earlier = {"pairs": 340, "other": {"judge": "llm:q:judge-v1", "seconds_per_pair": 23.19,
                                       "pairs_computed": 159}}  # fmt: skip

    def now(judge="llm:q:judge-v1", pairs=340, computed=0):
        rate = None if computed == 0 else 9.0
        return {"pairs": pairs, "other": {"judge": judge, "seconds_per_pair": rate,
                                          "pairs_computed": computed}}  # fmt: skip

    kept = keep_timing(now(), earlier)["other"]
    assert kept["seconds_per_pair"] == 23.19 and kept["pairs_computed"] == 159
    assert "earlier run" in kept["timing_from"]
    assert keep_timing(now(computed=3), earlier)["other"]["seconds_per_pair"] == 9.0
    assert keep_timing(now(judge="llm:o:judge-v1"), earlier)["other"]["seconds_per_pair"] is None
    assert keep_timing(now(pairs=4), earlier)["other"]["seconds_per_pair"] is None
    assert keep_timing(now(), None)["other"]["seconds_per_pair"] is None
