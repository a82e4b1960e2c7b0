"""Reciprocal Rank Fusion: the one fusion function of the project.

Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual Rank
Learning Methods", SIGIR 2009:

    score(d) = sum over runs r that retrieved d of 1 / (k + rank_r(d)),   ranks 1-based, k = 60.

Only ranks matter, so runs with incomparable scores (BM25 vs cosine, original query vs variants)
can be fused. Hybrid retrieval and multi-query retrieval both call :func:`rrf`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from rag.errors import ConfigError

log = logging.getLogger(__name__)

#: The constant of the RRF paper; large k flattens the gap between top and lower ranks.
DEFAULT_K = 60


def ranked_ids(run: Mapping[str, float] | Sequence[str]) -> list[str]:
    """The ids of one run in rank order.

    A scored run ``{id: score}`` is ranked by score descending, ties broken by id ascending so the
    ranking never depends on dict order. A list is taken as already ranked (first = rank 1).

    Raises:
        ConfigError: a ranked list repeats an id (its rank would be ambiguous).
    """
    if isinstance(run, Mapping):
        return [d for d, _ in sorted(run.items(), key=lambda kv: (-float(kv[1]), kv[0]))]
    ids = list(run)
    if len(set(ids)) != len(ids):
        dupes = sorted({d for d in ids if ids.count(d) > 1})
        raise ConfigError(f"ranked list repeats ids {dupes[:5]}; pass each id once per run")
    return ids


def rrf(
    runs: Sequence[Mapping[str, float]] | Sequence[Sequence[str]], k: int = DEFAULT_K
) -> dict[str, float]:
    """Fuse runs by Reciprocal Rank Fusion.

    Args:
        runs: runs to fuse, each either ``{id: score}`` (higher is better) or a list of ids in rank
            order. An id absent from a run contributes nothing for that run.
        k: the RRF constant (60 in the paper); any positive value.

    Returns:
        ``{id: fused score}`` in rank order: score descending, ties broken by id ascending.

    Raises:
        ConfigError: ``k`` is not positive, or a ranked list repeats an id.
    """
    if not k > 0:
        raise ConfigError(f"rrf k must be positive, got {k!r}; the paper's default is 60")
    fused: dict[str, float] = {}
    for run in runs:
        for rank, doc in enumerate(ranked_ids(run), start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return dict(sorted(fused.items(), key=lambda kv: (-kv[1], kv[0])))


def rrf_runs(
    runs: Sequence[Mapping[str, Mapping[str, float]]], k: int = DEFAULT_K
) -> dict[str, dict[str, float]]:
    """Fuse several query-level runs ``{qid: {doc_id: score}}`` query by query with :func:`rrf`.

    Every query id present in any run appears in the result.
    """
    qids = sorted({q for run in runs for q in run})
    return {q: rrf([run[q] for run in runs if q in run], k=k) for q in qids}
