"""The IR contracts every stage speaks: dict runs and qrels, the embedder and reranker seams,
per-paper caps, paper-level MaxP and latency summaries.

Plain dicts with string ids, as in BEIR's data loader and ranx's ``Run``/``Qrels``:
``queries: {qid: text}``, ``qrels: {qid: {doc_id: grade}}``, ``runs: {qid: {doc_id: score}}``.
Retrieval, fusion and evaluation speak them, so ranx can be the oracle in tests.

Paper-level MaxP (Dai & Callan 2019, "Deeper Text Understanding for IR with Contextual Neural
Language Modeling", SIGIR): a paper scores as its best chunk. It exists here twice on purpose, in
the two shapes the stages hold: ranked hits (:func:`paper_level`) and runs (:func:`paper_run`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from rag.errors import ConfigError, EvaluationError
from rag.types import Hit

Queries = dict[str, str]
Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


@runtime_checkable
class EmbedderLike(Protocol):
    """What retrievers, the extractive answerer and rerankers need of an embedder."""

    name: str

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query; higher is more relevant."""

    name: str

    def score(self, query: str, texts: list[str]) -> list[float]:
        """One score per text, in the order given."""
        ...


def sort_hits(hits: Iterable[Hit]) -> list[Hit]:
    """Score descending, ties broken by chunk id (deterministic order)."""
    return sorted(hits, key=lambda h: (-h.score, h.chunk_id))


class PaperCap:
    """Counts hits per paper against a quota (the one per-paper cap of the package).

    Callers decide *when* a hit uses the quota: :func:`apply_cap` counts every hit it keeps; the
    context assembler counts only sources that also fit the token budget.
    """

    def __init__(self, max_per_paper: int) -> None:
        if isinstance(max_per_paper, bool) or not isinstance(max_per_paper, int):
            raise ConfigError(f"per-paper cap must be an integer >= 1, got {max_per_paper!r}")
        if max_per_paper < 1:
            raise ConfigError(f"per-paper cap must be >= 1, got {max_per_paper!r}")
        self.max_per_paper = max_per_paper
        self._seen: dict[str, int] = {}

    def allows(self, hit: Hit) -> bool:
        """Whether the hit's paper still has room."""
        return self._seen.get(hit.paper_id, 0) < self.max_per_paper

    def take(self, hit: Hit) -> None:
        """Count the hit against its paper's quota."""
        self._seen[hit.paper_id] = self._seen.get(hit.paper_id, 0) + 1


def apply_cap(hits: Iterable[Hit], max_per_paper: int) -> list[Hit]:
    """Keep at most ``max_per_paper`` hits of each paper, in the given order."""
    cap = PaperCap(max_per_paper)
    out = []
    for h in hits:
        if cap.allows(h):
            cap.take(h)
            out.append(h)
    return out


def paper_level(hits: Iterable[Hit], k: int | None = None) -> list[Hit]:
    """The best-scoring chunk of each paper, sorted, optionally cut to ``k`` papers (MaxP)."""
    out = apply_cap(sort_hits(hits), 1)
    return out if k is None else out[:k]


def paper_run(chunk_run: Run, chunk_to_paper: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """Paper-level run: each paper scored by its best chunk (MaxP).

    Raises:
        EvaluationError: a chunk id of the run is not in ``chunk_to_paper`` (a stale run).
    """
    out: dict[str, dict[str, float]] = {}
    for qid, docs in chunk_run.items():
        papers: dict[str, float] = {}
        for cid, score in docs.items():
            try:
                pid = chunk_to_paper[cid]
            except KeyError as e:
                raise EvaluationError(
                    f"run for {qid!r} holds chunk {cid!r} that is not among the chunks given; "
                    "rebuild the run from the current chunks"
                ) from e
            if pid not in papers or score > papers[pid]:
                papers[pid] = float(score)
        out[qid] = papers
    return out


def latency_summary(latency_ms: Iterable[float] | Mapping[str, float]) -> dict[str, float]:
    """``{"p50", "p95", "mean", "max", "n"}`` of per-query latencies in milliseconds.

    Percentiles interpolate linearly between order statistics (numpy's default). No latencies
    is an undefined case, not an error: every statistic is NaN and ``n`` is 0, so a retriever
    that timed nothing shows as "n = 0" rather than a fake 0 ms.

    Raises:
        EvaluationError: a latency is negative or not finite.
    """
    vals = np.asarray(
        list(latency_ms.values()) if isinstance(latency_ms, Mapping) else list(latency_ms),
        dtype=float,
    )
    if vals.size == 0:
        nan = math.nan
        return {"p50": nan, "p95": nan, "mean": nan, "max": nan, "n": 0}
    if np.any(~np.isfinite(vals) | (vals < 0)):
        raise EvaluationError("latencies must be finite and non-negative milliseconds")
    return {
        "p50": float(np.percentile(vals, 50)),
        "p95": float(np.percentile(vals, 95)),
        "mean": float(vals.mean()),
        "max": float(vals.max()),
        "n": int(vals.size),
    }
