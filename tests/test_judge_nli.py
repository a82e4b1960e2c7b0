"""The entailment judge: deterministic, resumable training; a pinned artifact verified on load;
the ClaimJudge contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag.errors import ConfigError, JudgeError
from rag.judge.nli import NLI_FORMAT, NliJudge, claim_units
from rag.judge.nli_pin import choose_thresholds, write_weights
from rag.judge.nli_train import NliRecipe, train, trained_state
from rag.judge.synth import Pair
from rag.verdicts import VERDICT_LABELS, ClaimJudge

PAIRS = [
    Pair("Dense retrieval improves recall.", "Dense retrieval improves recall.", "supported", "t"),
    Pair("Dense retrieval improves recall.", "Dense retrieval hurts recall.", "contradicted", "t"),
    Pair("Dense retrieval improves recall.", "BM25 was tuned on TREC.", "not_said", "t"),
    Pair("The model has 7B parameters.", "The model has 7B parameters.", "supported", "t"),
    Pair("The model has 7B parameters.", "The model has 13B parameters.", "contradicted", "t"),
    Pair("The model has 7B parameters.", "It was trained on Wikipedia.", "not_said", "t"),
]
RECIPE = NliRecipe(batch_size=2, epochs=2, max_length=32, checkpoint_every=100, bf16=False)


@pytest.fixture(autouse=True)
def one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _same(a, b) -> bool:
    import torch

    sa, sb = trained_state(a), trained_state(b)
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_training_is_deterministic_and_resumes_to_the_same_weights(tmp_path):
    full, _, log = train(PAIRS, RECIPE, tmp_path / "a", show_progress=False)
    assert log["steps"] == 6 and log["of_steps"] == 6
    again, _, _ = train(PAIRS, RECIPE, tmp_path / "b", show_progress=False)
    assert _same(full, again)
    # killed after 2 steps (the checkpoint is written), then resumed in a new call
    _, _, part = train(PAIRS, RECIPE, tmp_path / "c", show_progress=False, stop_after=2)
    assert part["steps"] == 2 and (tmp_path / "c" / "checkpoint.pt").exists()
    resumed, _, log_c = train(PAIRS, RECIPE, tmp_path / "c", show_progress=False)
    assert log_c["steps"] == 6
    assert _same(full, resumed)


def test_training_leaves_the_word_embeddings_frozen(tmp_path):
    model, _, _ = train(
        PAIRS[:2], RECIPE.model_copy(update={"epochs": 1}), tmp_path, show_progress=False
    )
    state = trained_state(model)
    assert "bert.embeddings.word_embeddings.weight" not in state
    assert "classifier.weight" in state and state["classifier.weight"].shape[0] == 3


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """A pinned judge made from an untrained head (the contract does not need a good model)."""
    from rag.judge.nli_train import load_backbone

    root = tmp_path_factory.mktemp("pin")
    model, _ = load_backbone("all-MiniLM-L6-v2", 0)
    digest = write_weights(model, root / "tiny.safetensors")
    meta = {
        "format": NLI_FORMAT,
        "name": "tiny",
        "weights": "tiny.safetensors",
        "sha256": digest,
        "recipe": RECIPE.model_dump(),
        "threshold": 0.5,
        "contra_threshold": 0.5,
    }
    (root / "tiny.json").write_text(json.dumps(meta))
    return root, digest


def test_the_judge_is_a_claim_judge_and_keeps_pair_order(pinned, tmp_cache):
    judge = NliJudge("tiny", pin_root=pinned[0])
    assert isinstance(judge, ClaimJudge)
    ctx = "Dense retrieval improves recall. BM25 is a lexical baseline."
    pairs = [("Dense retrieval improves recall.", ctx), ("Cats purr loudly.", ctx)]
    out = judge.predict(pairs)
    assert [v.label in VERDICT_LABELS for v in out] == [True, True]
    assert out[1].label == "not_found"  # no content word in common with any sentence
    assert judge.verdict(*pairs[0]) == out[0]
    assert 0.0 <= out[0].score <= 1.0 and set(out[0].trace) >= {"p_supported", "p_contradicted"}
    with pytest.raises(JudgeError, match="empty claim"):
        judge.verdict("  ", ctx)


def test_scores_are_cached_on_disk_and_a_rerun_runs_no_model(pinned, tmp_cache):
    ctx = "Dense retrieval improves recall. BM25 is a lexical baseline."
    pairs = [("Dense retrieval improves recall.", ctx), ("BM25 improves recall.", ctx)]
    first = NliJudge("tiny", pin_root=pinned[0]).scores(pairs)
    again = NliJudge("tiny", pin_root=pinned[0])
    again.model = None  # any model call would now fail
    assert np.array_equal(again.scores(pairs[::-1]), first[::-1])
    other = NliJudge("tiny", pin_root=pinned[0], max_units=1)  # another key: computed afresh
    assert other.scores(pairs[:1]).shape == (1, 3)


def test_a_pinned_artifact_whose_bytes_change_is_refused_naming_both_digests(pinned, tmp_path):
    root, digest = pinned
    for name in ("tiny.json", "tiny.safetensors"):
        (tmp_path / name).write_bytes((root / name).read_bytes())
    data = bytearray((tmp_path / "tiny.safetensors").read_bytes())
    data[-3] ^= 0x01
    (tmp_path / "tiny.safetensors").write_bytes(bytes(data))
    with pytest.raises(ConfigError) as e:
        NliJudge("tiny", pin_root=tmp_path)
    import hashlib

    assert digest in str(e.value) and hashlib.sha256(bytes(data)).hexdigest() in str(e.value)
    with pytest.raises(ConfigError, match="make judge-train"):
        NliJudge("absent", pin_root=tmp_path)


def test_claim_units_keep_the_closest_sentences_and_windows_in_context_order():
    ctx = "Alpha beta gamma. Dense retrieval improves recall. Cats purr. Recall matters."
    units, overlap = claim_units(ctx, 3, "Dense retrieval improves recall.")
    assert overlap == 4
    assert units[0] == "Dense retrieval improves recall."
    assert len(units) == 3 and all(u in ctx or " " in u for u in units)


def test_thresholds_maximise_balanced_accuracy_on_the_held_out_rows():
    import numpy as np

    scores = np.array([[0.9, 0.1, 3], [0.8, 0.1, 3], [0.2, 0.9, 3], [0.1, 0.2, 3]])
    t = choose_thresholds(scores, ["SUPPORT", "SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"])
    assert 0.2 < t["threshold"] <= 0.8 and t["held_out_ba"] == 1.0
    assert 0.2 < t["contra_threshold"] <= 0.9 and t["held_out_contra_ba"] == 1.0
