"""``rag bench scale``: dense index kinds, BM25 and every stage's cost from 1× to 100× the corpus.

Speed and recall measurements, not tests. Writes ``outputs/bench/scale.json`` after every corpus
size, and a re-run skips the sizes already in that file (same settings), so a killed run resumes.

**Vectors.** The real corpus's MiniLM chunk vectors (read from the embedding cache) are replicated
to N× by :func:`rag.bench.index._replicate_vectors`: copy r > 0 of every vector gets Gaussian noise
(σ = 0.02 per dimension, cosine ≈ 0.93 to its original) and is re-normalised. Queries are the gold
questions' real query vectors. What this can show: memory, build time and latency at N vectors of
this dimension, which depend on N and dim, not on meaning; and recall@10 against exact search on
*these* vectors. What it cannot show: recall on 520k genuinely different chunks. Replicas form tight
clouds of 100 near-duplicates around each real chunk, so a query's exact top 10 are mostly copies
of a few chunks; IVF cells fit such clouds well (likely flattering IVF), and HNSW must navigate
many near-ties. The recall figures are evidence for this distribution, an assumption beyond it.

**Timing.** Single-query latency with one OpenMP thread (``faiss.omp_set_num_threads(1)``), wall
p50/p95 and CPU-time p50 (what the wall time would be on an idle machine).
Builds use two threads; ``DenseIndex`` builds HNSW single-threaded (reproducible), which is slower.
Memory per vector is faiss's serialised index size / N.

**Stages.** Parse and chunk are timed on real work (parse cache bypassed, chunk cache off) on
subsets of the real papers, embedding on subsets of chunks with the cache off, index build and
query on the replicated sizes; the growth exponent is the log-log least-squares slope of time
against size (1.0 = linear), used to extrapolate to 10k papers.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from tqdm.auto import tqdm

from rag import paths
from rag.atomic import write_atomic
from rag.bench.index import _replicate_vectors, timed_calls
from rag.index.choose import choose_index
from rag.index.dense import DenseSettings, build_ivf, effective_nlist, omp_threads

logger = logging.getLogger(__name__)

SCALES = (1, 2, 5, 10, 30, 100)
EF_SEARCH = (16, 32, 64, 128, 256, 512)
NPROBE = (1, 2, 4, 8, 16, 32, 64)
HNSW_EF_CONSTRUCTION = 40
#: bumps invalidate the partial results a resumed run would reuse.
BENCH_VERSION = 2
OUT = "outputs/bench/scale.json"


def hnsw_ms(scale: int) -> tuple[int, ...]:
    """HNSW M values built at ``scale`` (two below 100×; one 100× graph costs minutes)."""
    return (16,) if scale >= 100 else (16, 32)


def nlists(n: int, scale: int) -> tuple[int, ...]:
    """IVF cell counts at the ends of faiss's 4..16·√N range (only 4·√N above 5×: k-means cost)."""
    lo, hi = effective_nlist(n), effective_nlist(n, round(16 * math.sqrt(n)))
    return (lo,) if scale > 5 or hi == lo else (lo, hi)


def _pct(xs: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(xs), q)), 3)


def time_queries(search: Callable[[np.ndarray], Any], qvecs: np.ndarray) -> dict[str, float]:
    """One query at a time on one thread: wall p50/p95 and CPU p50 in ms."""
    with omp_threads(1):
        for q in qvecs[:3]:
            search(q[None, :])
        _, wall, cpu = timed_calls(lambda q: search(q[None, :]), qvecs)
    return {"p50_ms": _pct(wall, 50), "p95_ms": _pct(wall, 95), "p50_cpu_ms": _pct(cpu, 50)}


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each query's exact top-k row ids found (rows of faiss ``I`` arrays)."""
    k = exact.shape[1]
    hits = [len(set(f) & set(e)) / k for f, e in zip(found, exact, strict=True)]
    return round(float(np.mean(hits)), 4)


