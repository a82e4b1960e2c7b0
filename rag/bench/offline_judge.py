"""Offline judge benchmark: load (or train) time and warm verdicts per second on SciFact dev."""

from __future__ import annotations

import time

from rag import paths
from rag.evaluation.judge_validation import DEV_PATH


def bench_offline_judge(n: int = 200, name: str = "offline-v2") -> dict:
    """Speed of the offline judge ``name`` on the first ``n`` SciFact dev pairs (not a test).

    Times model loading (artifact from the cache, or training when missing) and verdicts with a
    warm embedding cache; prints a small table and returns the numbers.
    """
    from rag.judge.offline import make_offline_judge, read_pairs

    t0 = time.perf_counter()
    judge = make_offline_judge(name)
    load_s = time.perf_counter() - t0
    rows = read_pairs(paths.resolve(DEV_PATH))[:n]
    pairs = [(r["claim"], r["abstract"]) for r in rows]
    judge.predict(pairs)  # warm the embedding cache
    t1 = time.perf_counter()
    judge.predict(pairs)
    warm_s = time.perf_counter() - t1
    out = {
        "judge": judge.name,
        "n_pairs": len(pairs),
        "load_or_train_s": round(load_s, 2),
        "warm_verdicts_s": round(warm_s, 2),
        "warm_pairs_per_s": round(len(pairs) / warm_s, 1) if warm_s else None,
        "train_seconds_recorded": judge.fitted.meta.get("train_seconds"),
    }
    width = max(len(k) for k in out)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in out.items()))
    return out
