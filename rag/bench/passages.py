"""MiniLM passage encoding at three precisions: speed and closeness to fp32 (a benchmark).

``python -m rag.bench.passages`` encodes the first ``n`` SciFact abstracts with ``minilm-fp32``
(fp32), ``minilm-bf16`` (bf16 autocast) and ``minilm-int8`` (ONNX int8), each without the
embedding cache, ``repeats`` times with the backends interleaved (so load drift hits all alike),
and writes ``outputs/bench/passage_backends.json``: best passages/s per backend, and the minimum
and mean cosine of each backend's vectors to fp32's. Retrieval quality is measured separately
(``rag scifact minilm minilm-bf16``: nDCG@10 on the 300 test queries).

``python -m rag.bench.passages shards`` times :func:`rag.index.embed_cache.embed_texts` in order
against pinned shards (:mod:`rag.shard`) -> ``outputs/bench/passage_shards.json``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np

from rag import paths
from rag.bench import write_json
from rag.errors import ConfigError
from rag.index.embed import load_embedder

BACKENDS = ("minilm-fp32", "minilm-bf16", "minilm-int8")


def _abstracts(n: int) -> list[str]:
    corpus = paths.shared_dir() / "datasets" / "scifact" / "corpus.jsonl"
    if not corpus.exists():
        raise ConfigError(f"SciFact corpus not found at {corpus} (set RAG_SHARED_DIR)")
    texts: list[str] = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            texts.append(f"{d.get('title', '')} {d['text']}".strip())
            if len(texts) == n:
                break
    return texts


def bench_shards(
    n: int = 1024,
    backends: tuple[str, ...] = ("minilm-bf16", "minilm-fp32"),
    out: str | None = "outputs/bench/passage_shards.json",
) -> dict[str, Any]:
    """:func:`rag.index.embed_cache.embed_texts` (cache off) over the first ``n`` SciFact
    abstracts, in order with 2 PyTorch threads against 2 pinned shards of 1 thread
    (:mod:`rag.shard`), per backend: seconds, passages/s, and the largest difference between
    the two runs' vectors."""
    from rag.index.embed_cache import embed_texts

    texts = _abstracts(n)
    ids = [str(i) for i in range(len(texts))]
    rows = []
    for b in backends:
        m = load_embedder(b)
        m.encode_passages(texts[:8])  # warm-up
        got: dict[int, tuple[float, np.ndarray]] = {}
        for shards in (1, 2):
            m.passage_shards = shards  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            v = embed_texts(ids, texts, m, cache=False, show_progress=False)
            got[shards] = (time.perf_counter() - t0, v)
        (s1, v1), (s2, v2) = got[1], got[2]
        rows.append(
            {
                "embedder": b,
                "in_order_s": round(s1, 2),
                "sharded_s": round(s2, 2),
                "speedup": round(s1 / s2, 2),
                "sharded_passages_per_s": round(len(texts) / s2, 1),
                "max_abs_diff": float(np.max(np.abs(v1 - v2))),
            }
        )
    res: dict[str, Any] = {
        "n_passages": len(texts),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "rows": rows,
    }
    if out:
        write_json(res, out)
    return res


def bench_passages(
    n: int = 192,
    repeats: int = 3,
    backends: tuple[str, ...] = BACKENDS,
    out: str | None = "outputs/bench/passage_backends.json",
) -> dict[str, Any]:
    """Passages/s and cosine to fp32 per backend (see the module docstring)."""
    texts = _abstracts(n)
    models = {b: load_embedder(b) for b in backends}
    for m in models.values():  # warm-up: exports, first-call allocations
        m.encode_passages(texts[:8])
    seconds: dict[str, list[float]] = {b: [] for b in backends}
    vecs: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for b, m in models.items():
            t0 = time.perf_counter()
            vecs[b] = np.asarray(m.encode_passages(texts), dtype=np.float32)
            seconds[b].append(time.perf_counter() - t0)
    ref = vecs[backends[0]]
    res: dict[str, Any] = {
        "n_passages": len(texts),
        "repeats": repeats,
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "backends": [
            {
                "embedder": b,
                "passages_per_s": round(len(texts) / min(seconds[b]), 2),
                "seconds": [round(s, 2) for s in seconds[b]],
                "min_cos_to_fp32": float(np.min(np.sum(vecs[b] * ref, axis=1))),
                "mean_cos_to_fp32": float(np.mean(np.sum(vecs[b] * ref, axis=1))),
            }
            for b in backends
        ],
    }
    if out:
        write_json(res, out)
    return res


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["shards"]:
        for row in bench_shards()["rows"]:
            print(row)
    else:
        for row in bench_passages()["backends"]:
            print(row)
