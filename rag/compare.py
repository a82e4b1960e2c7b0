"""Compare retrievers on one dataset: runs, metrics with CIs, paired tests, latency.

The notebook calls :func:`compare_retrievers` once per dataset (SciFact, the corpus gold, QASPER);
everything it reports — per-retriever means with 95 % bootstrap CIs, all-pairs paired tests with
Holm correction and a plain-language reading, per-query latency — comes from here, so the notebook
holds no logic. Metrics are computed by ranx through :mod:`rag.evaluate`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rag.errors import ConfigError
from rag.evaluate import compare_runs, evaluate_run
from rag.evaluate import latency_summary as _latency
from rag.retrieve import (
    Components,
    QueryRuns,
    RetrievalSettings,
    Retriever,
    build_retriever,
    run_queries,
)

log = logging.getLogger(__name__)

#: Metrics of the retrieval report (issue 4): nDCG@10, Recall@5/10/20/100, MRR@10.
METRICS = ("ndcg@10", "recall@5", "recall@10", "recall@20", "recall@100", "mrr@10")


def load_reranker(name: str) -> Any:
    """A reranker by name: embedder names joined by ``+`` (bi-encoder re-scoring, z-score ensemble)
    such as ``"e5-small"`` or ``"minilm+e5-small"``, ``"ict-minilm"`` for the cross-encoder trained
    here by ``rag train-ict`` (:mod:`rag.ict`), or ``"cross-encoder:<path or id>"`` for a
    sentence-transformers CrossEncoder whose weights are available locally. The prefix ``"fuse:"``
    (e.g. ``"fuse:minilm+e5-small"``) fuses that reranker's order with the first stage's by RRF
    (:class:`~rag.rerank.FirstStageFusion`)."""
    from rag.embed import load_embedder
    from rag.rerank import CrossEncoderReranker, EmbedderReranker

    if name.startswith("fuse:"):
        from rag.rerank import FirstStageFusion

        return FirstStageFusion(load_reranker(name.split(":", 1)[1]))
    if name.startswith("cross-encoder:"):
        return CrossEncoderReranker(name.split(":", 1)[1])
    if name == "ict-minilm":
        from rag.ict import load_ict_reranker

        return load_ict_reranker()
    parts = [p for p in name.split("+") if p]
    if not parts:
        raise ConfigError(
            f"reranker name {name!r} is empty; use e.g. 'e5-small' or 'cross-encoder:<path>'"
        )
    return EmbedderReranker([load_embedder(p) for p in parts])


def build_retrievers(
    names: Sequence[str],
    components: Components,
    settings: RetrievalSettings,
    *,
    extra_rerankers: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Retriever], dict[str, str]]:
    """Build the named retrievers; those whose components are missing are returned as skipped
    ``{name: reason}`` (e.g. HyDE with no LLM) so the report can say so instead of dropping them.
    ``extra_rerankers`` (from :func:`load_rerankers`) add ``rerank:<name>`` rows over the same
    hybrid pool (see :func:`rerank_rows`)."""
    built: dict[str, Retriever] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            built[name] = build_retriever(name, components, settings)
        except ConfigError as e:
            skipped[name] = str(e)
    built.update(rerank_rows(extra_rerankers or {}, components, settings))
    return built, skipped


def load_rerankers(names: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Load each named reranker once; those that cannot load are returned as ``{name: reason}``."""
    loaded: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            loaded[name] = load_reranker(name)
        except ConfigError as e:
            skipped[f"rerank:{name}"] = str(e)
    return loaded, skipped


def rerank_rows(
    rerankers: Mapping[str, Any], components: Components, settings: RetrievalSettings
) -> dict[str, Retriever]:
    """Extra rows ``rerank:<name>``: the same hybrid pool (``settings.rerank_pool``) re-scored by
    each reranker, so alternatives are graded exactly like the main ``rerank`` row."""
    from rag.retrieve import RerankRetriever

    if not rerankers:
        return {}
    hybrid = build_retriever("hybrid", components, settings)
    return {
        f"rerank:{name}": RerankRetriever(hybrid, rr, pool=settings.rerank_pool)
        for name, rr in rerankers.items()
    }


