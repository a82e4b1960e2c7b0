"""``rag bench``: throughput and latency benchmarks of every stage (speed, not correctness).

Benchmarks are not tests: they print tables and return numbers that depend on the machine and its
load. Each stage's benchmark lives in :mod:`rag.bench` (one module per stage); this module runs
them in order and writes ``outputs/bench/bench.json`` (not published; machine-specific).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rag import paths
from rag.errors import ConfigError


def _stages() -> dict[str, Callable[[], Any]]:
    def fetch() -> Any:
        from rag.bench.corpus import bench_fetch

        return bench_fetch()

    def corpus() -> Any:
        from rag.bench.corpus import bench_corpus

        return bench_corpus()

    def index() -> Any:
        from rag.bench.index import bench_index

        return bench_index()

    def evaluation() -> Any:
        from rag.bench.evaluation import bench_evaluation

        return bench_evaluation()

    def judge() -> Any:
        from rag.bench.offline_judge import bench_offline_judge

        return bench_offline_judge()

    def scale() -> Any:
        from rag.bench.scale import bench_scale

        return bench_scale()

    def llm() -> Any:
        from rag.bench.llm import format_table, run_bench

        res = run_bench()
        print(format_table(res))
        return res

    return {
        "fetch": fetch,
        "corpus": corpus,
        "index": index,
        "evaluation": evaluation,
        "judge": judge,
        "llm": llm,
        "scale": scale,
    }


STAGES = tuple(_stages())
#: stages ``rag bench`` runs when none are named (scale is heavy: ``rag bench scale`` on its own)
DEFAULT_STAGES = tuple(s for s in STAGES if s != "scale")


def run_benchmarks(stages: list[str] | None = None) -> dict[str, Any]:
    """Run the named stages (default: all) and write ``outputs/bench/bench.json``."""
    table = _stages()
    chosen = stages or list(DEFAULT_STAGES)
    unknown = [s for s in chosen if s not in table]
    if unknown:
        raise ConfigError(f"unknown bench stage(s) {unknown}; choose from {list(table)}")
    results: dict[str, Any] = {}
    for name in chosen:
        print(f"\n== bench: {name} ==", flush=True)
        t0 = time.perf_counter()
        results[name] = table[name]()
        print(f"== {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    out = paths.resolve("outputs/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(
        json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8"
    )
    print("\nwritten: outputs/bench/bench.json")
    return results
