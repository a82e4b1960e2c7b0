"""Evaluation benchmark: ranx scoring and paired tests at notebook-04 scale (synthetic runs)."""

from __future__ import annotations

import time

from rag.evaluation.metrics import DEFAULT_METRICS, compare_runs, evaluate_run, per_query_scores


def bench_evaluation(
    n_queries: int = 158, n_docs: int = 100, n_runs: int = 6, seed: int = 0
) -> dict[str, float]:
    """Time :func:`evaluate_run` and :func:`compare_runs` at notebook-04 scale (synthetic runs).

    Not a test: returns ``{step: seconds}`` and prints a table. The first ranx call in a process
    pays numba's compilation/cache load (seconds to a minute), reported as ``ranx_warmup_s``;
    the other steps are warm.
    """
    import random

    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(n_docs * 5)]
    qrels = {f"q{i}": {d: 1 for d in rng.sample(pool, 2)} for i in range(n_queries)}
    runs = {
        f"r{j}": {q: {d: rng.random() for d in rng.sample(pool, n_docs)} for q in qrels}
        for j in range(n_runs)
    }
    out: dict[str, float] = {}
    t = time.perf_counter()
    per_query_scores(qrels, runs["r0"], DEFAULT_METRICS)  # >= 10 queries: ranx's parallel path
    out["ranx_warmup_s"] = time.perf_counter() - t
    t = time.perf_counter()
    evaluate_run(qrels, runs["r0"])
    out["evaluate_run_s"] = time.perf_counter() - t
    t = time.perf_counter()
    compare_runs(qrels, runs, "ndcg@10")
    out["compare_runs_s"] = time.perf_counter() - t
    print(f"{'step':<18}{'seconds':>10}   ({n_queries} queries, {n_docs} docs, {n_runs} runs)")
    for k, v in out.items():
        print(f"{k:<18}{v:>10.3f}")
    return out
