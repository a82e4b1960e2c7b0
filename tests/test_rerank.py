"""Rerankers: a tiny cross-encoder built in the test, and bi-encoder re-scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag.errors import ConfigError, RetrievalError
from rag.ir import Reranker
from rag.retrieval.ict import load_ict_reranker
from rag.retrieval.registry import load_reranker
from rag.retrieval.rerank import CrossEncoderReranker, EmbedderReranker, FirstStageFusion
from tests.conftest import build_tiny_bert

WORDS = "dense sparse retrieval bm25 passage query rerank fusion model paper the a of is".split()


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A 2-layer, hidden-32 BERT sequence classifier with a 20-token WordPiece vocab, on disk."""
    d = tmp_path_factory.mktemp("tiny-ce")
    model, tok = build_tiny_bert(d, WORDS, classifier=True)
    return d, model, tok


def test_cross_encoder_scores_match_the_model_forward_pass(tiny_cross_encoder):
    import torch

    path, model, tok = tiny_cross_encoder
    rr = CrossEncoderReranker(path, max_length=32)
    assert isinstance(rr, Reranker) and rr.name == f"cross-encoder[{path.name}]"
    query = "dense retrieval"
    texts = ["dense passage retrieval model", "bm25 sparse", "the paper of fusion"]
    got = rr.score(query, texts)
    assert len(got) == 3 and all(isinstance(x, float) for x in got)
    with torch.no_grad():
        enc = tok([query] * 3, texts, padding=True, truncation=True, return_tensors="pt")
        logits = model(**enc).logits[:, 0].numpy()
    # sentence-transformers applies a sigmoid to single-label cross-encoders
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-logits)), rtol=1e-5, atol=1e-6)
    assert rr.score(query, texts) == got, "deterministic"
    assert rr.score(query, []) == []


def test_cross_encoder_missing_weights_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="not available locally"):
        CrossEncoderReranker(tmp_path / "no-such-model")


def test_cross_encoder_accepts_a_loaded_model_with_several_labels():
    class TwoLabel:
        def predict(self, pairs, **kw):
            return np.array([[0.9, 0.1], [0.2, 0.7]])[: len(pairs)]

    rr = CrossEncoderReranker(TwoLabel(), name="two-label")
    assert rr.score("q", ["a", "b"]) == [0.1, 0.7]  # the last label is "relevant"
    assert rr.name == "two-label"


class TableEmbedder:
    """Looks vectors up in a table (unit vectors chosen by hand); counts passage encodings."""

    def __init__(self, name: str, table: dict[str, list[float]]) -> None:
        self.name, self.table = name, table
        self.dim = len(next(iter(table.values())))
        self.fingerprint = f"table-{name}"
        self.passage_calls: list[list[str]] = []

    def encode_queries(self, texts):
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)

    def encode_passages(self, texts):
        self.passage_calls.append(list(texts))
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


