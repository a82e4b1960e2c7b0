"""Retrieval evaluation over the plain IR dict contracts, with honest statistics.

Contracts (STYLE.md §5), string ids everywhere: queries ``{qid: text}``, qrels
``{qid: {doc_id: grade}}``, runs ``{qid: {doc_id: score}}``.

Metrics come from ranx (Bassani 2022, "ranx: A Blazing-Fast Python Library for Ranking Evaluation
and Comparison", ECIR), never hand-written: ``ndcg@k`` is Järvelin & Kekäläinen's (2002)
nDCG with gain = grade and discount 1/log2(rank + 1); ``recall@k`` = relevant in the top k /
relevant; ``mrr@k`` = 1 / rank of the first relevant document in the top k (0 if none).

Undefined cases are explicit (STYLE.md §9):

* a question with no relevant document in the qrels (unanswerable, or evidence found in no chunk)
  has no defined recall or nDCG — it is **excluded and counted** (``excluded``), never scored 0;
* a question with relevant documents that the run does not answer at all scores 0 (the retriever
  returned nothing useful) and is counted (``missing_from_run``);
* run questions absent from the qrels are ignored and counted (``unjudged``).

Every aggregate carries a bootstrap CI and its n (:mod:`rag.evaluation.stats`);
:func:`compare_runs` runs a paired randomisation test between every pair of systems with Holm
correction and a plain reading.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import ranx

from rag.errors import EvaluationError
from rag.evaluation.stats import (
    CI,
    Correction,
    bootstrap_ci,
    correct,
    describe_difference,
    paired_test,
)
from rag.ir import Qrels, Run

logger = logging.getLogger(__name__)


DEFAULT_METRICS: tuple[str, ...] = (
    "ndcg@10",
    "recall@5",
    "recall@10",
    "recall@20",
    "recall@100",
    "mrr@10",
)

_PRETTY = {"ndcg": "nDCG", "recall": "Recall", "mrr": "MRR", "precision": "P", "map": "MAP"}


def pretty_metric(metric: str) -> str:
    """``"ndcg@10"`` -> ``"nDCG@10"`` for tables and sentences."""
    name, _, k = metric.partition("@")
    return _PRETTY.get(name, name) + (f"@{k}" if k else "")


def _check_ids(d: Mapping, what: str) -> None:
    for qid, docs in d.items():
        if not isinstance(qid, str):
            raise EvaluationError(f"{what} query id {qid!r} is not a string; use string ids")
        for doc_id in docs:
            if not isinstance(doc_id, str):
                raise EvaluationError(
                    f"{what} doc id {doc_id!r} of query {qid!r} is not a string; use string ids"
                )


@dataclass
class RunEvaluation:
    """Per-query metric values and their aggregates for one run.

    Attributes:
        per_query: one row per scored question (index ``qid``, sorted), one column per metric.
        aggregate: ``{metric: CI}`` — mean with bootstrap CI and n.
        excluded: qids of the qrels without any relevant document (not scored).
        missing_from_run: scored qids the run has no results for (they score 0).
        unjudged: run qids absent from the qrels (ignored).
    """

    per_query: pd.DataFrame
    aggregate: dict[str, CI]
    excluded: list[str] = field(default_factory=list)
    missing_from_run: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Number of scored questions."""
        return len(self.per_query)

    def to_metrics(self) -> dict[str, dict]:
        """``{metric: {"mean", "ci_low", "ci_high", "n"}}``, ready for ``metrics.json``."""
        return {m: ci.to_dict() for m, ci in self.aggregate.items()}

    def table(self) -> pd.DataFrame:
        """One row per metric: mean, CI bounds, n and the CI method."""
        rows = [_ci_row(ci, metric=m) for m, ci in self.aggregate.items()]
        return pd.DataFrame(rows).set_index("metric")


def _ci_row(ci: CI, **keys: object) -> dict[str, object]:
    """One table row of a CI: the given keys, then mean, bounds, n and the CI method."""
    return {
        **keys,
        "mean": ci.estimate,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "n": ci.n,
        "ci_method": ci.method_used,
    }


