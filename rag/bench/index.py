"""Indexing benchmarks (speed, not correctness): embedding throughput, build cost, query latency.

:func:`bench_index` measures, on SciFact abstracts (or texts you pass) replicated to several corpus
sizes: embedding throughput of :func:`rag.index.embed_cache.embed_texts` against raw
sentence-transformers ``encode`` with the same model and batch size, dense and BM25 index build
time, in-memory and
on-disk size, per-query p50/p95 latency (dense includes query encoding), and HNSW recall@10 against
exact search. Wall-clock numbers depend on the machine's load, so the single-threaded query paths
also report CPU time (``*_cpu_ms``), which is what the wall time would be on an idle machine.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rag.index.bm25 import BM25Index
from rag.index.dense import DenseIndex
from rag.index.embed import SentenceTransformerEmbedder, load_embedder
from rag.index.embed_cache import embed_texts

logger = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def timed_calls(
    fn: Callable[[T], R], items: Iterable[T]
) -> tuple[list[R], list[float], list[float]]:
    """``fn`` on each item in turn: the results, and each call's wall and CPU time in ms."""
    out: list[R] = []
    wall: list[float] = []
    cpu: list[float] = []
    for x in items:
        t0, c0 = time.perf_counter(), time.process_time()
        out.append(fn(x))
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return out, wall, cpu


def _search_p50_ms(index: DenseIndex, qvecs: np.ndarray, k: int) -> float:
    """p50 of one-query searches (query vectors precomputed: the index alone is timed)."""
    lat = []
    for q in qvecs:
        t0 = time.perf_counter()
        index.search(q, k)
        lat.append((time.perf_counter() - t0) * 1e3)
    return round(_pct(lat, 50), 3)


def _replicate_vectors(vecs: np.ndarray, times: int, seed: int = 0) -> np.ndarray:
    """``times`` copies of the vectors; copies after the first get small noise (no exact ties)."""
    rng = np.random.default_rng(seed)
    parts = [vecs]
    for _ in range(times - 1):
        v = vecs + rng.normal(0, 0.02, vecs.shape).astype(np.float32)
        parts.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return np.ascontiguousarray(np.vstack(parts), dtype=np.float32)


