"""ICT: examples drawn from the corpus without labels, a resumable trainer, a loadable reranker."""

from __future__ import annotations

import json
import math

import pytest

from rag.errors import ConfigError
from rag.retrieval.ict import ICTSettings, fingerprint, load_ict_reranker, make_examples, train
from rag.types import Chunk
from tests.conftest import build_tiny_bert

TOPICS = {
    "p1": [
        "dense retrieval encodes passages with a bi encoder model",
        "the bi encoder maps each passage to one vector for search",
        "vectors are compared with the inner product at query time",
        "training uses in batch negatives and a contrastive loss",
    ],
    "p2": [
        "sparse retrieval scores documents with term statistics",
        "bm25 weights each query term by inverse document frequency",
        "document length normalisation uses the parameter b here",
        "inverted indexes make sparse search fast on large corpora",
    ],
    "p3": [
        "rerankers read the query and passage jointly in one model",
        "a cross encoder attends across both texts at every layer",
        "reranking is slow so it only sees a small candidate pool",
        "distillation can transfer reranker scores into bi encoders",
    ],
}


def _chunks():
    out = []
    for pid, sents in TOPICS.items():
        for j in range(3):
            rot = sents[j:] + sents[:j]
            text = " ".join(s.capitalize() + "." for s in rot)
            out.append(Chunk(f"{pid}-c{j}", pid, "fixed", text, "Method", 1, 1, 0, len(text), 40))
    out.append(
        Chunk(
            "p1-ref",
            "p1",
            "fixed",
            "Smith et al. 2020. A paper. Jones. Another.",
            "References",
            9,
            9,
            0,
            40,
            12,
        )
    )
    return out


def test_examples_are_drawn_from_the_corpus_with_negatives_from_other_papers():
    chunks = _chunks()
    by_id = {c.chunk_id: c for c in chunks}
    s = ICTSettings(n_examples=20, negatives=2, remove_prob=1.0, seed=3)
    ex = make_examples(chunks, s)
    assert len(ex) == 20 and ex == make_examples(chunks, s), "deterministic for a seed"
    for e in ex:
        src = by_id[e.source_chunk]
        assert src.section != "References", "reference lists are not pseudo-query sources"
        assert e.query.rstrip(".").lower() in src.text.lower()
        assert e.query not in e.positive, "remove_prob=1: the sentence is cut from its chunk"
        assert len(e.negatives) == len(e.negative_chunks) == 2
        assert len(set(e.negative_chunks)) == 2
        assert all(by_id[n].paper_id != src.paper_id for n in e.negative_chunks)
    kept = make_examples(chunks, s.model_copy(update={"remove_prob": 0.0}))
    assert all(e.query in e.positive for e in kept)
    assert make_examples(chunks, s.model_copy(update={"seed": 4})) != ex


def test_examples_need_two_papers():
    one = [c for c in _chunks() if c.paper_id == "p1"]
    with pytest.raises(ConfigError, match="at least two papers"):
        make_examples(one, ICTSettings(n_examples=2))


@pytest.fixture()
def tiny_base(tmp_path):
    """A 2-layer, hidden-32 BERT encoder with a WordPiece vocab of the test's words, saved like
    MiniLM (no classification head: training adds a fresh one)."""
    words = [".", *sorted({w for s in sum(TOPICS.values(), []) for w in s.split()})]
    build_tiny_bert(tmp_path / "tiny-base", words, classifier=False, max_positions=128)
    return tmp_path / "tiny-base"


