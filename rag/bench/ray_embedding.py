"""Ray Data embedding against the serial path: throughput on the same texts, and Ray's start-up.

``rag bench scale`` records it under ``ray`` in ``outputs/bench/scale.json``. Each engine runs
on an empty cache (a temporary ``RAG_CACHE_DIR``), so both embed every text.
"""

from __future__ import annotations

import time
from typing import Any

from rag import paths
from rag.index.ray_embed import ray_embed_texts
from rag.shard import process_env


def bench_ray_embedding(texts: list[str], embedder: Any, repeats: int = 1) -> dict[str, Any]:
    """Throughput of Ray Data embedding vs the serial path on ``texts`` (cache bypassed via a temp
    ``RAG_CACHE_DIR``), and Ray's start-up cost (init + first actor's model load)."""
    import tempfile

    import ray

    from rag.index.embed_cache import embed_texts

    ids = [str(i) for i in range(len(texts))]
    res: dict[str, Any] = {"n_texts": len(texts), "embedder": embedder.fingerprint}
    try:
        serial, rayt, stats = [], [], {}
        for r in range(repeats):
            with tempfile.TemporaryDirectory() as tmp, process_env({paths.CACHE_ENV: tmp}):
                t0 = time.perf_counter()
                embed_texts(ids, texts, embedder, show_progress=False)
                serial.append(time.perf_counter() - t0)
            with tempfile.TemporaryDirectory() as tmp, process_env({paths.CACHE_ENV: tmp}):
                # the first block carries the actor start and model load: time a warm-up separately
                t0 = time.perf_counter()
                stats = {}
                ray_embed_texts(ids[:1], texts[:1], embedder.name, show_progress=False, stats=stats)
                if r == 0:
                    res["ray_init_s"] = stats.get("ray_init_s")
                    res["first_job_s"] = round(time.perf_counter() - t0, 2)
                t0 = time.perf_counter()
                stats = {}
                ray_embed_texts(ids, texts, embedder.name, show_progress=False, stats=stats)
                rayt.append(time.perf_counter() - t0)
        res["serial_chunks_per_s"] = round(len(texts) / min(serial), 2)
        res["ray_chunks_per_s"] = round(len(texts) / min(rayt), 2)
        res["ratio"] = round(min(serial) / min(rayt), 3)
        res["plan"] = {k: stats.get(k) for k in ("concurrency", "threads", "blocks")}
    finally:
        ray.shutdown()
    return res
