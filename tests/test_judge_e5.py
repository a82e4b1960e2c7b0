"""experiments/judge_e5: its columns, its veto-aware decision and its dev gate, with a bag-of-words
encoder standing in for e5 (the experiment itself encodes every SciFact train sentence)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.judge_e5 import run as judge_e5
from tests.fakeembed import BowEmbedder

ABSTRACT = (
    "Aspirin does lower the risk of stroke in adults. The trial enrolled 400 adults. "
    "Headaches were rare in both arms."
)


def _encode(texts):
    return np.asarray(BowEmbedder().encode_passages(list(texts)), dtype=np.float64)


def _row(claim, label, i=0):
    return {
        "claim_id": str(i),
        "claim": claim,
        "doc_id": f"d{i}",
        "abstract": ABSTRACT,
        "label": label,
        "rationales": [],
    }


def test_the_flip_gain_is_positive_when_the_negated_claim_fits_the_evidence_better(tmp_cache):
    rows = [
        _row("Aspirin does not lower the risk of stroke in adults.", "CONTRADICT"),
        _row("Aspirin does lower the risk of stroke in adults.", "SUPPORT"),
    ]
    x = judge_e5.e5_features(rows, _encode, _encode)
    assert x.shape == (2, len(judge_e5.NAMES))
    flip = judge_e5.NAMES.index("e5_flipgain")
    assert x[0, flip] > 0 > x[1, flip]
    best, second, gap = (judge_e5.NAMES.index(n) for n in ("e5_max", "e5_second", "e5_gap"))
    np.testing.assert_allclose(x[:, gap], x[:, best] - x[:, second])
    assert len(list((tmp_cache / "judge_e5").glob("*.npy"))) == 1
    np.testing.assert_array_equal(judge_e5.e5_features(rows, None, None), x)  # from the cache


class _Model:
    def __init__(self, p):
        self.p = np.asarray(p)

    def predict_proba(self, x):
        return np.c_[1 - self.p, self.p]


def test_a_pair_is_supported_only_above_the_threshold_and_below_the_veto():
    fit = {
        "support": _Model([0.9, 0.9, 0.2]),
        "threshold": 0.5,
        "contra": _Model([0.1, 0.8, 0.1]),
        "contra_threshold": 0.7,
    }
    assert judge_e5.judged_supported(fit, np.zeros((3, 1))).tolist() == [True, False, False]
    fit["contra"] = None  # offline-v1: no veto
    assert judge_e5.judged_supported(fit, np.zeros((3, 1))).tolist() == [True, True, False]


def test_dev_is_read_only_past_the_bar(tmp_path, tmp_cache, monkeypatch):
    rng = np.random.default_rng(0)
    words = "drug trial risk stroke dose cells mice protein gene therapy".split()
    labels = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
    rows = []
    for i in range(60):
        w = rng.choice(words, 4, replace=False)
        rows.append(
            {
                **_row(f"The {w[0]} changes {w[1]} in study {i}.", labels[i % 3], i),
                "abstract": f"The {w[0]} changes {w[1]}. We measured {w[2]} and {w[3]}.",
            }
        )
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    missing = tmp_path / "no_dev_here.jsonl"
    kw = {"queries": _encode, "passages": _encode, "embedder": BowEmbedder()}
    monkeypatch.setattr(judge_e5, "DEV_BAR", 1.0)
    res = judge_e5.run(str(train), str(missing), **kw)
    assert res["dev"].startswith("not read")
    assert set(res["grouped_cv"]) == {"offline-v2", "offline-v2 + e5"}
    monkeypatch.setattr(judge_e5, "DEV_BAR", -1.0)
    with pytest.raises(Exception, match="no_dev_here"):
        judge_e5.run(str(train), str(missing), **kw)


@pytest.mark.slow
def test_under_the_real_e5_the_flip_gain_points_to_the_contradicted_claim(tmp_cache):
    from rag.index.e5_fp32 import E5Fp32Embedder

    e5 = E5Fp32Embedder()
    abstract = "Aspirin increases the risk of bleeding in adults. The trial enrolled 400 adults."
    rows = [
        {**_row(f"Aspirin {verb} the risk of bleeding in adults.", label), "abstract": abstract}
        for verb, label in (("decreases", "CONTRADICT"), ("increases", "SUPPORT"))
    ]
    x = judge_e5.e5_features(rows, e5.encode_queries, e5.encode_passages)
    flip, best, second = (judge_e5.NAMES.index(n) for n in ("e5_flipgain", "e5_max", "e5_second"))
    # the flip of the contradicted claim is the evidence's own sentence, and vice versa
    assert x[0, flip] > 0 > x[1, flip]
    assert x[1, best] > x[1, second]  # the restated sentence beats the enrolment sentence
    assert np.all(np.abs(x[:, [best, second]]) <= 1 + 1e-5)  # cosines of unit vectors
