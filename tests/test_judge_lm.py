"""experiments/judge_lm: its scorer (the real packaged SmolLM2 under llama.cpp, slow tier), its
feature cache and its dev gate (the experiment itself featurises every train pair and is not run
here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.judge_lm import run as judge_lm
from tests.fakeembed import BowEmbedder

PASSAGE = (
    "We trained the model for three epochs on the full corpus. "
    "The learning rate was reduced when the validation loss stopped improving."
)


@pytest.fixture(scope="module")
def scorer():
    return judge_lm.ClaimScorer(judge_lm.load_llm(n_ctx=256), max_tokens=250)


@pytest.mark.slow
def test_keeping_the_prefix_gives_the_same_log_probabilities_as_a_fresh_pass(scorer):
    prefix = judge_lm.PASSAGE.format(passage=PASSAGE)
    scorer(prefix, "The model was trained for three epochs.")  # leaves the prefix cached
    kept = scorer(prefix, "The learning rate was never changed.")
    fresh = judge_lm.ClaimScorer(scorer.llm, max_tokens=250)(
        prefix, "The learning rate was never changed."
    )
    assert kept.shape == fresh.shape and len(kept) > 3
    np.testing.assert_allclose(kept, fresh, atol=1e-3)
    assert np.all(kept <= 0)  # log-probabilities


@pytest.mark.slow
def test_a_claim_copied_from_the_passage_has_positive_pmi_and_more_than_an_unrelated_one(scorer):
    copied = judge_lm.pair_features(scorer, PASSAGE, "We trained the model for three epochs.")
    unrelated = judge_lm.pair_features(
        scorer, "Rainfall in the valley doubled in June.", "We trained the model for three epochs."
    )
    assert len(copied) == len(judge_lm.NAMES) and np.all(np.isfinite(copied))
    pmi_mean = judge_lm.NAMES.index("pmi_mean")
    assert copied[pmi_mean] > 0
    assert copied[pmi_mean] > unrelated[pmi_mean]


def _rows(n):
    rng = np.random.default_rng(0)
    words = "drug trial risk stroke dose cells mice protein gene therapy".split()
    labels = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
    out = []
    for i in range(n):
        w = rng.choice(words, 4, replace=False)
        out.append(
            {
                "claim_id": str(i),
                "claim": f"The {w[0]} changes {w[1]} in study {i}.",
                "doc_id": f"d{i}",
                "abstract": f"The {w[0]} changes {w[1]}. We measured {w[2]} and {w[3]}. N was {i}.",
                "label": labels[i % 3],
                "rationales": [],
            }
        )
    return out


def test_features_are_cached_per_block_and_noise_columns_leave_dev_unread(tmp_path, tmp_cache):
    rows = _rows(60)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []

    def noise(prefix, text):  # a scorer whose log-probabilities carry no signal
        calls.append(text)
        rng = np.random.default_rng(len(calls))
        return -rng.random(len(text.split()) + 1)

    emb = BowEmbedder()
    first = judge_lm.lm_features(rows, emb, noise, show_progress=False)
    n_calls = len(calls)
    assert first.shape == (60, len(judge_lm.NAMES)) and n_calls == 4 * 60
    again = judge_lm.lm_features(rows, emb, noise, show_progress=False)
    assert len(calls) == n_calls  # every block came from the cache
    np.testing.assert_array_equal(first, again)
    assert len(list((tmp_cache / "judge_lm").glob("*.npy"))) == 2  # blocks of 50 and 10


def test_the_dev_gate_reads_dev_only_past_the_bar(tmp_path, tmp_cache, monkeypatch):
    rows = _rows(60)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    missing = tmp_path / "no_dev_here.jsonl"  # reading it would raise
    monkeypatch.setattr("rag.index.embed.minilm", lambda **kw: BowEmbedder())
    monkeypatch.setattr(judge_lm, "DEV_BAR", 1.0)  # unreachable: dev must stay unread
    res = judge_lm.run(
        str(train), str(missing), score=lambda p, t: -np.ones(3), show_progress=False
    )
    assert res["dev"].startswith("not read")
    assert set(res["grouped_cv"]) == set(judge_lm.VARIANTS)
    monkeypatch.setattr(judge_lm, "DEV_BAR", -1.0)  # always past: dev is read
    with pytest.raises(Exception, match="no_dev_here"):
        judge_lm.run(str(train), str(missing), score=lambda p, t: -np.ones(3), show_progress=False)
