"""Retrievers behind one interface: ``retrieve(query, k) -> list[Hit]``.

Six retrievers share the shape (STYLE.md §6) so one conformance test runs over all of them:
dense, BM25, hybrid (dense + BM25 fused by :func:`rag.retrieval.fuse.rrf`), rerank (a second
stage over a candidate pool), multi-query (the query and its variants fused by the same RRF) and
HyDE (Gao et al., ACL 2023: the embedding of an LLM-written hypothetical passage, averaged with
the query's).
Two wrappers add the options every retriever shares: a per-paper cap (applied *after* any rerank,
so the reranker sees the uncapped pool) and paper-level results (best chunk per paper).

Every result list is sorted by score descending with ties broken by chunk id, so runs are
deterministic. :func:`run_queries` turns a retriever into the runs dict ``{qid: {chunk_id:
score}}`` that ranx evaluates, recording per-query latency.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError, RetrievalError
from rag.index.store import ChunkStore
from rag.ir import EmbedderLike, Reranker, apply_cap, latency_summary, paper_level, sort_hits
from rag.llm.base import ChatModel
from rag.retrieval.fuse import DEFAULT_K, rrf
from rag.retrieval.variants import (
    HYDE_PROMPT_VERSION,
    LLMVariants,
    VariantFn,
    hypothetical_passage,
    rule_variants,
)
from rag.shard import sharded_map
from rag.types import Hit

log = logging.getLogger(__name__)

#: Names understood by :func:`build_retriever`.
RETRIEVER_NAMES = ("dense", "bm25", "hybrid", "rerank", "multi-query", "hyde")


@runtime_checkable
class Retriever(Protocol):
    """Anything that turns a query into ranked chunk hits."""

    name: str

    def retrieve(self, query: str, k: int) -> list[Hit]:
        """Top ``k`` hits, score descending, ties by chunk id; RetrievalError on bad input."""
        ...


class DenseIndexLike(Protocol):
    """The part of :class:`rag.index.dense.DenseIndex` the retrievers use."""

    def search(self, qvecs: np.ndarray, k: int) -> list[list[tuple[str, float]]]: ...


class LexicalIndexLike(Protocol):
    """The part of :class:`rag.index.bm25.BM25Index` the retrievers use."""

    def search(self, query: str, k: int) -> list[tuple[str, float]]: ...


class RetrievalSettings(BaseModel):
    """Settings of the retrieval stage (one object per stage, unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(10, ge=1, le=1000, description="Hits returned per query.")
    hybrid_pool: int = Field(
        100, ge=1, le=10_000, description="Depth of the dense and BM25 runs fused by hybrid."
    )
    rerank_pool: int = Field(
        50,
        ge=1,
        le=1000,
        description="Candidates from the first stage that the reranker re-scores.",
    )
    multi_query_pool: int = Field(
        50, ge=1, le=10_000, description="Depth of each per-variant run fused by multi-query."
    )
    n_variants: int = Field(2, ge=0, le=10, description="Query variants added to the original.")
    variants: Literal["rules", "llm"] = Field(
        "rules",
        description="Variant source: deterministic rules (keyword, declarative) or the LLM.",
    )
    multi_query_base: Literal["dense", "bm25", "hybrid"] = Field(
        "hybrid", description="Retriever run once per variant by multi-query."
    )
    rerank_first_stage: Literal["dense", "bm25", "hybrid"] = Field(
        "hybrid", description="Retriever whose pool the reranker re-scores."
    )
    rrf_k: int = Field(
        DEFAULT_K, ge=1, le=10_000, description="RRF constant (Cormack et al. 2009)."
    )
    per_paper_cap: int | None = Field(
        None, ge=1, le=1000, description="Max chunks from one paper in the top k (None = no cap)."
    )
    cap_pool: int = Field(
        100,
        ge=1,
        le=10_000,
        description="Candidates fetched so the capped top k can still be full.",
    )
    hyde_with_query: bool = Field(
        True, description="Average the hypothetical passage's vector with the query's (HyDE paper)."
    )
    hyde_prompt_version: str = Field(HYDE_PROMPT_VERSION, description="HyDE prompt version.")


def check_request(query: str, k: int) -> str:
    """Validate one retrieval request and return the stripped query.

    Raises:
        RetrievalError: the query is not a non-blank string, or ``k`` is not a positive int.
    """
    if not isinstance(query, str) or not query.strip():
        raise RetrievalError(f"query must be a non-empty string, got {query!r}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k <= 0:
        raise RetrievalError(f"k must be a positive integer, got {k!r}")
    return query.strip()


def _rescored(hit: Hit, score: float) -> Hit:
    return Hit(hit.chunk_id, hit.paper_id, hit.page, hit.section, hit.text, float(score))


class DenseRetriever:
    """Dense retrieval: the query embedding searched in an inner-product index (cosine)."""

    def __init__(self, embedder: EmbedderLike, index: DenseIndexLike, store: ChunkStore) -> None:
        self.embedder, self.index, self.store = embedder, index, store
        self.name = f"dense[{embedder.name}]"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        qvec = np.asarray(self.embedder.encode_queries([query]), dtype=np.float32)
        return self.store.hits(self.index.search(qvec, k)[0])[:k]


class BM25Retriever:
    """Lexical retrieval with a BM25 index (tokenization and question-word removal are its own)."""

    def __init__(self, index: LexicalIndexLike, store: ChunkStore) -> None:
        self.index, self.store = index, store
        self.name = "bm25"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        return self.store.hits(self.index.search(query, k))[:k]


def _fuse_hits(runs: list[list[Hit]], k: int, rrf_k: int) -> list[Hit]:
    """RRF over hit lists; each fused hit keeps its record and takes the fused score."""
    records: dict[str, Hit] = {}
    for run in runs:
        for h in run:
            records.setdefault(h.chunk_id, h)
    fused = rrf([[h.chunk_id for h in run] for run in runs], k=rrf_k)
    return [_rescored(records[cid], s) for cid, s in list(fused.items())[:k]]


class HybridRetriever:
    """Dense + BM25 fused by Reciprocal Rank Fusion over the top ``pool`` of each."""

    def __init__(
        self, dense: Retriever, bm25: Retriever, *, pool: int = 100, rrf_k: int = DEFAULT_K
    ) -> None:
        self.dense, self.bm25, self.pool, self.rrf_k = dense, bm25, pool, rrf_k
        self.name = "hybrid"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        depth = max(self.pool, k)
        runs = [self.dense.retrieve(query, depth), self.bm25.retrieve(query, depth)]
        return _fuse_hits(runs, k, self.rrf_k)


class RerankRetriever:
    """A second stage: the first stage's top ``pool`` re-scored by a reranker.

    Exactly ``pool`` candidates are re-scored, whatever ``k`` is; when ``k > pool`` the first
    stage's hits ``pool+1 .. k`` follow in their own order, scored below every reranked hit (the
    usual re-ranking depth convention, so Recall@100 stays defined with a pool of 30). The reranker
    sees the whole uncapped pool; a per-paper cap, if any, wraps this retriever and so applies after
    reranking.
    """

    def __init__(self, first_stage: Retriever, reranker: Reranker, *, pool: int = 50) -> None:
        if pool < 1:
            raise ConfigError(f"rerank pool must be >= 1, got {pool}")
        self.first_stage, self.reranker, self.pool = first_stage, reranker, pool
        self.name = f"rerank[{reranker.name}]"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        hits = self.first_stage.retrieve(query, max(self.pool, k))
        if not hits:
            return []
        pool, tail = hits[: self.pool], hits[self.pool :]
        scores = list(self.reranker.score(query, [h.text for h in pool]))
        if len(scores) != len(pool):
            raise RetrievalError(
                f"reranker {self.reranker.name!r} returned {len(scores)} scores for "
                f"{len(pool)} passages; a reranker must score every passage"
            )
        top = sort_hits(_rescored(h, s) for h, s in zip(pool, scores, strict=True))
        floor = min(scores)
        rest = [_rescored(h, floor - 1.0 - i) for i, h in enumerate(tail)]
        return (top + rest)[:k]


def _variant_fn_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "name", getattr(fn, "__name__", type(fn).__name__)))


