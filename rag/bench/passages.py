"""MiniLM passage encoding at three precisions: speed and closeness to fp32 (a benchmark).

``python -m rag.bench.passages`` encodes the first ``n`` SciFact abstracts with ``minilm-fp32``
(fp32), ``minilm-bf16`` (bf16 autocast) and ``minilm-int8`` (ONNX int8), each without the
embedding cache, ``repeats`` times with the backends interleaved (so load drift hits all alike),
and writes ``outputs/bench/passage_backends.json``: best passages/s per backend, and the minimum
and mean cosine of each backend's vectors to fp32's. Retrieval quality is measured separately
(``rag scifact minilm minilm-bf16``: nDCG@10 on the 300 test queries).
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


def bench_passages(
    n: int = 192,
    repeats: int = 3,
    backends: tuple[str, ...] = BACKENDS,
    out: str | None = "outputs/bench/passage_backends.json",
) -> dict[str, Any]:
    """Passages/s and cosine to fp32 per backend (see the module docstring)."""
    corpus = paths.shared_dir() / "datasets" / "scifact" / "corpus.jsonl"
    if not corpus.exists():
        raise ConfigError(f"SciFact corpus not found at {corpus} (set RAG_SHARED_DIR)")
    texts = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            texts.append(f"{d.get('title', '')} {d['text']}".strip())
            if len(texts) == n:
                break
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
    for row in bench_passages()["backends"]:
        print(row)
