"""The LLM-judge bench: the paired balanced-accuracy comparison and one real small run."""

from __future__ import annotations

import numpy as np
import pytest

from rag.bench.judges import paired_balanced_accuracy, run


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
