"""1,000× the corpus on one machine: a streamed IVF-PQ index with exact re-rank from a memmap.

Speed, memory and recall measurements, not tests; writes ``outputs/bench/scale_1000.json``.

**Vectors.** Synthetic, as in the 1×–100× bench (:mod:`rag.bench.scale`): copy 0 is the real
corpus's MiniLM chunk vectors, copy r > 0 adds N(0, 0.02²) noise per dimension and is re-normalised,
drawn in :func:`rag.bench.index._replicate_vectors`'s order (the first 100 copies are the 100×
bench's vectors bit for bit). The ~8 GB of float32 are written once, copy by copy, to a raw file in
``cache_dir("bench", "scale_1000")`` named by a hash of the base vectors and the replication, and
reused (``--clean`` deletes it). Recall holds for these clouds of near-duplicates only.

**Index.** IVF with PQ codes, faiss's guideline where the raw vectors do not fit in RAM (Jégou et
al., "Product quantization for nearest neighbor search", TPAMI 2011). k-means (nlist = √N, as
:func:`rag.index.choose.pq_nlist`; 40 training points per cell) runs on a sample read row by row;
vectors are added in blocks read from the file, so the build holds the sample, one block and the
PQ codes (``pq_m`` + 8 id bytes per vector), never the raw vectors. The index is written to disk
and searched memory-mapped (``faiss.IO_FLAG_MMAP``).

**Re-rank.** PQ codes cannot order near-duplicates, so each query takes ``k_factor × k`` PQ
candidates and re-scores them against the exact vectors, gathered from a memory map of the
vector file (faiss's ``IndexRefineFlat`` does the same with the vectors in RAM). ``k_factor = 1``
is plain IVF-PQ.

**Measures.** Build seconds; peak RSS of the build (``VmHWM`` after resetting it); bytes on disk;
recall@10 against exact top-10 computed by streaming the file in blocks; one-query latency on one
thread, p50/p95 wall and p50 CPU, for a cold pass (the vector file's pages dropped from the OS
cache first) and a warm one. BM25 (:class:`rag.index.bm25.BM25Index`, texts replicated) runs in a
fresh process per size for a clean peak RSS, up to the largest size whose predicted peak fits the
memory budget; 1,000× is extrapolated from the measured sizes and the reason it stops is stated.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from rag import paths
from rag.atomic import atomic_path
from rag.bench.index import timed_calls
from rag.bench.scale import _pct, _save, recall_at_k
from rag.errors import ConfigError, IndexBuildError
from rag.index.choose import pq_nlist
from rag.index.dense import MAX_POINTS_PER_CENTROID, effective_nlist, train_quantizer
from rag.index.vectors import exact_rescore

logger = logging.getLogger(__name__)

#: bumps invalidate cached vector files, ground truth and indexes.
FORMAT_VERSION = 1
OUT = "outputs/bench/scale_1000.json"
SCALE = 1000
NOISE_SIGMA = 0.02
NPROBE = (8, 16, 32, 64)
K_FACTORS = (1, 4, 16, 64, 256)
#: rows per block streamed from the vector file (~200 MB of 384-d float32).
BLOCK = 131_072
#: BM25 runs stop where the predicted build peak exceeds this.
BM25_BUDGET_BYTES = 11 << 30


def vectors_key(base: np.ndarray, times: int, seed: int = 0, sigma: float = NOISE_SIGMA) -> str:
    """Content address of a replicated file: hash of the base vectors and the replication."""
    h = hashlib.sha256(np.ascontiguousarray(base, dtype=np.float32).tobytes())
    h.update(f"|v{FORMAT_VERSION}|{base.shape}|{times}|{seed}|{sigma}".encode())
    return h.hexdigest()[:20]


def write_replicas(path: Path, base: np.ndarray, times: int, seed: int = 0) -> Path:
    """Write ``times`` copies of ``base`` (float32 rows) to ``path``, drawn as
    :func:`rag.bench.index._replicate_vectors` draws them; atomic (a partial file is never kept)."""
    base = np.ascontiguousarray(base, dtype=np.float32)
    rng = np.random.default_rng(seed)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(base.tobytes())
        for _ in range(times - 1):
            v = base + rng.normal(0, NOISE_SIGMA, base.shape).astype(np.float32)
            f.write((v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32).tobytes())
        f.flush()
        os.fsync(f.fileno())  # clean pages: the cold pass can drop them from the OS cache
    return path


def replica_file(base: np.ndarray, times: int, seed: int = 0) -> tuple[Path, bool]:
    """The cached replica file for ``base`` × ``times`` and whether it was written now."""
    key = vectors_key(base, times, seed)
    path = paths.cache_dir("bench", "scale_1000") / f"replicas-{key}.f32"
    if path.exists() and path.stat().st_size == base.shape[0] * times * base.shape[1] * 4:
        return path, False
    return write_replicas(path, base, times, seed), True


def iter_blocks(path: Path, dim: int, block: int = BLOCK) -> Iterator[tuple[int, np.ndarray]]:
    """``(first row, rows)`` blocks of a raw float32 file, read, not mapped (no file pages in
    RSS)."""
    n = path.stat().st_size // (4 * dim)
    with open(path, "rb") as f:
        for start in range(0, n, block):
            rows = min(block, n - start)
            x = np.fromfile(f, dtype=np.float32, count=rows * dim)
            yield start, x.reshape(rows, dim)


def read_rows(path: Path, rows: np.ndarray, dim: int) -> np.ndarray:
    """Rows ``rows`` of a raw float32 file, one ``pread`` each (a sample, the file not mapped)."""
    out = np.empty((len(rows), dim), dtype=np.float32)
    width = 4 * dim
    fd = os.open(path, os.O_RDONLY)
    try:
        for i, r in enumerate(rows):
            out[i] = np.frombuffer(os.pread(fd, width, int(r) * width), dtype=np.float32)
    finally:
        os.close(fd)
    return out


def mapped_rows(path: Path, dim: int) -> np.ndarray:
    """A raw float32 file as a read-only (n, dim) array over ``mmap``, advised ``MADV_RANDOM``: a
    re-rank reads scattered rows, and the kernel's read-around (``read_ahead_kb`` around each
    fault) would pull megabytes per row. Unmapped when the array is dropped."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    m.madvise(mmap.MADV_RANDOM)
    return np.frombuffer(m, dtype=np.float32).reshape(-1, dim)


