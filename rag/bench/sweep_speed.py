"""Sweep parallelism benchmark: the same 6-cell sweep serially and with 2 workers.

``make bench-sweep`` (``python -m rag.bench.sweep_speed``) runs ``params/sweeps/speed6.yaml`` (six
cells of notebook 04 on the smoke profile) once to warm the caches, then alternates serial and
parallel runs into a fresh output folder each time, ``reps`` times each, and writes
``outputs/bench/sweep_speed.json``: every run's wall time, the median speed-up and the machine's
load before each run. Interleaving the two arms spreads any drift in machine load over both.

What bounds the ratio on 2 cores: each cell is a kernel start, imports (torch, transformers) and a
mostly single-threaded notebook; with 2 workers each cell's BLAS/torch is pinned to one thread
(``rag.report.sweep``), so the serial arm's two-thread matrix products lose their second core
while the parallel arm runs two cells at once.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from rag import paths

SPEC = "speed6"
OUT = "outputs/bench/sweep_speed.json"


def _one(workers: int, root: Path) -> float:
    from rag.report.sweep import run_sweep

    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    run_sweep(SPEC, workers=workers, output_root=str(root))
    return round(time.perf_counter() - t0, 2)


def bench_sweep_speed(reps: int = 2, workers: int = 2, out: str = OUT) -> dict[str, Any]:
    """Time the 6-cell sweep with 1 and ``workers`` workers, ``reps`` times each (after a warm-up).

    Returns (and writes to ``out``) ``{"runs": [{"workers", "wall_s", "load_1m"}], "serial_s",
    "parallel_s", "speedup", ...}`` with medians over the reps.
    """
    root = paths.cache_dir("bench") / "sweep_speed"
    print("[bench-sweep] warm-up run (fills the embedding and index caches)", flush=True)
    warm = _one(workers, root)
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        for w in (1, workers) if rep % 2 == 0 else (workers, 1):
            load = os.getloadavg()[0]
            wall = _one(w, root)
            runs.append({"rep": rep, "workers": w, "wall_s": wall, "load_1m_before": load})
            print(f"[bench-sweep] rep {rep}: {w} worker(s) {wall:.1f}s", flush=True)
    serial = statistics.median(r["wall_s"] for r in runs if r["workers"] == 1)
    parallel = statistics.median(r["wall_s"] for r in runs if r["workers"] == workers)
    result = {
        "sweep": f"params/sweeps/{SPEC}.yaml",
        "cells": 6,
        "warmup_s": warm,
        "runs": runs,
        "serial_s": serial,
        "parallel_s": parallel,
        "workers": workers,
        "speedup": round(serial / parallel, 3),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": f"{platform.system()} {platform.machine()}",
            "python": platform.python_version(),
        },
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    dst = paths.resolve(out)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(root, ignore_errors=True)
    print(
        f"[bench-sweep] serial {serial:.1f}s, {workers} workers {parallel:.1f}s: "
        f"speed-up {result['speedup']:.2f}x -> {paths.display(dst)}",
        flush=True,
    )
    return result


if __name__ == "__main__":
    bench_sweep_speed()