def load_corpus_vectors(
    embedder: str = "minilm", gold_path: str = "../shared/gold/dev.jsonl"
) -> dict[str, Any]:
    """The default corpus's chunks, their cached vectors and the gold questions' query vectors."""
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.gold import gold_queries, load_gold
    from rag.index.embed import load_embedder
    from rag.index.embed_cache import embed_texts
    from rag.text.chunk import chunk_settings
    from rag.text.chunk_cache import chunk_corpus

    papers, parsed = corpus_papers()
    chunks = chunk_corpus(parsed, chunk_settings({"strategy": "fixed"}))
    emb = load_embedder(embedder)
    vecs = embed_texts([c.chunk_id for c in chunks], [c.text for c in chunks], emb)
    queries = list(gold_queries(load_gold(paths.resolve(gold_path))).values())
    return {
        "papers": papers,
        "parsed": parsed,
        "chunks": chunks,
        "embedder": emb,
        "vectors": vecs,
        "queries": queries,
        "qvecs": np.ascontiguousarray(emb.encode_queries(queries), dtype=np.float32),
    }


def _mem(index: Any) -> int:
    return int(faiss.serialize_index(index).nbytes)


ALL_KINDS = ("flat", "hnsw", "ivf_flat", "ivf_pq")


def bench_dense(
    vecs: np.ndarray,
    qvecs: np.ndarray,
    scale: int,
    k: int = 10,
    ivf: bool = True,
    kinds: Sequence[str] = ALL_KINDS,
) -> list[dict]:
    """Every index kind on the grid at one size: recall@k vs exact, latency, build s, bytes/vector
    (``ivf=False`` skips IVF-Flat and IVF-PQ, whose k-means dominates the cost at large sizes;
    ``kinds`` measures a subset, exact search always runs as the reference)."""
    n, dim = vecs.shape
    rows: list[dict] = []

    def row(kind: str, params: dict, build_s: float, mem: int, **m: Any) -> None:
        rows.append(
            {"scale": scale, "n": n, "kind": kind, **params, "build_s": round(build_s, 2),
             "bytes_per_vector": round(mem / n, 1), "memory_mb": round(mem / 2**20, 1), **m}
        )  # fmt: skip

    faiss.omp_set_num_threads(2)
    t0 = time.perf_counter()
    flat = faiss.IndexFlatIP(dim)
    flat.add(vecs)
    flat_s = time.perf_counter() - t0
    _, exact = flat.search(qvecs, k)
    if "flat" in kinds:
        timing = time_queries(lambda q: flat.search(q, k), qvecs)
        row("flat", {}, flat_s, n * dim * 4, recall=1.0, **timing)
    flat.reset()  # free its vectors before the graphs are built
    for m in hnsw_ms(scale) if "hnsw" in kinds else ():
        faiss.omp_set_num_threads(2)
        t0 = time.perf_counter()
        h = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        h.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        h.add(vecs)
        build_s, mem = time.perf_counter() - t0, _mem(h)
        for ef in EF_SEARCH:
            h.hnsw.efSearch = ef
            _, found = h.search(qvecs, k)
            row("hnsw", {"m": m, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": ef},
                build_s, mem, recall=recall_at_k(found, exact),
                **time_queries(lambda q, h=h: h.search(q, k), qvecs))  # fmt: skip
        del h
    for nlist in nlists(n, scale) if ivf and "ivf_flat" in kinds else ():
        faiss.omp_set_num_threads(2)
        t0 = time.perf_counter()
        ivf, quantizer, assign = build_ivf(vecs, DenseSettings(kind="ivf_flat", nlist=nlist))
        build_s = time.perf_counter() - t0
        kinds = [("ivf_flat", ivf, build_s, {})]
        if nlist == effective_nlist(n) and "ivf_pq" in kinds:  # same cells, k-means reused
            t0 = time.perf_counter()
            pq, _, _ = build_ivf(
                vecs, DenseSettings(kind="ivf_pq", nlist=nlist, pq_m=dim // 8),
                quantizer=quantizer, assign=assign,
            )  # fmt: skip
            kinds.append(("ivf_pq", pq, build_s + time.perf_counter() - t0, {"pq_m": dim // 8}))
        for kind, idx, b_s, extra in kinds:
            mem = _mem(idx)
            for nprobe in (p for p in NPROBE if p <= nlist):
                idx.nprobe = nprobe
                _, found = idx.search(qvecs, k)
                row(kind, {"nlist": nlist, "nprobe": nprobe, **extra}, b_s, mem,
                    recall=recall_at_k(found, exact),
                    **time_queries(lambda q, i=idx: i.search(q, k), qvecs))  # fmt: skip
        del ivf, kinds
    return rows


def bench_bm25(texts: list[str], queries: list[str], scale: int, k: int = 10) -> dict[str, Any]:
    """BM25 over the texts replicated ``scale`` times: build s, memory, one-query p50/p95."""
    from rag.index.bm25 import BM25Index

    ids = [f"{i}#{r}" for r in range(scale) for i in range(len(texts))]
    t0 = time.perf_counter()
    bm25 = BM25Index(ids, texts * scale)
    build_s = time.perf_counter() - t0
    mem = bm25.tf.data.nbytes + bm25.tf.indices.nbytes + bm25._weights.data.nbytes
    _, wall, cpu = timed_calls(lambda q: bm25.search(q, k), queries)
    return {
        "scale": scale, "n": len(ids), "build_s": round(build_s, 2),
        "memory_mb": round(mem / 2**20, 1), "bytes_per_doc": round(mem / len(ids), 1),
        "postings": len(bm25.tf.data),
        "p50_ms": _pct(wall, 50), "p95_ms": _pct(wall, 95), "p50_cpu_ms": _pct(cpu, 50),
    }  # fmt: skip


def fit_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> dict[str, float]:
    """Least-squares slope and intercept of log(time) on log(size): time ≈ c · size**b."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.maximum(np.asarray(seconds, float), 1e-9))
    b, a = np.polyfit(x, y, 1)
    return {"exponent": round(float(b), 3), "log_c": round(float(a), 4)}


def predict(fit: dict[str, float], size: float) -> float:
    """Time the fitted power law predicts at ``size``."""
    return float(math.exp(fit["log_c"]) * size ** fit["exponent"])


def _best_of(run: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """Fastest of ``repeats`` timed runs (the least disturbed by other load) and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


def stage_growth(data: dict[str, Any], paper_counts: Sequence[int] = (10, 25, 50, 100)) -> dict:
    """Real work per stage on subsets of the papers, with the fitted growth exponents.

    Each size is timed ``_best_of`` 3 (embedding: 2) and fitted twice: against papers, and against
    the work done (pages, characters, chunks), which a first-N-papers subset does not hold constant.
    """
    from rag.corpus.parse import ParseSettings, parse_pdf
    from rag.index.embed_cache import embed_texts
    from rag.text.chunk import chunk_settings
    from rag.text.chunk_cache import chunk_corpus

    parsed = [p for p in data["parsed"] if p.ok]
    chunks, emb = data["chunks"], data["embedder"]
    folders = [paths.cache_dir("pdfs"), paths.default_mirror()]  # where ingest finds them
    pdfs = {}
    for paper in data["papers"]:
        found = [f / f"{paper.arxiv_id}.pdf" for f in folders if f is not None]
        pdfs[paper.arxiv_id] = next((f for f in found if f.exists()), found[0])
    out: dict[str, Any] = {"paper_counts": list(paper_counts), "stages": {}}
    out["parse_missing_pdfs"] = sum(not f.exists() for f in pdfs.values())
    # parse: the PDF parser itself on the first 4, 8, 16 papers (cache bypassed): a full parse of
    # 100 costs minutes and the exponent needs only the shape
    parse_counts = [4, 8, 16]
    parse_s, parse_pages = [], []
    for c in tqdm(parse_counts, desc="parse subsets"):

        def run(c: int = c) -> int:
            pages = 0
            for p in data["papers"][:c]:
                if pdfs[p.arxiv_id].exists():
                    pages += parse_pdf(pdfs[p.arxiv_id], ParseSettings()).n_pages
            return pages

        seconds, pages = _best_of(run)
        parse_s.append(seconds)
        parse_pages.append(pages)
    out["stages"]["parse"] = {
        "papers": parse_counts, "seconds": [round(s, 3) for s in parse_s],
        "work": parse_pages, "work_unit": "pages",
    }  # fmt: skip
    chunk_s, chunk_chars = [], []
    settings = chunk_settings({"strategy": "fixed"})
    for c in tqdm(paper_counts, desc="chunk subsets"):
        seconds, _ = _best_of(lambda c=c: chunk_corpus(parsed[:c], settings, use_cache=False))
        chunk_s.append(seconds)
        chunk_chars.append(sum(len(b.text) for p in parsed[:c] for b in p.blocks))
    out["stages"]["chunk"] = {
        "papers": list(paper_counts), "seconds": [round(s, 3) for s in chunk_s],
        "work": chunk_chars, "work_unit": "characters",
    }  # fmt: skip
    out["chunks_per_paper"] = round(len(chunks) / max(1, len(parsed)), 1)
    # embed: MiniLM with the cache off on the chunks of the first papers (64..256 chunks)
    embed_n = [64, 128, 256]
    embed_s = []
    texts = [c.text for c in chunks]
    for m in tqdm(embed_n, desc="embed subsets"):
        seconds, _ = _best_of(
            lambda m=m: embed_texts(
                [str(i) for i in range(m)], texts[:m], emb, cache=False, show_progress=False
            ),
            repeats=2,
        )
        embed_s.append(seconds)
    out["stages"]["embed"] = {
        "chunks": embed_n, "papers": [round(m / out["chunks_per_paper"], 1) for m in embed_n],
        "seconds": [round(s, 3) for s in embed_s],
        "work": embed_n, "work_unit": "chunks",
    }  # fmt: skip
    for name, st in out["stages"].items():
        st.update(fit_exponent(st["papers"], st["seconds"]))
        # first-N-paper subsets differ in length, so papers are a noisy size: the same fit against
        # the work the stage actually does (pages parsed, characters chunked, chunks embedded)
        st["exponent_vs_work"] = fit_exponent(st["work"], st["seconds"])["exponent"]
        st["predicted_10k_papers_s"] = round(predict(st, 10_000), 1)
        logger.info("stage %s: %s", name, st)
    return out


def _index_growth(rows: list[dict], chosen: list[dict], per_paper: float) -> dict[str, Any]:
    """Index build and query growth from the size sweep (papers = n / chunks per paper)."""
    out = {}
    for kind in ("flat", "hnsw", "ivf_flat"):
        pts = {}
        for r in rows:
            if r["kind"] == kind and r["n"] not in pts:
                pts[r["n"]] = r["build_s"]
        ns = sorted(pts)
        if len(ns) >= 2:
            papers = [n / per_paper for n in ns]
            st = {"papers": [round(p) for p in papers], "seconds": [pts[n] for n in ns]}
            st.update(fit_exponent(papers, st["seconds"]))
            st["predicted_10k_papers_s"] = round(predict(st, 10_000), 1)
            out[f"index_build_{kind}"] = st
    for label, key in (("query_flat", "flat"), ("query_chosen", "chosen")):
        pts = (
            [(c["n"], c["p50_cpu_ms"]) for c in chosen]
            if key == "chosen"
            else [(r["n"], r["p50_cpu_ms"]) for r in rows if r["kind"] == "flat"]
        )
        papers = [n / per_paper for n, _ in pts]
        st = {"papers": [round(p) for p in papers], "seconds": [ms / 1e3 for _, ms in pts]}
        st.update(fit_exponent(papers, st["seconds"]))
        st["predicted_10k_papers_s"] = round(predict(st, 10_000), 5)
        out[label] = st
    return out


def chosen_rows(rows: list[dict], dim: int) -> list[dict]:
    """For each size, the grid row matching :func:`rag.index.choose.choose_index`'s pick."""
    out = []
    for n in sorted({r["n"] for r in rows}):
        choice = choose_index(n, dim).as_dict()
        want = {k: v for k, v in choice.items() if k not in ("memory_bytes", "reason")}
        if "nlist" in want:
            want["nlist"] = effective_nlist(n, want["nlist"])
        match = [r for r in rows if r["n"] == n and all(r.get(k) == v for k, v in want.items())]
        if not match:  # the pick's parameters are off the grid measured at this size
            out.append({"n": n, "choice": choice, "measured": False})
            continue
        r = match[0]
        out.append({**r, "choice": choice, "measured": True})
    return out


def add_kinds(scale: int, kinds: Sequence[str], out_path: str = OUT) -> list[dict]:
    """Measure ``kinds`` at one size already in the results file and append their rows (used to
    complete a size that a capped run measured partly)."""
    out = paths.resolve(out_path)
    res = json.loads(out.read_text())
    data = load_corpus_vectors()
    vecs = _replicate_vectors(data["vectors"], scale)
    rows = bench_dense(vecs, data["qvecs"], scale, kinds=kinds)
    res = json.loads(out.read_text())  # re-read: keep anything written meanwhile
    res["dense"] += rows
    res["dense"].sort(key=lambda r: (r["scale"], ALL_KINDS.index(r["kind"])))
    res["chosen"] = chosen_rows(res["dense"], int(vecs.shape[1]))
    _save(res, out)
    return rows


def _save(res: dict[str, Any], out: Path) -> None:
    write_atomic(out, json.dumps(res, indent=1, default=str) + "\n")


def bench_scale(
    scales: Sequence[int] = SCALES,
    *,
    out_path: str = OUT,
    bm25_max_scale: int = 30,
    stages: bool = True,
    ivf_max_scale: int = 30,
    ray: bool = True,
) -> dict[str, Any]:
    """Run the scale benchmark, saving after each size; sizes already saved are not re-run."""
    import platform

    out = paths.resolve(out_path)
    data = load_corpus_vectors()
    base, qvecs = data["vectors"], data["qvecs"]
    prev = json.loads(out.read_text()) if out.exists() else {}
    if prev.get("bench_version") != BENCH_VERSION:
        prev = {}
    res: dict[str, Any] = {
        "bench_version": BENCH_VERSION,
        "command": "nice -n 10 rag bench scale  (make bench-scale)",
        "machine": f"{platform.machine()}, {faiss.omp_get_max_threads()} cores, "
        f"Python {platform.python_version()}",
        "faiss": faiss.__version__,
        "embedder": data["embedder"].fingerprint,
        "base_chunks": int(len(base)), "dim": int(base.shape[1]), "queries": int(len(qvecs)),
        "replication": "copies r>0: x + N(0, 0.02^2) per dim, re-normalised (rag.bench.index)",
        "dense": prev.get("dense", []), "bm25": prev.get("bm25", []),
        **{k: prev[k] for k in ("stages", "ray", "date") if k in prev},
    }  # fmt: skip
    texts = [c.text for c in data["chunks"]]
    for scale in scales:
        if any(r["scale"] == scale for r in res["dense"]):
            logger.info("scale %d: already measured in %s, skipped", scale, out)
            continue
        t0 = time.perf_counter()
        vecs = _replicate_vectors(base, scale)
        res["dense"] += bench_dense(vecs, qvecs, scale, ivf=scale <= ivf_max_scale)
        del vecs
        if scale <= bm25_max_scale:
            res["bm25"].append(bench_bm25(texts, data["queries"], scale))
        res["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        _save(res, out)
        print(f"scale {scale}x done in {time.perf_counter() - t0:.0f} s", flush=True)
    res["chosen"] = chosen_rows(res["dense"], int(base.shape[1]))
    stale = "exponent_vs_work" not in res.get("stages", {}).get("stages", {}).get("parse", {})
    if stages and stale:  # absent, or measured before the work-size fit (bench v2 files)
        res["stages"] = stage_growth(data)
    if "stages" in res:
        per_paper = res["stages"]["chunks_per_paper"]
        res["stages"]["stages"].update(_index_growth(res["dense"], res["chosen"], per_paper))
    _save(res, out)
    if ray and "ray" not in res:
        from rag.bench.ray_embedding import bench_ray_embedding

        res["ray"] = bench_ray_embedding(texts[:384], data["embedder"])
        _save(res, out)
    print(f"written: {out_path}")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    bench_scale()