def scorable_qrels(qrels: Qrels) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Split qrels into the questions with at least one relevant (grade > 0) document and the rest.

    Returns:
        (qrels restricted to relevant-bearing questions, sorted qids excluded).
    """
    kept: dict[str, dict[str, int]] = {}
    excluded: list[str] = []
    for qid in sorted(qrels):
        docs = {d: int(g) for d, g in qrels[qid].items()}
        if any(g > 0 for g in docs.values()):
            kept[qid] = docs
        else:
            excluded.append(qid)
    return kept, excluded


def _ranked(docs: Mapping[str, float]) -> list[str]:
    """Doc ids by descending score, ties by ascending id (deterministic)."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (-float(kv[1]), kv[0]))]


def _rank_scores(docs: Mapping[str, float]) -> dict[str, float]:
    """Replace scores by n - rank so ranked metrics see exactly the order of :func:`_ranked`."""
    order = _ranked(docs)
    n = len(order)
    return {d: float(n - i) for i, d in enumerate(order)}


def per_query_scores(
    qrels: Qrels, run: Run, metrics: Sequence[str] = DEFAULT_METRICS
) -> tuple[pd.DataFrame, list[str], list[str], list[str]]:
    """Per-query ranx metric values on the scorable questions.

    Returns:
        (DataFrame indexed by sorted qid, excluded qids, missing-from-run qids, unjudged qids).

    Raises:
        EvaluationError: no question has a relevant document, or ids are not strings.
    """
    _check_ids(qrels, "qrels")
    _check_ids(run, "run")
    if not metrics:
        raise EvaluationError("no metrics requested; pass e.g. ('ndcg@10', 'recall@10')")
    kept, excluded = scorable_qrels(qrels)
    if not kept:
        raise EvaluationError(
            f"none of the {len(qrels)} qrels questions has a relevant document; nothing can be "
            "scored (check the gold file and the chunk qrels report)"
        )
    if excluded:
        logger.info("%d questions without relevant documents excluded", len(excluded))
    unjudged = sorted(q for q in run if q not in kept and q not in excluded)
    answered = {q: dict(run[q]) for q in kept if q in run and len(run[q]) > 0}
    missing = sorted(q for q in kept if q not in answered)
    df = pd.DataFrame(0.0, index=pd.Index(sorted(kept), name="qid"), columns=list(metrics))
    if answered:
        r_qrels = ranx.Qrels({q: kept[q] for q in answered})
        # ranx orders tied scores by an unstable argsort; hand it rank-derived scores that encode
        # our deterministic order (score desc, then doc id asc) so ties never depend on dict order.
        r_run = ranx.Run({q: _rank_scores(docs) for q, docs in answered.items()})
        try:
            ranx.evaluate(r_qrels, r_run, list(metrics), return_mean=False)
        except (KeyError, ValueError, AssertionError) as e:
            raise EvaluationError(f"ranx could not compute {list(metrics)}: {e}") from e
        for m in metrics:
            scores = r_run.scores[m]
            df.loc[list(answered), m] = [float(scores[q]) for q in answered]
    return df, excluded, missing, unjudged


