"""experiments/judge_crossencoder: its sentence labelling, pair scoring and training loop (the
experiment itself fine-tunes on all of judge_train and is not run here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments._common import read_rows
from experiments.judge_crossencoder.run import (
    LABELS,
    _flat,
    _pair_max,
    fine_tune,
    predict,
    sentence_pairs,
)
from rag.errors import ConfigError
from tests.fakeembed import BowEmbedder


def _row(claim, abstract, label, rationales):
    return {
        "claim_id": claim[:8],
        "claim": claim,
        "abstract": abstract,
        "doc_id": "d",
        "label": label,
        "rationales": [[s] for s in rationales],
    }


def test_rationale_sentences_take_the_pair_label_and_the_rest_are_not_enough_info(
    tmp_path, tmp_cache
):
    lowers = "Aspirin lowers the risk of stroke in adults."
    abstract = (
        "Aspirin lowers the risk of stroke in adults. The trial enrolled 400 adults. "
        "Headaches were rare in both arms."
    )
    rows = [
        _row(
            "Aspirin lowers stroke risk.",
            abstract,
            "SUPPORT",
            [lowers],
        ),
        _row(
            "Aspirin raises stroke risk.",
            abstract,
            "CONTRADICT",
            [lowers],
        ),
        _row("Aspirin cures headaches.", abstract, "NOT_ENOUGH_INFO", []),
    ]
    path = tmp_path / "judge.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    read = read_rows(path)
    assert read[0]["rationales"] == [lowers]
    pairs = sentence_pairs(read, BowEmbedder(), k=2)
    assert [len(p) for p in pairs] == [2, 2, 2]
    first = dict(pairs[0])
    assert first[lowers] == LABELS.index("SUPPORT")
    assert dict(pairs[1])[lowers] == LABELS.index("CONTRADICT")
    assert all(lab == 0 for s, lab in pairs[0] if s != lowers)
    assert all(lab == 0 for _, lab in pairs[2])


def test_an_empty_file_is_a_clear_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ConfigError, match="no judge pairs"):
        read_rows(tmp_path / "empty.jsonl")


@pytest.mark.slow
def test_fine_tuning_fits_a_separable_toy_set_and_keeps_frozen_layers():
    pairs = [("the drug works", "the drug works well"), ("the drug works", "rain fell in june")] * 8
    labels = [1, 0] * 8
    model, tok, log = fine_tune(
        pairs, labels, epochs=6, freeze_layers=5, lr=1e-3, batch=8, show_progress=False
    )
    assert len(log["loss_per_epoch"]) == 6 and log["loss_per_epoch"][-1] < log["loss_per_epoch"][0]
    probs = predict(model, tok, pairs[:2])
    assert probs.shape == (2, 3) and np.allclose(probs.sum(1), 1.0, atol=1e-5)
    assert probs[0, 1] > probs[1, 1]  # the matching sentence scores higher p(SUPPORT)
    assert not any(p.requires_grad for p in model.bert.encoder.layer[0].parameters())


def test_a_pair_scores_its_best_sentence_and_rows_keep_their_order():
    rows = [{"claim": "c0"}, {"claim": "c1"}, {"claim": "c2"}]
    items = [[("a", 1), ("b", 0)], [("c", 2)], [("d", 0), ("e", 0)]]
    pairs, labels, owner = _flat(items, [2, 0], rows)
    assert pairs == [("c2", "d"), ("c2", "e"), ("c0", "a"), ("c0", "b")]
    assert labels == [0, 0, 1, 0] and owner.tolist() == [2, 2, 0, 0]
    probs = np.array([[0.8, 0.1, 0.1], [0.3, 0.6, 0.1], [0.1, 0.7, 0.2], [0.5, 0.4, 0.1]])
    assert _pair_max(probs, owner, 3).tolist() == [0.7, 0.0, 0.6]  # row 1 has no sentence here