def bench_throughput(
    embedder: SentenceTransformerEmbedder, texts: list[str], repeats: int = 2
) -> dict[str, float]:
    """chunks/s of embed_texts (no cache) vs raw ``model.encode`` on the same texts; best of N."""
    raw, ours = [], []
    ids = [str(i) for i in range(len(texts))]
    for _ in range(repeats):  # interleaved so machine load affects both alike
        t0 = time.perf_counter()
        embedder.model.encode(
            texts,
            batch_size=embedder.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        raw.append(len(texts) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        embed_texts(ids, texts, embedder, cache=False, show_progress=False)
        ours.append(len(texts) / (time.perf_counter() - t0))
    return {
        "n_texts": len(texts),
        "raw_chunks_per_s": round(max(raw), 2),
        "embed_texts_chunks_per_s": round(max(ours), 2),
        "ratio": round(max(ours) / max(raw), 3),
    }


def bench_index(
    texts: list[str] | None = None,
    queries: list[str] | None = None,
    *,
    embedder_name: str = "minilm",
    scales: tuple[int, ...] = (1, 2, 10),
    n_throughput: int = 256,  # 0 skips the throughput comparison
    n_queries: int = 100,
    k: int = 10,
    print_table: bool = True,
) -> dict[str, Any]:
    """Run the indexing benchmarks; defaults to SciFact's 5,183 abstracts and its test claims.

    Passage vectors come from the embedding cache (computed once); replicas for the larger scales
    are perturbed copies. Returns ``{"throughput": {...}, "scales": [{...} per scale]}``.
    """
    if texts is None or queries is None:
        from rag.evaluation.scifact import load_scifact
        from rag.index.store import ChunkStore

        corpus, qs, _ = load_scifact()
        store = ChunkStore.from_docs({i: corpus[i] for i in sorted(corpus)})
        texts = texts or store.texts
        queries = queries or [qs[q] for q in sorted(qs)]
    queries = queries[:n_queries]
    emb = load_embedder(embedder_name)
    out: dict[str, Any] = {"embedder": emb.fingerprint, "scales": []}
    if isinstance(emb, SentenceTransformerEmbedder) and n_throughput > 0:
        out["throughput"] = bench_throughput(emb, texts[:n_throughput])
    base_ids = [f"d{i}" for i in range(len(texts))]
    base = embed_texts(base_ids, texts, emb, show_progress=True)
    for w in queries[:3]:  # warm up the query encoder
        emb.encode_queries([w])
    out["query_backend"] = getattr(emb, "query_backend_used", None) or type(emb).__name__
    if out["query_backend"] == "onnxruntime":
        out["query_encode_torch_p50_ms"] = _torch_query_p50(emb, queries)
    for scale in scales:
        ids = [f"{i}#{r}" for r in range(scale) for i in base_ids]
        vecs = _replicate_vectors(base, scale)
        row: dict[str, Any] = {"scale": scale, "n": len(ids)}
        t0 = time.perf_counter()
        dense = DenseIndex(ids, vecs)
        row["dense_build_s"] = round(time.perf_counter() - t0, 3)
        # one copy: DenseIndex keeps its vectors as a view of the faiss index storage
        row["dense_mem_mb"] = round(dense.memory_bytes() / 2**20, 1)
        _, lat, cpu = timed_calls(lambda q, d=dense: d.search(emb.encode_queries([q]), k), queries)
        row["dense_p50_ms"], row["dense_p95_ms"] = round(_pct(lat, 50), 2), round(_pct(lat, 95), 2)
        # CPU time of the (single-threaded) query path: what wall time would be on an idle machine
        row["dense_p50_cpu_ms"] = round(_pct(cpu, 50), 2)
        qv = emb.encode_queries(queries)
        row["dense_search_only_p50_ms"] = _search_p50_ms(dense, qv, k)
        t0 = time.perf_counter()
        hnsw = DenseIndex(ids, vecs, kind="hnsw")
        row["hnsw_build_s"] = round(time.perf_counter() - t0, 3)
        row["hnsw_recall@10"] = round(hnsw.recall_vs_exact(qv, 10), 4)
        row["hnsw_search_p50_ms"] = _search_p50_ms(hnsw, qv, k)
        rep_texts = texts * scale
        t0 = time.perf_counter()
        bm25 = BM25Index(ids, rep_texts)
        row["bm25_build_s"] = round(time.perf_counter() - t0, 3)
        row["bm25_mem_mb"] = round(
            (bm25.tf.data.nbytes + bm25.tf.indices.nbytes + bm25._weights.data.nbytes) / 2**20, 1
        )
        _, lat, cpu = timed_calls(lambda q, b=bm25: b.search(q, k), queries)
        row["bm25_p50_ms"], row["bm25_p95_ms"] = round(_pct(lat, 50), 2), round(_pct(lat, 95), 2)
        row["bm25_p50_cpu_ms"] = round(_pct(cpu, 50), 2)
        with tempfile.TemporaryDirectory() as tmp:
            dense.save(Path(tmp) / "dense")
            hnsw.save(Path(tmp) / "hnsw")
            bm25.save(Path(tmp) / "bm25")
            row["dense_disk_mb"] = round(_dir_bytes(Path(tmp) / "dense") / 2**20, 1)
            row["hnsw_disk_mb"] = round(_dir_bytes(Path(tmp) / "hnsw") / 2**20, 1)
            row["bm25_disk_mb"] = round(_dir_bytes(Path(tmp) / "bm25") / 2**20, 1)
        out["scales"].append(row)
        logger.info("bench scale %d: %s", scale, row)
    out["rank_bm25_p50_ms"] = _rank_bm25_p50(texts, queries[:20])
    if print_table:
        _print(out)
    return out


def _torch_query_p50(emb: SentenceTransformerEmbedder, queries: list[str]) -> float:
    """Per-query encoding p50 through PyTorch (the reference path ONNX replaces), same threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(emb.query_threads or before)
    try:
        for w in queries[:3]:
            emb._encode([w])
        lat = []
        for q in queries:
            t0 = time.perf_counter()
            emb._encode([emb.query_prefix + q])
            lat.append((time.perf_counter() - t0) * 1e3)
    finally:
        torch.set_num_threads(before)
    return round(_pct(lat, 50), 2)


def _rank_bm25_p50(texts: list[str], queries: list[str]) -> float:
    """The reference implementation's per-query time on the 1x corpus (same tokenizer)."""
    from rank_bm25 import BM25Okapi

    from rag.index.bm25 import Tokenizer

    tok = Tokenizer()
    ref = BM25Okapi([tok.document(t) for t in texts])
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        ref.get_scores(tok.query(q))
        lat.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(lat), 2)


def _print(res: dict[str, Any]) -> None:
    if "throughput" in res:
        t = res["throughput"]
        print(
            f"embedding: embed_texts {t['embed_texts_chunks_per_s']} chunks/s vs raw encode "
            f"{t['raw_chunks_per_s']} chunks/s -> {t['ratio']:.0%} (n={t['n_texts']})"
        )
    cols = [c for c in res["scales"][0] if c != "scale"]
    print("scale " + " ".join(f"{c:>18}" for c in cols))
    for row in res["scales"]:
        print(f"{row['scale']:>5} " + " ".join(f"{row[c]!s:>18}" for c in cols))
    print(f"rank-bm25 BM25Okapi p50 on 1x: {res['rank_bm25_p50_ms']} ms/query")
    print(f"query encoding: {res.get('query_backend')}", end="")
    if "query_encode_torch_p50_ms" in res:
        print(f" (PyTorch path p50 {res['query_encode_torch_p50_ms']} ms/query, for reference)")
    else:
        print()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    bench_index()