def evaluate_run(
    qrels: Qrels,
    run: Run,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> RunEvaluation:
    """Score one run: ranx per-query values plus the mean with a bootstrap CI per metric."""
    df, excluded, missing, unjudged = per_query_scores(qrels, run, metrics)
    if missing:
        logger.warning("%d scored questions have no results in the run (score 0)", len(missing))
    aggregate = {
        m: bootstrap_ci(df[m].to_numpy(), n_resamples=n_resamples, seed=seed, confidence=confidence)
        for m in metrics
    }
    return RunEvaluation(df, aggregate, excluded, missing, unjudged)


def evaluate_by_group(
    evaluation: RunEvaluation,
    groups: Mapping[str, str],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Break an evaluation down by a question attribute (kind, names_method, ...).

    Returns one row per (group, metric) with mean, CI, n and the CI method (a group of one question
    has no interval: NaN bounds, method ``"undefined (n=1)"``). Scored questions missing from
    ``groups`` raise, so a breakdown never silently loses questions.
    """
    pq = evaluation.per_query
    unknown = [q for q in pq.index if q not in groups]
    if unknown:
        raise EvaluationError(
            f"{len(unknown)} scored questions have no group (e.g. {unknown[:3]}); "
            "pass a label for every question"
        )
    labels = pd.Series({q: groups[q] for q in pq.index}, name="group")
    rows = []
    for g in sorted(labels.unique()):
        sub = pq.loc[labels[labels == g].index]
        for m in pq.columns:
            ci = bootstrap_ci(sub[m].to_numpy(), n_resamples=n_resamples, seed=seed)
            rows.append(_ci_row(ci, group=g, metric=m))
    return pd.DataFrame(rows)


def _aligned(qrels: Qrels, runs: Mapping[str, Run], metric: str) -> tuple[pd.DataFrame, list[str]]:
    """Per-query ``metric`` for every run, one column per run, on the same scorable questions."""
    cols = {}
    excluded: list[str] = []
    for name, run in runs.items():
        df, excluded, _, _ = per_query_scores(qrels, run, [metric])
        cols[name] = df[metric]
    return pd.DataFrame(cols), excluded


def compare_runs(
    qrels: Qrels,
    runs: Mapping[str, Run],
    metric: str = "ndcg@10",
    *,
    correction: Correction = "holm",
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    ci_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """All-pairs paired comparison of runs on one metric.

    Every pair (A, B) in the order given is compared on the same scorable questions with a paired
    randomisation test (:func:`rag.evaluation.stats.paired_test`); p-values are corrected over the
    whole family of pairs (Holm by default) and each row carries a plain-language reading.

    Returns:
        DataFrame with columns a, b, mean_a, mean_b, diff, ci_low, ci_high, p_value, p_adjusted,
        significant, n, reading.
    """
    if len(runs) < 2:
        raise EvaluationError(f"compare_runs needs at least two runs, got {list(runs)}")
    table, _ = _aligned(qrels, runs, metric)
    pairs = list(itertools.combinations(list(runs), 2))
    results = [
        paired_test(
            table[a].to_numpy(),
            table[b].to_numpy(),
            n_resamples=n_resamples,
            ci_resamples=ci_resamples,
            seed=seed,
        )
        for a, b in pairs
    ]
    results = correct(results, correction)
    rows = []
    for (a, b), r in zip(pairs, results, strict=True):
        rows.append(
            {
                "a": a,
                "b": b,
                "mean_a": r.mean_a,
                "mean_b": r.mean_b,
                "diff": r.diff,
                "ci_low": r.ci.low,
                "ci_high": r.ci.high,
                "p_value": r.p_value,
                "p_adjusted": r.p_adjusted,
                "significant": bool(
                    r.p < alpha and r.ci.defined and (r.ci.low > 0 or r.ci.high < 0)
                ),
                "n": r.n,
                "reading": describe_difference(a, b, r, alpha, metric=pretty_metric(metric)),
            }
        )
    return pd.DataFrame(rows)


def wins_losses(
    qrels: Qrels,
    run_a: Run,
    run_b: Run,
    metric: str = "ndcg@10",
    *,
    names: tuple[str, str] = ("a", "b"),
) -> pd.DataFrame:
    """Per-question comparison of two runs: each system's value, the difference and the outcome.

    ``outcome`` is ``"win"`` when A scores higher than B on the question, ``"loss"`` when lower and
    ``"tie"`` otherwise; rows are sorted by difference (largest win first), then qid.
    """
    na, nb = names
    if na == nb:
        raise EvaluationError(f"the two runs need distinct names, got {names}")
    table, _ = _aligned(qrels, {na: run_a, nb: run_b}, metric)
    out = table.copy()
    out["diff"] = out[na] - out[nb]
    out["outcome"] = np.select([out["diff"] > 0, out["diff"] < 0], ["win", "loss"], "tie")
    out = out.reset_index().sort_values(["diff", "qid"], ascending=[False, True], kind="stable")
    return out.set_index("qid")


def pool_recall(qrels: Qrels, pool_run: Run) -> pd.DataFrame:
    """How much of each question's relevant set ever entered the candidate pool.

    The pool is everything a first stage fetched before reranking or capping; nothing downstream
    can recover a relevant document missing from it, so this is the ceiling of recall at any k.

    Returns:
        DataFrame indexed by scorable qid with ``n_relevant``, ``n_in_pool``, ``pool_recall``
        (share of relevant documents in the pool), ``any_in_pool`` and ``all_in_pool``.
        Questions without relevant documents are excluded (see :func:`scorable_qrels`).
    """
    _check_ids(qrels, "qrels")
    _check_ids(pool_run, "pool run")
    kept, _ = scorable_qrels(qrels)
    if not kept:
        raise EvaluationError("no qrels question has a relevant document; pool recall undefined")
    rows = []
    for qid, docs in kept.items():
        relevant = {d for d, g in docs.items() if g > 0}
        pool = set(pool_run.get(qid, {}))
        found = len(relevant & pool)
        rows.append(
            {
                "qid": qid,
                "n_relevant": len(relevant),
                "n_in_pool": found,
                "pool_recall": found / len(relevant),
                "any_in_pool": found > 0,
                "all_in_pool": found == len(relevant),
            }
        )
    return pd.DataFrame(rows).set_index("qid")


def cut_run(run: Run, depth: int) -> dict[str, dict[str, float]]:
    """Each query's top ``depth`` documents (score descending, ties by id)."""
    return {
        q: dict(sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]) for q, d in run.items()
    }


def pool_recall_table(qrels: Qrels, runs: Mapping[str, Run], depths: Sequence[int]) -> pd.DataFrame:
    """:func:`pool_recall` of every run cut at every depth: ``retriever, depth,
    any_relevant_in_pool, pool_recall, n`` (means over the scorable questions)."""
    rows = []
    for name, run in runs.items():
        for depth in sorted(set(depths)):
            pr = pool_recall(qrels, cut_run(run, depth))
            rows.append(
                {
                    "retriever": name,
                    "depth": depth,
                    "any_relevant_in_pool": pr["any_in_pool"].mean(),
                    "pool_recall": pr["pool_recall"].mean(),
                    "n": len(pr),
                }
            )
    return pd.DataFrame(rows)


def wins_table(qrels: Qrels, runs: Mapping[str, Run], metric: str = "ndcg@10") -> pd.DataFrame:
    """Wins, losses and ties per question for every pair of runs (names in sorted pairs)."""
    rows = []
    names = list(runs)
    for a in names:
        for b in names:
            if a < b:
                wl = wins_losses(qrels, dict(runs[a]), dict(runs[b]), metric, names=(a, b))
                rows.append(
                    {
                        "a": a,
                        "b": b,
                        "a wins": int((wl["outcome"] == "win").sum()),
                        "b wins": int((wl["outcome"] == "loss").sum()),
                        "ties": int((wl["outcome"] == "tie").sum()),
                    }
                )
    return pd.DataFrame(rows)


def category_precision_at_k(
    run_papers: Run,
    expected_category: Mapping[str, str] | str,
    paper_categories: Mapping[str, str],
    k: int = 5,
    *,
    doc_to_paper: Mapping[str, str] | None = None,
) -> pd.Series:
    """Category-precision@k — a **topical proxy**, not a relevance metric.

    The share of the top ``k`` results whose paper's primary arXiv category equals the category the
    question is expected to be about; fewer than ``k`` results count as misses (divide by k). It
    needs no labels, which is why it is popular, and it rewards any on-topic paper, which is why it
    disagrees with the gold metrics: notebook 04 shows both side by side.

    Args:
        run_papers: ``{qid: {doc_id: score}}``; doc ids are paper ids, or chunk ids when
            ``doc_to_paper`` maps them to papers.
        expected_category: ``{qid: category}`` or one category for every question.
        paper_categories: ``{paper_id: primary category}``.
        k: cut-off.

    Returns:
        Series ``category_precision@k`` indexed by sorted qid (questions with an expected category).
    """
    if k <= 0:
        raise EvaluationError(f"k must be positive, got {k}")
    qids = sorted(run_papers)
    if isinstance(expected_category, str):
        expected = dict.fromkeys(qids, expected_category)
    else:
        expected = {q: expected_category[q] for q in qids if q in expected_category}
    values = {}
    for qid in sorted(expected):
        top = _ranked(run_papers[qid])[:k]
        hits = 0
        for doc in top:
            paper = doc_to_paper[doc] if doc_to_paper is not None else doc
            if paper not in paper_categories:
                raise EvaluationError(
                    f"paper {paper!r} (query {qid!r}) has no category; pass every corpus paper's "
                    "primary category"
                )
            hits += paper_categories[paper] == expected[qid]
        values[qid] = hits / k
    return pd.Series(values, name=f"category_precision@{k}", dtype=float).rename_axis("qid")