class MultiQueryRetriever:
    """The query plus ``n_variants`` variants, each run through ``base``, fused by RRF.

    Variants equal to the query are dropped by the variant functions; the original query always
    takes part, so with no usable variant this reduces to ``base`` (re-scored by RRF).
    """

    def __init__(
        self,
        base: Retriever,
        variant_fn: VariantFn,
        n_variants: int = 2,
        pool: int = 50,
        *,
        rrf_k: int = DEFAULT_K,
    ) -> None:
        self.base, self.variant_fn, self.n_variants = base, variant_fn, n_variants
        self.pool, self.rrf_k = pool, rrf_k
        self.name = f"multi-query[{base.name}|{_variant_fn_name(variant_fn)}]"
        self.last_queries: list[str] = []

    def queries_for(self, query: str) -> list[str]:
        """The original query followed by its non-blank variants (at most ``n_variants``)."""
        variants = self.variant_fn(query, self.n_variants) if self.n_variants > 0 else []
        return [query] + [v.strip() for v in variants[: self.n_variants] if v and v.strip()]

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        self.last_queries = self.queries_for(query)
        depth = max(self.pool, k)
        runs = [self.base.retrieve(q, depth) for q in self.last_queries]
        return _fuse_hits(runs, k, self.rrf_k)


class HyDERetriever:
    """HyDE: search with the embedding of an LLM-written hypothetical passage.

    Gao et al. (ACL 2023) search with v = (f(q) + sum_i f(d_i)) / (N + 1): the query vector averaged
    with the hypothetical documents' vectors. With ``with_query=True`` (default) this retriever does
    exactly that with N = 1 (passage encoded as a passage, query as a query), then L2-normalises;
    with ``with_query=False`` it uses the passage vector alone. When the model returns an empty
    passage it falls back to the query vector, logs a warning and counts it in ``fallbacks``.
    """

    def __init__(
        self,
        llm: ChatModel,
        embedder: EmbedderLike,
        index: DenseIndexLike,
        store: ChunkStore,
        prompt_version: str = HYDE_PROMPT_VERSION,
        *,
        with_query: bool = True,
        max_tokens: int = 128,
    ) -> None:
        self.llm, self.embedder, self.index, self.store = llm, embedder, index, store
        self.prompt_version, self.with_query, self.max_tokens = (
            prompt_version,
            with_query,
            max_tokens,
        )
        self.name = f"hyde[{llm.name}]"
        self.fallbacks = 0
        self.last_passage = ""

    @property
    def shards(self) -> int:
        """Pinned shards :func:`run_queries` may spread queries over: the LLM's local instances
        (one thread each, on its own core), else 1. Its passage is nearly all of the work."""
        return int(getattr(self.llm, "shards", 1))

    def query_vector(self, query: str) -> np.ndarray:
        """The (1, dim) float32 search vector for ``query``."""
        passage = hypothetical_passage(
            self.llm, query, prompt_version=self.prompt_version, max_tokens=self.max_tokens
        )
        self.last_passage = passage
        vecs = []
        if self.with_query or not passage:
            vecs.append(np.asarray(self.embedder.encode_queries([query]), dtype=np.float32)[0])
        if passage:
            vecs.append(np.asarray(self.embedder.encode_passages([passage]), dtype=np.float32)[0])
        else:
            self.fallbacks += 1
            log.warning(
                "%s: empty hypothetical passage for %r; searching with the query", self.name, query
            )
        if len(vecs) == 1:  # already unit length: keep it bit-exact
            return vecs[0][None, :]
        v = np.mean(np.stack(vecs), axis=0)
        norm = float(np.linalg.norm(v))
        return (v / norm if norm > 0 else v).astype(np.float32)[None, :]

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        return self.store.hits(self.index.search(self.query_vector(query), k)[0])[:k]


