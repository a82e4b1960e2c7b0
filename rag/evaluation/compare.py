"""Compare retrievers on one dataset: runs, metrics with CIs, paired tests, latency.

The notebook calls :func:`run_all` and :func:`grade` once per dataset (SciFact, the corpus gold,
QASPER); everything it reports — per-retriever means with 95 % bootstrap CIs, all-pairs paired
tests with Holm correction and a plain-language reading, per-query latency — comes from here, so
the notebook holds no logic. Metrics are computed by ranx through :mod:`rag.evaluation.metrics`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from rag.errors import ConfigError
from rag.evaluation.metrics import compare_runs, evaluate_run
from rag.ir import Reranker, paper_run
from rag.ir import latency_summary as _latency
from rag.retrieval.retrievers import (
    Components,
    QueryRuns,
    RetrievalSettings,
    Retriever,
    build_retriever,
    run_queries,
)

log = logging.getLogger(__name__)

#: Metrics of the retrieval report: nDCG@10, Recall@5/10/20/100, MRR@10.
METRICS = ("ndcg@10", "recall@5", "recall@10", "recall@20", "recall@100", "mrr@10")


def build_retrievers(
    names: Sequence[str],
    components: Components,
    settings: RetrievalSettings,
    *,
    extra_rerankers: Mapping[str, Reranker] | None = None,
) -> tuple[dict[str, Retriever], dict[str, str]]:
    """Build the named retrievers; those whose components are missing are returned as skipped
    ``{name: reason}`` (e.g. HyDE with no LLM) so the report can say so instead of dropping them.
    ``extra_rerankers`` (from :func:`rag.retrieval.registry.load_rerankers`) add ``rerank:<name>``
    rows over the same hybrid pool (see :func:`rerank_rows`)."""
    built: dict[str, Retriever] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            built[name] = build_retriever(name, components, settings)
        except ConfigError as e:
            skipped[name] = str(e)
    built.update(rerank_rows(extra_rerankers or {}, components, settings))
    return built, skipped


def subset_retrievers(
    names: Sequence[str], subset: Sequence[str], where: str
) -> tuple[list[str], dict[str, str]]:
    """``names`` kept in ``subset`` (all of them when ``subset`` is empty), and the rest as
    skipped ``{name: reason}`` so the report lists them as not run rather than dropping them.
    A subset entry that names no retriever kind is an error; one that is a kind but not in
    ``names`` (a sweep that runs fewer retrievers) is ignored."""
    from rag.retrieval.retrievers import RETRIEVER_NAMES

    unknown = sorted(set(subset) - set(RETRIEVER_NAMES))
    if unknown:
        raise ConfigError(f"{where}: {unknown} name no retriever (one of {list(RETRIEVER_NAMES)})")
    kept = [n for n in names if n in subset] if subset else list(names)
    reason = f"not run on {where} in this profile"
    return kept, {n: reason for n in names if n not in kept}


def rerank_rows(
    rerankers: Mapping[str, Reranker], components: Components, settings: RetrievalSettings
) -> dict[str, Retriever]:
    """Extra rows ``rerank:<name>``: the same hybrid pool (``settings.rerank_pool``) re-scored by
    each reranker, so alternatives are graded exactly like the main ``rerank`` row."""
    from rag.retrieval.retrievers import RerankRetriever

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

    def per_query_table(self) -> pd.DataFrame:
        """Per-question values, long: ``scope`` (``<dataset>/<retriever>``, the path of the same
        metric in :meth:`to_metrics`' nesting), ``qid``, ``metric``, ``value``. ``rag sweep`` pairs
        its cells on these."""
        frames = [
            ev.per_query.rename_axis("qid")
            .reset_index()
            .melt(id_vars="qid", var_name="metric", value_name="value")
            .assign(scope=f"{self.dataset}/{name}")
            for name, ev in self.evals.items()
        ]
        if not frames:
            return pd.DataFrame(columns=["scope", "qid", "metric", "value"])
        return pd.concat(frames, ignore_index=True)[["scope", "qid", "metric", "value"]]

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
    chunk_to_paper: Mapping[str, str] | None = None,
) -> Comparison:
    """Grade runs against ``qrels``: per-retriever metrics with CIs and all-pairs paired tests.

    Args:
        dataset: a label for the report.
        runs: name → runs (from :func:`run_all`).
        qrels: ``{qid: {doc_id: grade}}``; questions without relevant documents are excluded and
            counted, never scored 0.
        chunk_to_paper: grade at paper level: each chunk run becomes a paper run by MaxP
            (:func:`rag.ir.paper_run`), so the same runs are graded at two levels without
            re-running.
    """
    evals: dict[str, Any] = {}
    graded: dict[str, dict[str, dict[str, float]]] = {}
    for name, r in runs.items():
        run = paper_run(r, chunk_to_paper) if chunk_to_paper else {q: dict(d) for q, d in r.items()}
        graded[name] = run
        evals[name] = evaluate_run(qrels, run, metrics, n_resamples=n_resamples, seed=seed)
    pairwise = (
        compare_runs(qrels, graded, primary, seed=seed) if len(graded) > 1 else pd.DataFrame()
    )
    return Comparison(
        dataset, dict(runs), evals, pairwise, primary, dict(skipped or {}), dict(labels or {})
    )


def latency_table(comparisons: Mapping[str, Comparison | Mapping[str, QueryRuns]]) -> pd.DataFrame:
    """p50/p95 per retriever and dataset (query encoding, LLM calls and reranking included).

    A dataset maps to its :class:`Comparison`, or to its runs alone (questions without labels,
    e.g. a user's own questions, are timed all the same).
    """
    rows = []
    for ds, comp in comparisons.items():
        runs_of = comp.runs if isinstance(comp, Comparison) else comp
        for name, runs in runs_of.items():
            rows.append({"dataset": ds, "retriever": name, **_latency(runs.latency_ms)})
    return pd.DataFrame(rows)
