"""``rag bench``: throughput and latency benchmarks of every stage (speed, not correctness).

Benchmarks are not tests: they print tables and return numbers that depend on the machine and its
load. Each stage's benchmark lives in :mod:`rag.bench` (one module per stage); this module runs
them in order and writes ``outputs/bench/bench.json`` (not published; machine-specific).
"""

from __future__ import annotations

import importlib
import json
import time
from typing import Any

from rag import paths
from rag.errors import ConfigError

#: Each stage's benchmark function as (module, name), imported only when its stage runs.
BENCHES: dict[str, tuple[str, str]] = {
    "fetch": ("rag.bench.corpus", "bench_fetch"),
    "corpus": ("rag.bench.corpus", "bench_corpus"),
    "index": ("rag.bench.index", "bench_index"),
    "evaluation": ("rag.bench.evaluation", "bench_evaluation"),
    "judge": ("rag.bench.offline_judge", "bench_offline_judge"),
    "llm": ("rag.bench.llm", "run_bench"),
    "scale": ("rag.bench.scale", "bench_scale"),
}


STAGES = tuple(BENCHES)
#: stages ``rag bench`` runs when none are named (scale is heavy: ``rag bench scale`` on its own)
DEFAULT_STAGES = tuple(s for s in STAGES if s != "scale")


def run_benchmarks(stages: list[str] | None = None) -> dict[str, Any]:
    """Run the named stages (default: all) and write ``outputs/bench/bench.json``."""
    chosen = stages or list(DEFAULT_STAGES)
    unknown = [s for s in chosen if s not in BENCHES]
    if unknown:
        raise ConfigError(f"unknown bench stage(s) {unknown}; choose from {list(STAGES)}")
    results: dict[str, Any] = {}
    for name in chosen:
        print(f"\n== bench: {name} ==", flush=True)
        t0 = time.perf_counter()
        module, fn = BENCHES[name]
        results[name] = getattr(importlib.import_module(module), fn)()
        print(f"== {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    out = paths.resolve("outputs/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(
        json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8"
    )
    print("\nwritten: outputs/bench/bench.json")
    return results
