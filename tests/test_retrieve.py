"""Retrievers: one conformance test over all of them, plus the behaviour of each.

Tiny deterministic fakes stand in for the embedder, the indexes and the LLM so the suite is fast
and offline; the fakes are real implementations of the interfaces (hashing bag-of-words vectors,
brute-force inner product, term-overlap scoring), not mocks.
"""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pydantic
import pytest

from rag.errors import ConfigError, IndexBuildError, RetrievalError
from rag.index.store import ChunkStore
from rag.ir import apply_cap, latency_summary, paper_level, sort_hits
from rag.retrieval.rerank import EmbedderReranker
from rag.retrieval.retrievers import (
    RETRIEVER_NAMES,
    BM25Retriever,
    CappedRetriever,
    Components,
    DenseRetriever,
    HybridRetriever,
    HyDERetriever,
    MultiQueryRetriever,
    PaperLevelRetriever,
    RerankRetriever,
    RetrievalSettings,
    Retriever,
    build_retriever,
    run_queries,
)
from rag.retrieval.variants import LLMVariants, rule_variants
from rag.shard import current_slot, in_shard, usable_cpus
from rag.types import Chunk, Hit
from tests.fakechat import FakeChatModel

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "of", "and", "in", "is", "what", "how", "does", "to", "for", "by", "on"}


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOP]


class HashEmbedder:
    """Bag-of-words vectors hashed into ``dim`` buckets (md5, so stable across runs), L2-normed."""

    def __init__(self, name: str = "hash", dim: int = 64, salt: str = "") -> None:
        self.name, self.dim, self.salt = name, dim, salt
        self.fingerprint = f"{name}-{dim}-{salt}"
        self.calls = 0

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for tok in tokens(t):
                h = int(hashlib.md5((self.salt + tok).encode()).hexdigest(), 16)
                out[i, h % self.dim] += 1.0
            norm = np.linalg.norm(out[i])
            if norm == 0:
                out[i, 0] = 1.0
            else:
                out[i] /= norm
        return out

    encode_queries = _encode
    encode_passages = _encode


