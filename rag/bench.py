"""``rag bench``: throughput and latency benchmarks of every stage (speed, not correctness).

Benchmarks are not tests: they print tables and return numbers that depend on the machine and its
load. Each stage's benchmark lives beside its code; this module only runs them in order and writes
``outputs/bench/bench.json`` (not published; machine-specific).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rag import paths
from rag.errors import ConfigError


def bench_corpus(workers: int = 2) -> dict[str, Any]:
    """Parse (no cache) and chunk (three strategies, no cache) the pinned corpus from the mirror."""
    from rag import chunk, parse
    from rag.manifest import load_manifest

    mirror = paths.default_mirror()
    if mirror is None:
        raise ConfigError("no PDF mirror: set RAG_PDF_MIRROR to a folder of <arxiv_id>.pdf")
    papers = load_manifest()
    ids = [p.arxiv_id for p in papers]
    t0 = time.perf_counter()
    parsed_bench = parse.bench_parse(mirror, ids, workers=workers)
    parsed = [
        parse.load_parsed(mirror / p.filename, p.sha256, parse.ParseSettings()) for p in papers
    ]
    chunk_bench = chunk.bench_chunk(parsed, [{"strategy": "fixed"}])
    total = parsed_bench["wall_s"] + chunk_bench["rows"][0]["wall_s"]
    print(
        f"parse + chunk (fixed) of {len(ids)} papers: {total:.1f} s (target < 60 s); "
        f"wall incl. cache reads {time.perf_counter() - t0:.1f} s"
    )
    return {"parse": parsed_bench, "chunk": chunk_bench, "parse_plus_chunk_s": round(total, 2)}


def _stages() -> dict[str, Callable[[], Any]]:
    def fetch() -> Any:
        from rag.ingest import bench_fetch

        return bench_fetch()

    def index() -> Any:
        from rag.bench_index import bench_index

        return bench_index()

    def evaluation() -> Any:
        from rag.evaluate import bench_evaluation

        return bench_evaluation()

    def llm() -> Any:
        from rag.llm.bench import format_table, run_bench

        res = run_bench()
        print(format_table(res))
        return res

    return {
        "fetch": fetch,
        "corpus": bench_corpus,
        "index": index,
        "evaluation": evaluation,
        "llm": llm,
    }


STAGES = tuple(_stages())


def run_benchmarks(stages: list[str] | None = None) -> dict[str, Any]:
    """Run the named stages (default: all) and write ``outputs/bench/bench.json``."""
    table = _stages()
    chosen = stages or list(table)
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