def test_train_saves_a_cross_encoder_the_reranker_loads(tiny_base, tmp_path):
    ex = make_examples(_chunks(), ICTSettings(n_examples=12, negatives=2))
    s = ICTSettings(n_examples=12, negatives=2, batch_groups=4, max_length=64, lr=1e-3)
    out = tmp_path / "ict"
    rec = train(ex, out, s, base=tiny_base, show_progress=False)
    assert rec["steps"] == 3 and rec["examples"] == 12
    assert rec["fingerprint"] == fingerprint(ex, s, tiny_base.name)
    assert json.loads((out / "ict.json").read_text()) == rec
    assert not (out / "checkpoint.pt").exists()
    rr = load_ict_reranker(out, max_length=64)
    assert rr.name == f"cross-encoder[ict-minilm@{rec['fingerprint'][:8]}]"
    scores = rr.score(ex[0].query, [ex[0].positive, *ex[0].negatives])
    assert len(scores) == 3 and all(isinstance(x, float) for x in scores)
    # same examples and settings: the saved model is reused, not retrained
    again = train(ex, out, s, base=tiny_base, show_progress=False)
    assert again == rec


def test_training_resumes_from_its_checkpoint(tiny_base, tmp_path, monkeypatch):
    import rag.retrieval.ict as ict

    ex = make_examples(_chunks(), ICTSettings(n_examples=20, negatives=2))
    s = ICTSettings(n_examples=20, negatives=2, batch_groups=2, max_length=64, checkpoint_every=3)
    out = tmp_path / "ict"
    real = ict.tqdm

    class Interrupting(real):
        def update(self, n=1):
            super().update(n)
            if self.n == 5:
                raise KeyboardInterrupt

    monkeypatch.setattr(ict, "tqdm", Interrupting)
    with pytest.raises(KeyboardInterrupt):
        train(ex, out, s, base=tiny_base, show_progress=True)  # a disabled bar does not count
    assert (out / "checkpoint.pt").exists() and not (out / "ict.json").exists()
    monkeypatch.setattr(ict, "tqdm", real)
    starts = []

    class Recording(real):
        def __init__(self, *a, **kw):
            starts.append(kw.get("initial"))
            super().__init__(*a, **kw)

    monkeypatch.setattr(ict, "tqdm", Recording)
    rec = train(ex, out, s, base=tiny_base, show_progress=False)
    assert starts == [3], "resumed at the last checkpoint (step 3), not from scratch"
    assert rec["steps"] == 10 and not (out / "checkpoint.pt").exists()


def test_missing_model_says_how_to_train(tmp_path):
    with pytest.raises(ConfigError, match="make ict"):
        load_ict_reranker(tmp_path / "nothing")


def test_boundary_sentences_and_captions_are_not_pseudo_queries():
    text = (
        "cut at the window start so it is a fragment of some longer sentence. "
        "Table 3: Results of every model on the test set in our study. "
        "Figure 2 shows the architecture of the retrieval model used here. "
        "A final sentence that the next window cuts in the middle of"
    )
    chunks = [Chunk(f"{p}-c", p, "fixed", text, "Results", 1, 1, 0, len(text), 60) for p in "ab"]
    with pytest.raises(ConfigError, match="usable pseudo-query"):
        make_examples(chunks, ICTSettings(n_examples=2))


def test_training_learns_to_rank_the_positive_first(tiny_base, tmp_path):
    """A short run on the tiny corpus learns something: the loss falls from chance (ln 3 = 1.0986
    for one positive among three) and the saved reranker puts the positive above both negatives
    on most training groups (chance: 1 in 3). Measured: loss 1.094 -> 0.19 over 40 steps, 16/16."""
    s = ICTSettings(
        n_examples=16, negatives=2, batch_groups=4, max_length=128, lr=5e-3, epochs=10, warmup=0.0
    )
    ex = make_examples(_chunks(), s)
    rec = train(ex, tmp_path / "ict", s, base=tiny_base, show_progress=False)
    assert rec["steps"] == 40 and rec["chance_top1"] == pytest.approx(1 / 3, abs=1e-4)
    first, last = rec["loss_by_tenth"][0], rec["loss_by_tenth"][-1]
    assert first == pytest.approx(math.log(3), abs=0.05), "starts at chance"
    assert last < 0.5 < first
    rr = load_ict_reranker(tmp_path / "ict", max_length=128)
    top = 0
    for e in ex:
        scores = rr.score(e.query, [e.positive, *e.negatives])
        top += scores[0] > max(scores[1:])
    assert top >= 13, f"positive first on {top}/16 training groups"