class BruteDenseIndex:
    """Exact inner-product search over all vectors; ties broken by id."""

    def __init__(self, ids: list[str], vecs: np.ndarray) -> None:
        self.ids, self.vecs = ids, vecs

    def search(self, qvecs: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        out = []
        for q in qvecs:
            scores = self.vecs @ q
            pairs = sorted(zip(self.ids, scores.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
            out.append(pairs[:k])
        return out


class OverlapIndex:
    """Lexical scoring: distinct query terms found in the document (zero scores omitted)."""

    def __init__(self, ids: list[str], texts: list[str]) -> None:
        self.docs = {i: set(tokens(t)) for i, t in zip(ids, texts, strict=True)}

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        q = set(tokens(query))
        pairs = [(i, float(len(q & d))) for i, d in self.docs.items() if q & d]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]


def echo_reply(messages, prompt_version) -> str:
    """Variants and hypothetical passages built from the question in the last message."""
    user = messages[-1]["content"]
    question = user.split("Question:")[-1].replace("Passage:", "").strip()
    if prompt_version.startswith("hyde"):
        return f"In this paper, {question.rstrip('?')} is studied with retrieval and attention."
    return f"1. {question} methods\n2. {' '.join(reversed(tokens(question)))}"


def echo_llm(reply: str | None = None) -> FakeChatModel:
    """The shared fake ChatModel answering :func:`echo_reply`, or a fixed ``reply``."""
    return FakeChatModel(echo_reply if reply is None else reply, name="echo-llm")


TEXTS = {
    "p1": [
        "Dense passage retrieval encodes questions and passages with dual encoders.",
        "The dual encoder is trained with in-batch negatives for dense retrieval.",
        "Dense retrieval outperforms BM25 on open-domain question answering.",
        "We release the code of dense passage retrieval.",
    ],
    "p2": [
        "BM25 is a lexical ranking function based on term frequency.",
        "Document length normalisation in BM25 uses the parameter b.",
        "BM25 remains a strong baseline for retrieval.",
    ],
    "p3": [
        "Reciprocal rank fusion combines rankings from several retrievers.",
        "Fusion of BM25 and dense retrieval improves recall.",
        "Rank fusion needs no score normalisation.",
    ],
    "p4": [
        "Cross-encoders rerank a candidate pool by reading query and passage jointly.",
        "Reranking the top passages improves precision of retrieval.",
    ],
}


def make_store() -> ChunkStore:
    chunks = []
    for paper, texts in TEXTS.items():
        for i, text in enumerate(texts):
            chunks.append(
                Chunk(
                    chunk_id=f"{paper}-c{i}",
                    paper_id=paper,
                    strategy="test",
                    text=text,
                    section=f"Section {i}",
                    page_start=i + 1,
                    page_end=i + 1,
                    char_start=0,
                    char_end=len(text),
                    n_tokens=len(text.split()),
                )
            )
    return ChunkStore(chunks)


@pytest.fixture(scope="module")
def parts():
    store = make_store()
    emb = HashEmbedder()
    dense_index = BruteDenseIndex(store.ids, emb.encode_passages(store.texts))
    bm25_index = OverlapIndex(store.ids, store.texts)
    return store, emb, dense_index, bm25_index


def _dense(p):
    store, emb, di, _ = p
    return DenseRetriever(emb, di, store)


def _bm25(p):
    return BM25Retriever(p[3], p[0])


def _hybrid(p):
    return HybridRetriever(_dense(p), _bm25(p), pool=20)


FACTORIES = {
    "dense": _dense,
    "bm25": _bm25,
    "hybrid": _hybrid,
    "rerank-embed": lambda p: RerankRetriever(
        _hybrid(p), EmbedderReranker(HashEmbedder("hash2", 32, salt="x"), disk_cache=False), pool=8
    ),
    "rerank-ensemble": lambda p: RerankRetriever(
        _hybrid(p),
        EmbedderReranker(
            [HashEmbedder("h1", 32, "a"), HashEmbedder("h2", 48, "b")], disk_cache=False
        ),
        pool=8,
    ),
    "multi-query-rules": lambda p: MultiQueryRetriever(_hybrid(p), rule_variants, 2, 10),
    "multi-query-llm": lambda p: MultiQueryRetriever(_dense(p), LLMVariants(echo_llm()), 2, 10),
    "hyde": lambda p: HyDERetriever(echo_llm(), p[1], p[2], p[0]),
    "hyde-passage-only": lambda p: HyDERetriever(echo_llm(), p[1], p[2], p[0], with_query=False),
    "capped-hybrid": lambda p: CappedRetriever(_hybrid(p), 1, depth=20),
    "paper-level-dense": lambda p: PaperLevelRetriever(_dense(p), depth=20),
}
QUERIES = ["How does dense retrieval work?", "BM25 length normalisation", "rank fusion recall"]


def check_contract(r: Retriever, store: ChunkStore) -> None:
    """The interface every retriever must keep (STYLE.md §6)."""
    assert isinstance(r, Retriever)
    assert isinstance(r.name, str) and r.name
    for q in QUERIES:
        for k in (1, 3, 5):
            hits = r.retrieve(q, k)
            assert 0 < len(hits) <= k
            assert hits == sort_hits(hits), "sorted by score desc, ties by chunk id"
            assert len({h.chunk_id for h in hits}) == len(hits)
            for h in hits:
                c = store[h.chunk_id]
                assert (h.paper_id, h.page, h.section, h.text) == (
                    c.paper_id,
                    c.page_start,
                    c.section,
                    c.text,
                )
                assert isinstance(h.score, float) and np.isfinite(h.score)
            assert r.retrieve(q, k) == hits, "deterministic"
        capped = CappedRetriever(r, 1, depth=20).retrieve(q, 4)
        assert len({h.paper_id for h in capped}) == len(capped) > 0
        capped2 = CappedRetriever(r, 2, depth=20).retrieve(q, 6)
        assert max(sum(h.paper_id == p for h in capped2) for p in TEXTS) <= 2
        papers = paper_level(r.retrieve(q, 8))
        assert len({h.paper_id for h in papers}) == len(papers) > 0
    for bad_query in ("", "   ", None):
        with pytest.raises(RetrievalError, match="query"):
            r.retrieve(bad_query, 3)
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(RetrievalError, match="k must be"):
            r.retrieve("dense retrieval", bad_k)


@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_conformance(kind, parts):
    check_contract(FACTORIES[kind](parts), parts[0])


@pytest.mark.parametrize("name", RETRIEVER_NAMES)
def test_conformance_with_the_project_indexes(name):
    """The same contract over rag.index.dense.DenseIndex and rag.index.bm25.BM25Index (hashing
    embedder)."""
    from rag.index import bm25, dense

    store = make_store()
    emb = HashEmbedder()
    comps = Components(
        store,
        embedder=emb,
        dense_index=dense.DenseIndex(store.ids, emb.encode_passages(store.texts)),
        bm25_index=bm25.BM25Index(store.ids, store.texts),
        reranker=EmbedderReranker(HashEmbedder("r", 32, "r"), disk_cache=False),
        llm=echo_llm(),
    )
    check_contract(build_retriever(name, comps, RetrievalSettings(hybrid_pool=20)), store)


def test_dense_ranks_by_inner_product(parts):
    store, emb, di, _ = parts
    q = "dense passage retrieval dual encoders"
    qv = emb.encode_queries([q])[0]
    expected = sorted(
        (
            (cid, float(v @ qv))
            for cid, v in zip(store.ids, emb.encode_passages(store.texts), strict=True)
        ),
        key=lambda p: (-p[1], p[0]),
    )[:3]
    hits = DenseRetriever(emb, di, store).retrieve(q, 3)
    assert [(h.chunk_id, h.score) for h in hits] == [(c, pytest.approx(s)) for c, s in expected]


def test_bm25_retriever_uses_index_scores(parts):
    hits = _bm25(parts).retrieve("BM25 length normalisation parameter", 2)
    # p2-c1 holds bm25, length, normalisation, parameter (4 terms); p1-c2, p2-c0, p2-c2 and p3-c1
    # hold only "bm25" (1 term): the tie goes to the smallest id
    assert [h.chunk_id for h in hits] == ["p2-c1", "p1-c2"]
    assert [h.score for h in hits] == [4.0, 1.0]


def _ranx_rrf(ranked: list[list[str]]) -> list[tuple[str, float]]:
    """RRF (k = 60) of ranked id lists computed by ranx, the oracle: fused order, ties by id."""
    import ranx

    runs = [ranx.Run({"q": {c: float(len(r) - i) for i, c in enumerate(r)}}) for r in ranked]
    fused = ranx.fuse(runs=runs, method="rrf", params={"k": 60}).to_dict()["q"]
    return sorted(fused.items(), key=lambda kv: (-round(kv[1], 12), kv[0]))


def _same_ranking(hits, expected) -> None:
    assert [h.chunk_id for h in hits] == [c for c, _ in expected]
    assert [h.score for h in hits] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_hybrid_is_rrf_of_dense_and_bm25(parts):
    q = "fusion of dense retrieval and BM25"
    d = [h.chunk_id for h in _dense(parts).retrieve(q, 20)]
    b = [h.chunk_id for h in _bm25(parts).retrieve(q, 20)]
    hits = _hybrid(parts).retrieve(q, 5)
    _same_ranking(hits, _ranx_rrf([d, b])[:5])
    # the chunk found by both runs near the top: 1/(60+r_dense) + 1/(60+r_bm25)
    top = hits[0]
    assert top.score == pytest.approx(
        1 / (60 + d.index(top.chunk_id) + 1) + 1 / (60 + b.index(top.chunk_id) + 1)
    )


class RecordingReranker:
    """Scores by a fixed preference for one paper; records how many passages it was shown."""

    name = "prefers-p4"

    def __init__(self, store: ChunkStore) -> None:
        self.by_text = {store[c].text: store[c].paper_id for c in store}
        self.seen: list[int] = []

    def score(self, query, texts):
        self.seen.append(len(texts))
        return [1.0 if self.by_text[t] == "p4" else 0.0 for t in texts]


def test_rerank_scores_the_whole_pool_before_the_cap(parts):
    store = parts[0]
    rr = RecordingReranker(store)
    first = _hybrid(parts)
    pool = first.retrieve("dense retrieval", 10)
    assert {h.paper_id for h in pool[:2]} == {"p1"}, "first stage's top 2 come from p1"
    reranked = CappedRetriever(RerankRetriever(first, rr, pool=10), 1, depth=10)
    hits = reranked.retrieve("dense retrieval", 2)
    assert rr.seen == [10], "the reranker saw the uncapped pool of 10"
    p4 = [h for h in pool if h.paper_id == "p4"]
    assert p4, "a p4 chunk is in the pool"
    # p4's best chunk (score 1, ties by id) comes first, then the best remaining paper's chunk
    assert hits[0].paper_id == "p4" and hits[0].score == 1.0
    assert hits[0].chunk_id == min(h.chunk_id for h in p4)
    assert len({h.paper_id for h in hits}) == 2
    assert "prefers-p4" in reranked.name


def test_rerank_rejects_a_reranker_that_drops_scores(parts):
    class Short:
        name = "short"

        def score(self, query, texts):
            return [0.0] * (len(texts) - 1)

    with pytest.raises(RetrievalError, match="returned 7 scores for 8 passages"):
        RerankRetriever(_hybrid(parts), Short(), pool=8).retrieve("dense retrieval", 3)


def test_multi_query_fuses_original_and_variants(parts):
    base = _dense(parts)
    variants = lambda q, n: ["BM25 lexical ranking", "rank fusion"][:n]  # noqa: E731
    mq = MultiQueryRetriever(base, variants, n_variants=2, pool=10)
    hits = mq.retrieve("dense retrieval", 4)
    assert mq.last_queries == ["dense retrieval", "BM25 lexical ranking", "rank fusion"]
    runs = [[h.chunk_id for h in base.retrieve(q, 10)] for q in mq.last_queries]
    _same_ranking(hits, _ranx_rrf(runs)[:4])
    # with no variants it reduces to the base ranking
    plain = MultiQueryRetriever(base, variants, n_variants=0, pool=10).retrieve(
        "dense retrieval", 4
    )
    assert [h.chunk_id for h in plain] == [h.chunk_id for h in base.retrieve("dense retrieval", 4)]


def test_hyde_averages_query_and_passage_vectors(parts):
    store, emb, di, _ = parts
    llm = echo_llm(reply="BM25 uses term frequency and document length normalisation.")
    hy = HyDERetriever(llm, emb, di, store)
    v = hy.query_vector("What is BM25?")
    mean = (emb.encode_queries(["What is BM25?"])[0] + emb.encode_passages([llm.reply])[0]) / 2
    np.testing.assert_allclose(v[0], mean / np.linalg.norm(mean), rtol=1e-6)
    only = HyDERetriever(llm, emb, di, store, with_query=False).query_vector("What is BM25?")
    np.testing.assert_allclose(only[0], emb.encode_passages([llm.reply])[0], rtol=1e-6)
    assert hy.retrieve("What is BM25?", 1)[0].paper_id == "p2"


def test_hyde_falls_back_to_the_query_on_empty_passage(parts, caplog):
    store, emb, di, _ = parts
    hy = HyDERetriever(echo_llm(reply="   "), emb, di, store)
    with caplog.at_level("WARNING", logger="rag.retrieval.retrievers"):
        hits = hy.retrieve("dense passage retrieval", 3)
    assert hy.fallbacks == 1 and "empty hypothetical passage" in caplog.text
    assert hits == _dense(parts).retrieve("dense passage retrieval", 3)


def _hit(cid: str, paper: str, score: float) -> Hit:
    return Hit(cid, paper, 1, "", "", score)


def test_apply_cap_and_paper_level_by_hand():
    hits = [_hit("a1", "A", 0.9), _hit("a2", "A", 0.8), _hit("b1", "B", 0.7), _hit("a3", "A", 0.6)]
    assert [h.chunk_id for h in apply_cap(hits, 1)] == ["a1", "b1"]
    assert [h.chunk_id for h in apply_cap(hits, 2)] == ["a1", "a2", "b1"]
    shuffled = [hits[3], hits[2], hits[0], hits[1]]
    assert [h.chunk_id for h in paper_level(shuffled)] == ["a1", "b1"]
    assert [h.chunk_id for h in paper_level(shuffled, k=1)] == ["a1"]
    with pytest.raises(ConfigError, match="cap must be >= 1"):
        apply_cap(hits, 0)


def test_sort_hits_breaks_ties_by_id():
    hits = [_hit("c", "P", 1.0), _hit("a", "P", 1.0), _hit("b", "P", 2.0)]
    assert [h.chunk_id for h in sort_hits(hits)] == ["b", "a", "c"]


def test_chunk_store_from_docs_and_errors():
    store = ChunkStore.from_docs({"d1": {"title": "Title", "text": "Body text."}, "d2": "plain"})
    assert store["d1"].text == "Title Body text." and store["d1"].paper_id == "d1"
    assert store["d2"].text == "plain" and len(store) == 2
    h = store.hit("d1", 0.5)
    assert (h.chunk_id, h.paper_id, h.page, h.section, h.score) == ("d1", "d1", 1, "Title", 0.5)
    with pytest.raises(IndexBuildError, match="'zz'.*rebuild"):
        store["zz"]
    c = store["d2"]
    with pytest.raises(ConfigError, match="'d2' appears twice"):
        ChunkStore([c, c])


def test_run_queries_returns_runs_and_latency(parts):
    queries = {"q1": "dense retrieval", "q2": "BM25 baseline"}
    runs = run_queries(_hybrid(parts), queries, k=3, show_progress=False)
    assert set(runs) == {"q1", "q2"} and all(len(v) == 3 for v in runs.values())
    assert runs["q1"] == {
        h.chunk_id: h.score for h in _hybrid(parts).retrieve("dense retrieval", 3)
    }
    assert set(runs.latency_ms) == {"q1", "q2"} and all(v > 0 for v in runs.latency_ms.values())
    assert runs.latency_summary()["n"] == 2
    with pytest.raises(RetrievalError, match="query 'bad'"):
        run_queries(_hybrid(parts), {"bad": " "}, k=3, show_progress=False)


def test_run_queries_output_is_a_ranx_run(parts):
    import ranx

    runs = run_queries(_dense(parts), {"q1": "BM25 baseline"}, k=3, show_progress=False)
    qrels = ranx.Qrels({"q1": {"p2-c2": 1}})
    assert ranx.evaluate(qrels, ranx.Run(dict(runs)), "recall@3") == 1.0


def test_latency_summary_by_hand():
    s = latency_summary({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0})
    assert s == {"p50": 3.0, "p95": pytest.approx(4.8), "mean": 3.0, "max": 5.0, "n": 5}
    assert latency_summary({})["n"] == 0


def test_build_retriever_builds_every_name(parts):
    store, emb, di, bi = parts
    comps = Components(
        store,
        embedder=emb,
        dense_index=di,
        bm25_index=bi,
        reranker=EmbedderReranker(HashEmbedder("r", 32, "r"), disk_cache=False),
        llm=echo_llm(),
    )
    for name in RETRIEVER_NAMES:
        r = build_retriever(name, comps, RetrievalSettings(hybrid_pool=20))
        assert r.retrieve("dense retrieval", 3)
    capped = build_retriever("rerank", comps, RetrievalSettings(per_paper_cap=1, rerank_pool=12))
    assert isinstance(capped, CappedRetriever) and capped.depth == 12
    assert "embed[r]" in capped.name
    mq = build_retriever("multi-query", comps, RetrievalSettings(variants="llm"))
    assert "echo-llm" in mq.name
    with pytest.raises(RetrievalError, match="unknown retriever 'colbert'"):
        build_retriever("colbert", comps)
    with pytest.raises(ConfigError, match="needs components \\['llm'\\]"):
        build_retriever("hyde", Components(store, embedder=emb, dense_index=di))
    with pytest.raises(pydantic.ValidationError):
        RetrievalSettings(k=0)
    with pytest.raises(pydantic.ValidationError):
        RetrievalSettings(pool=5)  # unknown key


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hyde", "multi-query"])
def test_llm_retrievers_with_the_real_local_model(name, tmp_cache):
    """HyDE and LLM multi-query keep the contract with SmolLM2-135M (a real, weak model)."""
    from rag.llm.factory import make_cache, make_chat_model
    from rag.llm.settings import ApiKeys, LLMSettings

    # the completion cache (under tmp_cache) makes the repeated calls of the check cheap
    llm = make_chat_model("smollm2-135m", LLMSettings(), cache=make_cache(), keys=ApiKeys())
    store = make_store()
    emb = HashEmbedder()
    comps = Components(
        store,
        embedder=emb,
        dense_index=BruteDenseIndex(store.ids, emb.encode_passages(store.texts)),
        bm25_index=OverlapIndex(store.ids, store.texts),
        llm=llm,
    )
    r = build_retriever(name, comps, RetrievalSettings(variants="llm", hybrid_pool=20))
    check_contract(r, store)
    if name == "hyde":
        assert r.last_passage or r.fallbacks > 0
    else:
        assert r.variant_fn.calls > 0 and 0 <= r.variant_fn.fallbacks <= r.variant_fn.calls


def test_rerank_rescores_only_the_pool_and_keeps_the_first_stage_tail(parts):
    store = parts[0]
    rr = RecordingReranker(store)
    first = _hybrid(parts)
    deep = first.retrieve("dense retrieval", 12)
    assert len(deep) == 12
    hits = RerankRetriever(first, rr, pool=5).retrieve("dense retrieval", 12)
    assert rr.seen == [5], "k=12 > pool=5: the reranker still sees exactly 5 passages"
    assert {h.chunk_id for h in hits[:5]} == {h.chunk_id for h in deep[:5]}
    assert [h.chunk_id for h in hits[5:]] == [h.chunk_id for h in deep[5:]], "tail keeps its order"
    assert min(h.score for h in hits[:5]) > max(h.score for h in hits[5:])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with pytest.raises(ConfigError, match="pool must be >= 1, got 0"):
        RerankRetriever(first, rr, pool=0)


def test_extra_rerank_rows_share_the_hybrid_pool(parts):
    from rag.evaluation.compare import rerank_rows
    from rag.retrieval.registry import load_rerankers

    store, emb, di, bm = parts
    comps = Components(store, embedder=emb, dense_index=di, bm25_index=bm)
    settings = RetrievalSettings(k=5, rerank_pool=6)
    loaded, skipped = load_rerankers(["cross-encoder:/no/such/model", ""])
    assert loaded == {} and set(skipped) == {"rerank:cross-encoder:/no/such/model", "rerank:"}
    assert "not available locally" in skipped["rerank:cross-encoder:/no/such/model"]
    rr = RecordingReranker(store)
    rows = rerank_rows({"prefers-p4": rr}, comps, settings)
    assert list(rows) == ["rerank:prefers-p4"]
    hits = rows["rerank:prefers-p4"].retrieve("dense retrieval", 5)
    assert rr.seen == [6] and len(hits) == 5
    assert rerank_rows({}, comps, settings) == {}


class SlotRecordingLLM:
    """The echo LLM behind a local-style ``shards`` count, recording which pinned shard (slot
    and CPU set) made each call."""

    def __init__(self, shards: int) -> None:
        self.inner, self.shards, self.calls = echo_llm(), shards, []
        self.name = self.inner.name

    def complete(self, messages, **kw):
        self.calls.append((current_slot(), in_shard(), tuple(sorted(os.sched_getaffinity(0)))))
        return self.inner.complete(messages, **kw)


@pytest.mark.skipif(len(usable_cpus()) < 2, reason="needs two CPUs to pin two shards")
def test_hyde_queries_run_in_pinned_shards_with_the_same_runs_as_one_at_a_time(parts):
    store, emb, di, _ = parts
    queries = {f"q{i}": q for i, q in enumerate(
        ["What is BM25?", "How does dense retrieval work?", "What is rank fusion?",
         "How is BM25 normalised?", "Who trains dual encoders?"])}  # fmt: skip
    serial_llm, sharded_llm = SlotRecordingLLM(1), SlotRecordingLLM(2)
    one = run_queries(HyDERetriever(serial_llm, emb, di, store), queries, 4, show_progress=False)
    two = run_queries(HyDERetriever(sharded_llm, emb, di, store), queries, 4, show_progress=False)
    assert dict(two) == dict(one) and list(two) == list(queries)
    assert set(two.latency_ms) == set(queries) and all(v > 0 for v in two.latency_ms.values())
    assert {in_shard for _, in_shard, _ in serial_llm.calls} == {False}
    slots = {slot: cpus for slot, shard, cpus in sharded_llm.calls if shard}
    assert len(sharded_llm.calls) == len(queries) and set(slots) == {0, 1}
    assert len(slots[0]) == len(slots[1]) == 1 and slots[0] != slots[1]  # one core each
