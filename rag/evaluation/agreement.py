"""Retriever agreement: what can be said about retrievers without relevance labels.

On papers no gold covers, nDCG and recall are undefined, but two things still hold:

* **overlap@k** of two retrievers on one question: ``|top_k(a) ∩ top_k(b)| / k``, the share of
  their top-k chunks they have in common (Webber, Moffat & Zobel 2010 discuss such set overlaps as
  the simplest rank-similarity measure). High overlap means the choice between them matters little
  on these questions; low overlap means it matters, without saying which is right.
* **named-paper@k**: when a question names the papers it is about (the ``papers`` field of a
  user's own questions file), whether any of a retriever's top-k chunks comes from one of them.
  It is the asker's own label, at paper level only, so it bounds nothing about evidence.

Both are per-question values with a 95 % bootstrap CI over the questions (:func:`bootstrap_ci`).
Runs are the plain contract ``{qid: {chunk_id: score}}``; ties are broken by chunk id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rag.errors import EvaluationError
from rag.evaluation.stats import CI, bootstrap_ci


def top_k(scores: Mapping[str, float], k: int) -> list[str]:
    """The ``k`` best ids by score (descending), ties by id."""
    return [d for d, _ in sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]]


def overlap_at_k(a: Mapping[str, float], b: Mapping[str, float], k: int) -> float:
    """``|top_k(a) ∩ top_k(b)| / k``: 1.0 when both return the same k chunks (in any order)."""
    if k < 1:
        raise EvaluationError(f"overlap@k needs k >= 1, got {k}")
    return len(set(top_k(a, k)) & set(top_k(b, k))) / k


def _ci(values: Sequence[float], seed: int) -> CI:
    return bootstrap_ci(values, seed=seed) if values else CI.missing()


def agreement_table(
    runs: Mapping[str, Mapping[str, Mapping[str, float]]], k: int = 10, *, seed: int = 0
) -> pd.DataFrame:
    """One row per pair of retrievers: overlap@k over the questions both ran, with its CI."""
    names = list(runs)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            qids = sorted(set(runs[a]) & set(runs[b]))
            v = [overlap_at_k(runs[a][q], runs[b][q], k) for q in qids]
            ci = _ci(v, seed)
            rows.append(
                {"a": a, "b": b, "n": len(v), f"overlap@{k}": ci.estimate,
                 "ci_low": ci.low, "ci_high": ci.high}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["a", "b", "n", f"overlap@{k}", "ci_low", "ci_high"])


def agreement_matrix(table: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    """The pairs of :func:`agreement_table` as a symmetric retriever x retriever matrix (1 on the
    diagonal), for a heatmap."""
    names = list(dict.fromkeys([*table["a"], *table["b"]]))
    m = pd.DataFrame(1.0, index=names, columns=names)
    for _, r in table.iterrows():
        m.loc[r["a"], r["b"]] = m.loc[r["b"], r["a"]] = r[f"overlap@{k}"]
    return m


def named_paper_table(
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    chunk_to_paper: Mapping[str, str],
    papers_of: Mapping[str, Sequence[str]],
    k: int = 10,
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per retriever: the share of questions naming papers whose top-k holds a chunk of
    one of them (questions that name none are left out and counted in ``n``' complement)."""
    named = {q: set(p) for q, p in papers_of.items() if p}
    rows = []
    for name, r in runs.items():
        v = [
            float(any(chunk_to_paper.get(c) in named[q] for c in top_k(r[q], k)))
            for q in sorted(named)
            if q in r
        ]
        ci = _ci(v, seed)
        rows.append(
            {"retriever": name, "n": len(v), f"named_paper@{k}": ci.estimate,
             "ci_low": ci.low, "ci_high": ci.high}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["retriever", "n", f"named_paper@{k}", "ci_low", "ci_high"])


__all__ = ["agreement_matrix", "agreement_table", "named_paper_table", "overlap_at_k", "top_k"]
