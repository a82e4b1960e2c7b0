"""The folder pipeline, serial vs Ray: throughput per stage and per core on this machine.

``python -m rag.bench.pipeline`` runs :func:`rag.index.pipeline.run_pipeline` over the first
``n_pdfs`` PDFs of the mirror twice, each from an empty cache folder (a temp ``RAG_CACHE_DIR``):
once serially, once as the Ray Data job on a local Ray with every CPU of the machine. It writes
``outputs/bench/pipeline.json``: per engine and stage (parse: PDFs, chunk: chunks, embed:
passages) the items, the seconds the stage ran, items per second and items per core-second, the
wall time with and without Ray's start-up, ``os.getloadavg()`` before and after each arm, and how
far the Ray job's MiniLM vectors are from the serial path's (the stages embed per paper, the serial
path over the whole corpus: batch padding differs).

Stage seconds mean two things: serially, the wall time of the stage (one stage at a time, all
cores its own); on Ray, the seconds the stage's workers were busy, summed over workers while the
stages overlap. Per core: parse and chunk use one thread per worker, embedding the torch threads
of its process. Wall times include any other process on the cores, which is why
``os.getloadavg()`` is recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.bench.report_timing import machine
from rag.errors import ConfigError
from rag.shard import process_env

OUT = "outputs/bench/pipeline.json"


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _per_core(stages: dict[str, Any], threads: dict[str, int]) -> dict[str, Any]:
    out = {}
    for name, row in stages.items():
        core_s = row["seconds"] * threads[name]
        out[name] = {**row, "threads": threads[name],
                     "per_core_s": round(row["items"] / core_s, 3) if core_s else None}  # fmt: skip
    return out


def _arm(engine: str, folder: Path, n_pdfs: int, embedder: str) -> tuple[dict[str, Any], Any]:
    from rag.index.pipeline import run_pipeline

    with tempfile.TemporaryDirectory() as tmp, process_env({paths.CACHE_ENV: tmp}):
        load0 = _load()
        t0 = time.perf_counter()
        res = run_pipeline(folder, engine=engine, embedder=embedder, limit=n_pdfs)
        wall = time.perf_counter() - t0
        s = res.summary
        ix = res.indexed
        vectors = (list(ix.dense.ids), np.array(ix.dense.vectors)) if ix and ix.dense else None
    if engine == "serial":
        import torch

        threads = {"parse": 1, "chunk": 1, "embed": torch.get_num_threads()}
        startup = 0.0
    else:
        threads = {"parse": 1, "chunk": 1, "embed": s["ray"]["plan"]["threads"]}
        startup = s["ray"]["init_s"]
    row = {
        "pdfs": s["pdfs"],
        "papers_indexed": s["papers_indexed"],
        "failed": [r["paper_id"] for r in s["failed"]],
        "chunks": s["chunks"],
        "chunks_indexed": s["chunks_indexed"],
        "stages": _per_core(s["stages"], threads),
        "wall_s": round(wall, 2),
        "startup_s": startup,
        "pdfs_per_s": round(s["pdfs"] / wall, 4),
        "pdfs_per_s_after_startup": round(s["pdfs"] / (wall - startup), 4),
        "pdfs_per_core_s": round(s["pdfs"] / wall / (os.cpu_count() or 1), 4),
        "loadavg_before": load0,
        "loadavg_after": _load(),
        **({"ray": s["ray"]} if "ray" in s else {}),
    }
    return row, vectors


def bench_pipeline(n_pdfs: int = 20, embedder: str = "minilm", out: str = OUT) -> dict[str, Any]:
    """Time the serial and the Ray engine on the first ``n_pdfs`` mirror PDFs, cold caches;
    writes and returns the record (see the module docstring)."""
    import ray

    folder = paths.default_mirror()
    if folder is None:
        raise ConfigError("bench pipeline needs the PDF mirror: set RAG_PDF_MIRROR")
    res: dict[str, Any] = {"mirror": paths.display(folder), "n_pdfs": n_pdfs, "embedder": embedder,
                           "machine": machine(), "arms": {}}  # fmt: skip
    vecs = {}
    try:
        for engine in ("serial", "ray"):
            print(f"[bench-pipeline] {engine}: {n_pdfs} PDFs, cold cache", flush=True)
            res["arms"][engine], vecs[engine] = _arm(engine, folder, n_pdfs, embedder)
            print(f"[bench-pipeline] {engine}: {res['arms'][engine]['wall_s']} s", flush=True)
    finally:
        ray.shutdown()
    (ids_s, v_s), (ids_r, v_r) = vecs["serial"], vecs["ray"]
    if ids_s != ids_r:
        raise ConfigError("bench pipeline: the engines indexed different chunks")
    cos = np.sum(v_s * v_r, axis=1)
    res["vectors_vs_serial"] = {
        "max_abs_diff": float(np.abs(v_s - v_r).max()),
        "min_cosine": round(float(cos.min()), 6),
        "identical": bool(np.array_equal(v_s, v_r)),
    }
    s, r = res["arms"]["serial"], res["arms"]["ray"]
    res["ray_over_serial"] = {
        "wall": round(s["wall_s"] / r["wall_s"], 3),
        "wall_after_startup": round(s["wall_s"] / (r["wall_s"] - r["startup_s"]), 3),
    }
    res["measured_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dst = paths.resolve(out)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: res[k] for k in ("ray_over_serial", "vectors_vs_serial")}), flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pdfs", type=int, default=20, help="first N mirror PDFs by id (default 20)")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--out", default=OUT)
    a = p.parse_args(argv)
    bench_pipeline(a.pdfs, a.embedder, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