@dataclass
class Comparison:
    """Everything measured for one dataset."""

    dataset: str
    runs: dict[str, QueryRuns]
    evals: dict[str, Any]
    pairwise: pd.DataFrame
    primary: str
    skipped: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """One row per retriever: each metric's mean and 95 % CI, n, latency p50/p95."""
        rows = []
        for name, ev in self.evals.items():
            row: dict[str, Any] = {
                "retriever": name,
                "component": self.labels.get(name, name),
                "n": ev.n,
            }
            for m, ci in ev.aggregate.items():
                row[m] = ci.estimate
                row[f"{m} CI"] = f"[{ci.low:.3f}, {ci.high:.3f}]" if ci.defined else "n/a"
            lat = self.runs[name].latency_summary()
            row["p50 ms"], row["p95 ms"] = lat["p50"], lat["p95"]
            rows.append(row)
        return pd.DataFrame(rows).set_index("retriever")

    def to_metrics(self) -> dict[str, Any]:
        """``{retriever: {metric: {mean, ci_low, ci_high, n}, "latency_ms": {...}}}`` plus skips."""
        out: dict[str, Any] = {}
        for name, ev in self.evals.items():
            out[name] = {
                **ev.to_metrics(),
                "n": ev.n,
                "excluded": len(ev.excluded),
                "component": self.labels.get(name, name),
                "latency_ms": self.runs[name].latency_summary(),
            }
        for name, why in self.skipped.items():
            out[name] = {"not_run": why}
        return out


def run_all(
    retrievers: Mapping[str, Retriever], queries: Mapping[str, str], k: int = 100
) -> dict[str, QueryRuns]:
    """Run every retriever on every query (depth ``k``), recording per-query latency."""
    return {name: run_queries(r, queries, k) for name, r in retrievers.items()}


def grade(
    dataset: str,
    runs: Mapping[str, QueryRuns],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    metrics: Sequence[str] = METRICS,
    primary: str = "ndcg@10",
    n_resamples: int = 2000,
    seed: int = 0,
    skipped: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    to_doc: Any | None = None,
) -> Comparison:
    """Grade runs against ``qrels``: per-retriever metrics with CIs and all-pairs paired tests.

    Args:
        dataset: a label for the report.
        runs: name → runs (from :func:`run_all`).
        qrels: ``{qid: {doc_id: grade}}``; questions without relevant documents are excluded and
            counted, never scored 0.
        to_doc: optional ``run -> run`` mapping (e.g. chunk run → paper run for paper-level
            metrics); the same runs can then be graded at two levels without re-running.
    """
    evals: dict[str, Any] = {}
    graded: dict[str, dict[str, dict[str, float]]] = {}
    for name, r in runs.items():
        run = to_doc(r) if to_doc else {q: dict(d) for q, d in r.items()}
        graded[name] = run
        evals[name] = evaluate_run(qrels, run, metrics, n_resamples=n_resamples, seed=seed)
    pairwise = (
        compare_runs(qrels, graded, primary, seed=seed) if len(graded) > 1 else pd.DataFrame()
    )
    return Comparison(
        dataset, dict(runs), evals, pairwise, primary, dict(skipped or {}), dict(labels or {})
    )


def latency_table(comparisons: Mapping[str, Comparison]) -> pd.DataFrame:
    """p50/p95 per retriever and dataset (query encoding, LLM calls and reranking included)."""
    rows = []
    for ds, comp in comparisons.items():
        for name, runs in comp.runs.items():
            rows.append({"dataset": ds, "retriever": name, **_latency(runs.latency_ms)})
    return pd.DataFrame(rows)