def drop_page_cache(path: Path) -> None:
    """Ask the OS to evict a file's clean cached pages (the next reads come from disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def exact_topk(path: Path, qvecs: np.ndarray, k: int, block: int = BLOCK) -> np.ndarray:
    """Exact inner-product top-``k`` row ids per query over the whole file, block by block; ties go
    to the lower row id."""
    nq = len(qvecs)
    best_s = np.full((nq, k), -np.inf, dtype=np.float32)
    best_i = np.full((nq, k), -1, dtype=np.int64)
    q = np.ascontiguousarray(qvecs, dtype=np.float32)
    for start, x in iter_blocks(path, q.shape[1], block):
        s = q @ x.T  # (nq, rows)
        kk = min(k, s.shape[1])
        part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
        cand_i = np.concatenate([best_i, part + start], axis=1)
        order = np.lexsort((cand_i, -cand_s), axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, order, 1)
        best_i = np.take_along_axis(cand_i, order, 1)
    return best_i


def _rss() -> dict[str, int]:
    """This process's RSS fields from /proc (bytes): peak, current, anonymous, file-backed."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, val = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            out[key] = int(val.split()[0]) * 1024
    return out


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux ``clear_refs`` 5); False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def build_streaming(
    path: Path,
    dim: int,
    *,
    pq_m: int,
    nbits: int = 8,
    nlist: int = 0,
    seed: int = 1234,
    block: int = BLOCK,
) -> tuple[Any, dict[str, Any]]:
    """Train IVF-PQ on a sample of the file and add it block by block; returns (index, stats).

    Raises:
        IndexBuildError: the file holds too few rows for the cells and codebooks.
    """
    n = path.stat().st_size // (4 * dim)
    nlist = effective_nlist(n, nlist)
    if n < 2**nbits * 39:
        raise IndexBuildError(f"build_streaming: {n} rows cannot train {2**nbits} PQ centroids")
    stats: dict[str, Any] = {"n": n, "nlist": nlist, "pq_m": pq_m, "pq_nbits": nbits}
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n_train = min(n, nlist * MAX_POINTS_PER_CENTROID)
    sample = read_rows(path, np.sort(rng.choice(n, n_train, replace=False)), dim)
    stats["train_points"], stats["sample_read_s"] = n_train, round(time.perf_counter() - t0, 2)
    t1 = time.perf_counter()
    quantizer = train_quantizer(sample, nlist, seed)
    stats["kmeans_s"] = round(time.perf_counter() - t1, 2)
    t1 = time.perf_counter()
    idx = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, nbits, faiss.METRIC_INNER_PRODUCT)
    idx.pq.cp.seed, idx.pq.cp.niter = seed, 10
    step = max(1, n_train // (2**nbits * MAX_POINTS_PER_CENTROID))  # spread over the whole file
    idx.train(np.ascontiguousarray(sample[::step]))  # trains the PQ codebooks only: cells are fixed
    del sample
    stats["pq_train_s"] = round(time.perf_counter() - t1, 2)
    t1 = time.perf_counter()
    for _, x in iter_blocks(path, dim, block):
        idx.add(x)
    stats["add_s"] = round(time.perf_counter() - t1, 2)
    stats["build_s"] = round(time.perf_counter() - t0, 2)
    return idx, stats


def refine_search(
    index: Any, vecs: np.ndarray, q: np.ndarray, k: int, k_factor: int
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of one query (``q`` of shape (1, dim)): ``k_factor × k`` PQ candidates re-scored
    against the exact vectors ``vecs`` (:func:`mapped_rows`); ``k_factor = 1`` returns the PQ
    ranking."""
    d, i = index.search(q, k * k_factor)
    if k_factor == 1:
        return d[0], i[0]
    rows, s = exact_rescore(vecs, i[0], q[0])
    top = np.lexsort((rows, -s))[:k]
    return s[top], rows[top]


def measure_grid(
    index: Any,
    vec_path: Path,
    dim: int,
    qvecs: np.ndarray,
    exact: np.ndarray,
    *,
    k: int = 10,
    nprobes: Sequence[int] = NPROBE,
    k_factors: Sequence[int] = K_FACTORS,
) -> list[dict[str, Any]]:
    """Recall@k and one-thread latency per (nprobe, k_factor): a cold pass over the queries (vector
    pages dropped from the OS cache first), then a warm pass."""
    rows = []
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        for nprobe in nprobes:
            faiss.extract_index_ivf(index).nprobe = nprobe
            for kf in k_factors:
                row: dict[str, Any] = {"nprobe": nprobe, "k_factor": kf}
                for label in ("cold", "warm"):
                    if label == "cold":
                        drop_page_cache(vec_path)
                    vecs = mapped_rows(vec_path, dim)
                    found, wall, cpu = timed_calls(
                        lambda q, v=vecs, f=kf: refine_search(index, v, q[None, :], k, f)[1], qvecs
                    )
                    del vecs
                    row[f"{label}_p50_ms"], row[f"{label}_p95_ms"] = _pct(wall, 50), _pct(wall, 95)
                    row[f"{label}_p50_cpu_ms"] = _pct(cpu, 50)
                row["recall"] = recall_at_k(np.asarray(found), exact)
                row["p50_ms"], row["p95_ms"] = row["warm_p50_ms"], row["warm_p95_ms"]
                rows.append(row)
                logger.info("nprobe %d k_factor %d: %s", nprobe, kf, row)
    finally:
        faiss.omp_set_num_threads(before)
    return rows


def bench_dense_file(
    vec_path: Path, qvecs: np.ndarray, *, pq_m: int, k: int = 10, work: Path | None = None, **grid
) -> dict[str, Any]:
    """Ground truth, streamed build, on-disk index and the measured grid for one vector file.

    The index and the ground truth are cached next to the vector file (``work``), keyed by it.
    """
    dim = qvecs.shape[1]
    work = work or vec_path.parent
    stem = f"{vec_path.stem}-q{hashlib.sha256(qvecs.tobytes()).hexdigest()[:12]}-k{k}"
    gt_path = work / f"{stem}.exact.npy"
    out: dict[str, Any] = {}
    if not gt_path.exists():  # its seconds are kept beside it, as the index's build stats
        t0 = time.perf_counter()
        np.save(gt_path, exact_topk(vec_path, qvecs, k))
        gt_path.with_suffix(".json").write_text(json.dumps(round(time.perf_counter() - t0, 2)))
    exact = np.load(gt_path)
    out["exact_s"] = json.loads(gt_path.with_suffix(".json").read_text())
    n = vec_path.stat().st_size // (4 * dim)
    nlist = effective_nlist(n, pq_nlist(n))
    idx_path = work / f"{vec_path.stem}-ivf{nlist}-pq{pq_m}.faiss"
    stats_path = idx_path.with_suffix(".json")
    if idx_path.exists() and stats_path.exists():
        stats = json.loads(stats_path.read_text())
    else:
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        base_rss = _rss()["VmRSS"]
        reset = _reset_peak_rss()
        try:
            idx, stats = build_streaming(vec_path, dim, pq_m=pq_m, nlist=nlist)
        finally:
            faiss.omp_set_num_threads(before)
        rss = _rss()
        stats["peak_rss_mb"] = round(rss["VmHWM"] / 2**20, 1)
        stats["rss_before_build_mb"] = round(base_rss / 2**20, 1)
        stats["peak_rss_is_build_only"] = reset
        t0 = time.perf_counter()
        faiss.write_index(idx, str(idx_path))
        stats["write_s"] = round(time.perf_counter() - t0, 2)
        del idx
        stats_path.write_text(json.dumps(stats, indent=1) + "\n")
    stats["index_disk_bytes"] = idx_path.stat().st_size
    stats["vectors_disk_bytes"] = vec_path.stat().st_size
    t0 = time.perf_counter()
    index = faiss.read_index(str(idx_path), faiss.IO_FLAG_MMAP)
    stats["load_mmap_s"] = round(time.perf_counter() - t0, 3)
    rss0 = _rss()
    out["index"] = stats
    out["dense"] = measure_grid(index, vec_path, dim, qvecs, exact, k=k, **grid)
    rss1 = _rss()
    out["query_rss_mb"] = {
        "anon": round(rss1["RssAnon"] / 2**20, 1),
        "file_backed": round(rss1["RssFile"] / 2**20, 1),
        "file_backed_growth": round((rss1["RssFile"] - rss0["RssFile"]) / 2**20, 1),
    }
    return out


def _bm25_child(texts: list[str], queries: list[str], scale: int, k: int) -> dict[str, Any]:
    """One BM25 size in a fresh process: the 1×–100× bench's row plus peak RSS above the start."""
    from rag.bench.scale import bench_bm25

    base = _rss()["VmRSS"]
    _reset_peak_rss()
    row = bench_bm25(texts, queries, scale, k)
    peak = _rss()["VmHWM"]
    return {
        "scale": scale, "n": row["n"], "build_s": row["build_s"],
        "build_peak_rss_mb": round((peak - base) / 2**20, 1),
        "index_mb": row["memory_mb"], "postings": row["postings"],
        "p50_ms": row["p50_ms"], "p95_ms": row["p95_ms"], "p50_cpu_ms": row["p50_cpu_ms"],
    }  # fmt: skip


def bench_bm25_sizes(
    texts: list[str],
    queries: list[str],
    scales: Sequence[int] = (30, 100, 300, SCALE),
    *,
    budget_bytes: int = BM25_BUDGET_BYTES,
    k: int = 10,
) -> dict[str, Any]:
    """BM25 at growing sizes, each in a fresh process, while the peak predicted from the last
    measured size (linear in documents) fits ``budget_bytes``; then the 1,000× extrapolation."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    rows: list[dict[str, Any]] = []
    stopped = None
    for scale in scales:
        if rows:
            per_doc = rows[-1]["build_peak_rss_mb"] * 2**20 / rows[-1]["n"]
            predicted = per_doc * len(texts) * scale
            if predicted > budget_bytes:
                stopped = {"scale": scale, "predicted_peak_gb": round(predicted / 2**30, 1),
                           "budget_gb": round(budget_bytes / 2**30, 1)}  # fmt: skip
                break
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
            rows.append(pool.submit(_bm25_child, texts, queries, scale, k).result())
        logger.info("bm25 %dx: %s", scale, rows[-1])
    last = rows[-1]
    grow = len(texts) * SCALE / last["n"]
    return {"measured": rows, "stopped_before": stopped, "extrapolated_1000x": {
        "n": len(texts) * SCALE, "from_scale": last["scale"],
        "build_peak_gb": round(last["build_peak_rss_mb"] * grow / 1024, 1),
        "index_gb": round(last["index_mb"] * grow / 1024, 1),
        "p50_cpu_ms": round(last["p50_cpu_ms"] * grow, 1), "method": "linear in documents",
    }}  # fmt: skip


def _texts_and_queries() -> tuple[list[str], list[str]]:
    """The default corpus's fixed-size chunk texts and the gold questions (no embedding)."""
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.gold import gold_queries, load_gold
    from rag.text.chunk import chunk_settings
    from rag.text.chunk_cache import chunk_corpus

    _, parsed = corpus_papers()
    chunks = chunk_corpus(parsed, chunk_settings({"strategy": "fixed"}))
    queries = list(gold_queries(load_gold(paths.resolve("../shared/gold/dev.jsonl"))).values())
    return [c.text for c in chunks], queries


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench_scale_1000(
    *,
    out_path: str = OUT,
    scale: int = SCALE,
    parts: Sequence[str] = ("dense", "bm25"),
    clean: bool = False,
) -> dict[str, Any]:
    """Measure ``parts`` (the dense grid on the replica file, BM25 sizes) and merge them into the
    results file, so the two parts can run separately."""
    import platform

    if scale < 1:
        raise ConfigError(f"bench_scale_1000: scale must be >= 1, got {scale}")
    unknown = set(parts) - {"dense", "bm25"}
    if unknown:
        raise ConfigError(f"bench_scale_1000: unknown parts {sorted(unknown)}; use dense, bm25")
    out = paths.resolve(out_path)
    res: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if res.get("bench_version") != FORMAT_VERSION:
        res = {}
    res.update({
        "bench_version": FORMAT_VERSION,
        "command": "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 nice -n 15 "
        f"python -m rag.bench.scale_1000 --scale {scale}",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "threads": 1, "faiss": faiss.__version__, "scale": scale,
    })  # fmt: skip
    if "dense" in parts:
        from rag.bench.scale import load_corpus_vectors

        data = load_corpus_vectors()
        base, qvecs = np.asarray(data["vectors"], np.float32), data["qvecs"]
        n, dim = len(base) * scale, base.shape[1]
        dense: dict[str, Any] = {
            "embedder": data["embedder"].fingerprint, "base_chunks": len(base), "n": n,
            "dim": dim, "queries": len(qvecs),
            "replication": "synthetic: copy 0 = the real chunk vectors, copies r>0: "
            "x + N(0, 0.02^2) per dim, re-normalised (rag.bench.index); the first 100 copies "
            "are the 100x bench's vectors",
            "loadavg_start": _loadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }  # fmt: skip
        t0 = time.perf_counter()
        vec_path, written = replica_file(base, scale)
        meta = vec_path.with_suffix(".json")
        if written:
            meta.write_text(json.dumps({"write_s": round(time.perf_counter() - t0, 2)}))
        dense["vectors"] = {"bytes": vec_path.stat().st_size, **json.loads(meta.read_text())}
        dense.update(bench_dense_file(vec_path, qvecs, pq_m=dim // 8))
        dense["predicted_flat_p50_ms"] = round(n * 160.0 * dim / 384 / 1e6, 1)
        dense["loadavg_end"] = _loadavg()
        res["dense"] = dense
        _save(res, out)
        if clean:
            for p in vec_path.parent.glob(f"{vec_path.stem}*"):
                p.unlink()
    if "bm25" in parts:
        texts, queries = _texts_and_queries()
        res["bm25"] = {"loadavg_start": _loadavg(),
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       **bench_bm25_sizes(texts, queries), "loadavg_end": _loadavg()}  # fmt: skip
        _save(res, out)
    print(f"written: {out_path}")
    return res


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=SCALE, help="copies of the corpus")
    ap.add_argument("--parts", nargs="+", default=["dense", "bm25"], help="dense and/or bm25")
    ap.add_argument("--clean", action="store_true", help="delete the cached files afterwards")
    ap.add_argument("--out", default=OUT, help="result JSON (project-relative)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    bench_scale_1000(out_path=a.out, scale=a.scale, parts=a.parts, clean=a.clean)