class CappedRetriever:
    """At most ``max_per_paper`` chunks of one paper in the top k (after any rerank in ``base``).

    Fetches ``depth`` candidates (at least k) so the top k can still be filled after capping.
    """

    def __init__(self, base: Retriever, max_per_paper: int, *, depth: int = 100) -> None:
        if max_per_paper < 1:
            raise ConfigError(f"per-paper cap must be >= 1, got {max_per_paper!r}")
        self.base, self.max_per_paper, self.depth = base, max_per_paper, depth
        self.name = f"{base.name}+cap{max_per_paper}"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        return apply_cap(self.base.retrieve(query, max(self.depth, k)), self.max_per_paper)[:k]


class PaperLevelRetriever:
    """Top ``k`` papers, each represented by its best chunk, from ``depth`` chunk candidates."""

    def __init__(self, base: Retriever, *, depth: int = 100) -> None:
        self.base, self.depth = base, depth
        self.name = f"{base.name}+paper"

    def retrieve(self, query: str, k: int) -> list[Hit]:
        query = check_request(query, k)
        return paper_level(self.base.retrieve(query, max(self.depth, k)), k)


class QueryRuns(dict):
    """A runs dict ``{qid: {chunk_id: score}}`` that also carries per-query latency in ms."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.latency_ms: dict[str, float] = {}

    def latency_summary(self) -> dict[str, float]:
        """p50 / p95 / mean latency in ms and the number of queries."""
        return latency_summary(self.latency_ms)


def run_queries(
    retriever: Retriever, queries: Mapping[str, str], k: int, *, show_progress: bool = True
) -> QueryRuns:
    """Run every query; return ``{qid: {chunk_id: score}}`` with per-query latency (ms).

    Latency is wall time of ``retrieve`` (query encoding, LLM calls and reranking included). A
    retriever whose work is mostly local-model calls says how many pinned shards it may use
    (``shards``, e.g. :class:`HyDERetriever`); its queries are then dealt to them by
    :func:`rag.shard.sharded_map` (question *i* to shard *i* mod n, one single-thread model
    instance per core), so each latency is one query on one core while the other shard works.

    Raises:
        RetrievalError: a query is invalid (the message names its qid).
    """

    def one(item: tuple[str, str]) -> tuple[list[Hit], float]:
        qid, text = item
        t0 = time.perf_counter()
        try:
            hits = retriever.retrieve(text, k)
        except RetrievalError as e:
            raise RetrievalError(f"query {qid!r}: {e}") from e
        return hits, (time.perf_counter() - t0) * 1000.0

    items = [(str(q), t) for q, t in queries.items()]
    shards = int(getattr(retriever, "shards", 1))  # 1: the plain loop in this thread
    results = sharded_map(one, items, shards, desc=retriever.name, progress=show_progress)
    runs = QueryRuns()
    for (qid, _), (hits, ms) in zip(items, results, strict=True):
        runs.latency_ms[qid] = ms
        runs[qid] = {h.chunk_id: h.score for h in hits}
    return runs


@dataclass
class Components:
    """What :func:`build_retriever` may need; only the pieces a retriever uses must be set."""

    store: ChunkStore
    embedder: EmbedderLike | None = None
    dense_index: DenseIndexLike | None = None
    bm25_index: LexicalIndexLike | None = None
    reranker: Reranker | None = None
    llm: ChatModel | None = None
    variant_fn: VariantFn | None = None


def _need(components: Components, name: str, *fields: str) -> None:
    missing = [f for f in fields if getattr(components, f) is None]
    if missing:
        raise ConfigError(f"retriever {name!r} needs components {missing}; pass them in Components")


def build_retriever(
    name: str, components: Components, settings: RetrievalSettings | None = None
) -> Retriever:
    """Build a named retriever (one of :data:`RETRIEVER_NAMES`) from components and settings.

    The per-paper cap, when set, wraps the finished retriever, so it applies after any rerank.

    Raises:
        RetrievalError: unknown name. ConfigError: a needed component is missing.
    """
    s = settings or RetrievalSettings()
    c = components

    def base(kind: str) -> Retriever:
        if kind == "dense":
            _need(c, kind, "embedder", "dense_index")
            return DenseRetriever(c.embedder, c.dense_index, c.store)  # type: ignore[arg-type]
        if kind == "bm25":
            _need(c, kind, "bm25_index")
            return BM25Retriever(c.bm25_index, c.store)  # type: ignore[arg-type]
        return HybridRetriever(base("dense"), base("bm25"), pool=s.hybrid_pool, rrf_k=s.rrf_k)

    depth = s.cap_pool
    if name in ("dense", "bm25", "hybrid"):
        r = base(name)
    elif name == "rerank":
        _need(c, name, "reranker")
        r = RerankRetriever(base(s.rerank_first_stage), c.reranker, pool=s.rerank_pool)
        depth = s.rerank_pool
    elif name == "multi-query":
        if c.variant_fn is not None:
            fn: VariantFn = c.variant_fn
        elif s.variants == "llm":
            _need(c, "multi-query (variants='llm')", "llm")
            fn = LLMVariants(c.llm)  # type: ignore[arg-type]
        else:
            fn = rule_variants
        r = MultiQueryRetriever(
            base(s.multi_query_base), fn, s.n_variants, s.multi_query_pool, rrf_k=s.rrf_k
        )
    elif name == "hyde":
        _need(c, name, "llm", "embedder", "dense_index")
        r = HyDERetriever(
            c.llm,  # type: ignore[arg-type]
            c.embedder,  # type: ignore[arg-type]
            c.dense_index,  # type: ignore[arg-type]
            c.store,
            s.hyde_prompt_version,
            with_query=s.hyde_with_query,
        )
    else:
        raise RetrievalError(f"unknown retriever {name!r}; choose one of {list(RETRIEVER_NAMES)}")
    if s.per_paper_cap is not None:
        r = CappedRetriever(r, s.per_paper_cap, depth=depth)
    return r