E1 = {"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.8, 0.6]}  # cos 1.0, 0.6, 0.8
E2 = {"q": [0.0, 1.0], "a": [0.866025, 0.5], "b": [0.43589, 0.9], "c": [0.714143, 0.7]}  # .5 .9 .7


def test_embedder_reranker_single_is_cosine(tmp_cache):
    rr = EmbedderReranker(TableEmbedder("e1", E1))
    assert rr.name == "embed[e1]"
    assert rr.score("q", ["a", "b", "c"]) == pytest.approx([1.0, 0.6, 0.8], abs=1e-6)


def test_embedder_reranker_ensemble_averages_z_scores(tmp_cache):
    # e1 cosines (1.0, 0.6, 0.8): mean 0.8, population sd sqrt(0.08/3) -> z = (√1.5, -√1.5, 0)
    # e2 cosines (0.5, 0.9, 0.7): z = (-√1.5, √1.5, 0) -> equal weights cancel out
    e1, e2 = TableEmbedder("e1", E1), TableEmbedder("e2", E2)
    assert EmbedderReranker([e1, e2]).score("q", ["a", "b", "c"]) == pytest.approx(
        [0.0, 0.0, 0.0], abs=1e-5
    )
    z = math.sqrt(1.5)
    weighted = EmbedderReranker([e1, e2], weights=[3, 1])
    assert weighted.name == "embed-zscore[e1+e2]"
    # (3 z1 + z2) / 4 = (3√1.5 - √1.5) / 4 = √1.5 / 2 for "a"
    assert weighted.score("q", ["a", "b", "c"]) == pytest.approx([z / 2, -z / 2, 0.0], abs=1e-5)
    # plain mean of raw cosines
    assert EmbedderReranker([e1, e2], combine="mean").score("q", ["a", "b"]) == pytest.approx(
        [0.75, 0.75], abs=1e-5
    )


def test_embedder_reranker_encodes_each_passage_once(tmp_cache):
    e = TableEmbedder("e1", E1)
    rr = EmbedderReranker(e)
    rr.score("q", ["a", "b"])
    rr.score("q", ["b", "a", "c"])
    encoded = [t for call in e.passage_calls for t in call]
    assert sorted(encoded) == ["a", "b", "c"], "b and a came from the cache the second time"
    # the disk cache survives a new reranker (and a new process) for the same embedder
    e_again = TableEmbedder("e1", E1)
    EmbedderReranker(e_again).score("q", ["a", "b", "c"])
    assert e_again.passage_calls == []
    # without the disk cache, vectors are memoised in memory only
    e_mem = TableEmbedder("e1", E1)
    mem = EmbedderReranker(e_mem, disk_cache=False)
    mem.score("q", ["a", "b"])
    mem.score("q", ["a", "b", "c"])
    assert [sorted(c) for c in e_mem.passage_calls] == [["a", "b"], ["c"]]


def test_embedder_reranker_bad_settings():
    e = TableEmbedder("e1", E1)
    with pytest.raises(ConfigError, match="at least one embedder"):
        EmbedderReranker([])
    with pytest.raises(ConfigError, match="one non-negative number per embedder"):
        EmbedderReranker([e], weights=[1, 2])
    with pytest.raises(ConfigError, match="combine"):
        EmbedderReranker(e, combine="max")
    assert EmbedderReranker(e, disk_cache=False).score("q", []) == []


def test_rerank_retriever_orders_the_pool_by_cross_encoder_scores(tiny_cross_encoder):
    from rag.index.store import ChunkStore
    from rag.retrieval.retrievers import RerankRetriever
    from rag.types import Hit

    texts = {"d1": "bm25 sparse", "d2": "dense passage retrieval", "d3": "rerank model paper"}
    store = ChunkStore.from_docs(texts)

    class FirstStage:
        name = "fixed"

        def retrieve(self, query, k):
            return [Hit(c, c, 1, "", texts[c], 1.0 / (i + 1)) for i, c in enumerate(texts)][:k]

    rr = CrossEncoderReranker(tiny_cross_encoder[0], max_length=32)
    hits = RerankRetriever(FirstStage(), rr, pool=3).retrieve("dense retrieval", 2)
    scores = dict(zip(texts, rr.score("dense retrieval", list(texts.values())), strict=True))
    best = sorted(scores, key=lambda c: (-scores[c], c))[:2]
    assert [h.chunk_id for h in hits] == best
    assert [h.score for h in hits] == [scores[c] for c in best]
    assert all(h.text == store[h.chunk_id].text for h in hits)


@pytest.mark.slow
def test_scifact_hybrid_and_rerank_sanity(shared_dir):
    """SciFact test (300 queries): hybrid beats both of its inputs; re-scoring the hybrid pool with
    the first-stage embedder gives back dense retrieval's top 10 (its nDCG@10 exactly)."""
    from rag.bench.rerank import compare_rerankers

    res = compare_rerankers(("minilm",), datasets=("scifact",), pool=50)["scifact"]
    s = {name: row["ndcg@10"]["mean"] for name, row in res["systems"].items()}
    assert s["dense"] == pytest.approx(0.645, abs=0.01)  # MTEB all-MiniLM-L6-v2
    assert s["hybrid"] == pytest.approx(0.6852, abs=0.005)  # measured here
    assert s["hybrid"] > max(s["dense"], s["bm25"])
    assert s["rerank:minilm"] == pytest.approx(s["dense"], abs=1e-4)
    assert res["systems"]["rerank:minilm"]["label"] == "rerank[embed[all-MiniLM-L6-v2]]"
    assert 0.9 < res["pool_recall@50"] <= 1.0
    assert res["systems"]["dense"]["vs_hybrid"]["diff"] < 0


class _Fixed:
    name = "fixed"

    def __init__(self, scores):
        self.scores = scores

    def score(self, query, texts):
        return self.scores[: len(texts)]


def test_first_stage_fusion_is_rrf_of_the_two_orders():
    from rag.retrieval.rerank import FirstStageFusion

    agree = FirstStageFusion(_Fixed([3.0, 2.0, 1.0]))
    s = agree.score("q", ["a", "b", "c"])
    assert s == pytest.approx([2 / 61, 2 / 62, 2 / 63])
    assert agree.name == "rrf[first-stage+fixed]"
    rev = FirstStageFusion(_Fixed([1.0, 2.0, 3.0])).score("q", ["a", "b", "c"])
    assert rev == pytest.approx([1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])
    assert rev[0] > rev[1] < rev[2]
    # twelve texts: ids are zero-padded, so "10" does not sort before "2"
    many = FirstStageFusion(_Fixed([0.0] * 12), k=1).score("q", [str(i) for i in range(12)])
    assert many == sorted(many, reverse=True)
    assert FirstStageFusion(_Fixed([])).score("q", []) == []
    with pytest.raises(RetrievalError, match="returned 1 scores for 2 texts"):
        FirstStageFusion(_Fixed([1.0])).score("q", ["a", "b"])


def test_fuse_prefix_wraps_any_reranker(tmp_path):
    from rag.retrieval.registry import load_reranker

    with pytest.raises(ConfigError, match="not available locally"):
        load_reranker(f"fuse:cross-encoder:{tmp_path / 'none'}")


def test_the_rerank_rows_model_is_loaded_only_when_the_profile_has_that_row(tmp_path):
    from rag.report.readings import components
    from rag.retrieval.registry import reranker_for

    missing = f"cross-encoder:{tmp_path / 'none'}"  # would raise if anything tried to load it
    assert reranker_for(["dense", "bm25", "hybrid"], missing) is None
    with pytest.raises(ConfigError, match="not available locally"):
        reranker_for(["hybrid", "rerank"], missing)
    assert "no `rerank` row" in components(None, [], "smollm2-135m", {}).data


def test_the_reading_names_each_row_not_run_with_its_reason_once_bracketed():
    from rag.report.readings import components

    reasons = {"rerank": "not run in this profile (see `retrievers`)", "ict": "no model: train it"}
    text = components(None, [], "smollm2-135m", reasons).data
    expected = "`rerank` — not run in this profile (see `retrievers`); `ict` — no model: train it."
    assert f"Not run: {expected}" in text
    assert "((" not in text and "))" not in text


# -- conformance: one contract over every reranker (like the retriever one in test_retrieve) ----

CONTRACT_QUERY = "dense passage retrieval"
CONTRACT_TEXTS = [
    "dense passage retrieval model",
    "bm25 sparse retrieval",
    "the paper of fusion",
    "rerank the query passage",
    "a model of the paper",
]


@pytest.fixture(scope="module")
def tiny_ict_model(tmp_path_factory):
    """A tiny ICT cross-encoder trained for two steps, saved where ``load_ict_reranker`` reads."""
    from rag.retrieval.ict import ICTSettings, make_examples, train
    from tests.test_ict import TOPICS, _chunks

    d = tmp_path_factory.mktemp("ict")
    words = [".", *sorted({w for s in sum(TOPICS.values(), []) for w in s.split()})]
    build_tiny_bert(d / "base", words, classifier=False, max_positions=128)
    s = ICTSettings(n_examples=8, negatives=2, batch_groups=4, max_length=64)
    train(make_examples(_chunks(), s), d / "ict", s, base=d / "base", show_progress=False)
    return d / "ict"


def _hash(name, dim, salt):
    from tests.test_retrieve import HashEmbedder

    return HashEmbedder(name, dim, salt)


#: name -> (factory(tiny cross-encoder folder, tiny ICT folder), how a score depends on the pool):
#: "pointwise" on its own text only, "pool" on the set of texts (not their order), "position" on
#: the text's first-stage position too.
RERANKERS = {
    "cross-encoder": (lambda ce, ict: CrossEncoderReranker(ce, max_length=32), "pointwise"),
    "cross-encoder-by-name": (lambda ce, ict: load_reranker(f"cross-encoder:{ce}"), "pointwise"),
    "embedder": (
        lambda ce, ict: EmbedderReranker(_hash("h", 32, "a"), disk_cache=False),
        "pointwise",
    ),
    "embedder-ensemble": (
        lambda ce, ict: EmbedderReranker(
            [_hash("h1", 32, "a"), _hash("h2", 48, "b")], disk_cache=False
        ),
        "pool",  # z-scores over the pool
    ),
    "ict": (lambda ce, ict: load_ict_reranker(ict, max_length=64), "pointwise"),
    "fuse-cross-encoder": (
        lambda ce, ict: FirstStageFusion(CrossEncoderReranker(ce, max_length=32)),
        "position",
    ),
    "fuse-embedder": (
        lambda ce, ict: FirstStageFusion(EmbedderReranker(_hash("h", 32, "a"), disk_cache=False)),
        "position",
    ),
}


@pytest.mark.parametrize("kind", sorted(RERANKERS))
def test_reranker_conformance(kind, tiny_cross_encoder, tiny_ict_model, tmp_cache):
    """The interface every reranker keeps (STYLE.md §6): a Reranker with a name, one finite
    float per text in the order given, deterministic, nothing for no texts."""
    factory, depends_on = RERANKERS[kind]
    rr = factory(tiny_cross_encoder[0], tiny_ict_model)
    assert isinstance(rr, Reranker)
    assert isinstance(rr.name, str) and rr.name
    texts, n = CONTRACT_TEXTS, len(CONTRACT_TEXTS)
    scores = rr.score(CONTRACT_QUERY, texts)
    assert isinstance(scores, list) and len(scores) == n
    assert all(isinstance(x, float) and math.isfinite(x) for x in scores)
    assert len(set(scores)) > 1, "the scores tell the texts apart"
    assert rr.score(CONTRACT_QUERY, texts) == scores, "deterministic"
    assert rr.score(CONTRACT_QUERY, []) == []
    assert len(rr.score(CONTRACT_QUERY, texts[:2])) == 2
    back = rr.score(CONTRACT_QUERY, texts[::-1])
    alone = [rr.score(CONTRACT_QUERY, [t])[0] for t in texts]
    if depends_on in ("pointwise", "pool"):
        # "in the order given": reversing the texts reverses their scores
        assert back[::-1] == pytest.approx(scores, rel=1e-5, abs=1e-6)
    if depends_on == "pointwise":  # a text scored alone keeps its score from the batch
        assert alone == pytest.approx(scores, rel=1e-5, abs=1e-6)
    if depends_on == "pool":  # alone, every z-score is 0 (sd = 0 is defined as 0, never NaN)
        assert alone == [0.0] * n
    if depends_on == "position":
        # RRF (k=60) of the first-stage position and the inner rank: each term lies in
        # [1/(60+n), 1/61], the first text's first-stage term is 1/61, and alone a text is 2/61
        assert all(2 / (60 + n) <= x <= 2 / 61 for x in scores)
        assert scores[0] >= 1 / 61 + 1 / (60 + n)
        assert alone == pytest.approx([2 / 61] * n)
