"""The 1,000× bench's code paths on tiny sizes with real faiss: the replica file, streamed exact
top-k, the streamed IVF-PQ build, its memory-mapped reload, the exact re-rank and BM25's stop."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from rag.bench import scale_1000 as s1k
from rag.bench.index import _replicate_vectors


def _unit(n: int, dim: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_replica_file_is_the_100x_bench_replication_bit_for_bit_and_is_reused(cache):
    base = _unit(50, 16)
    path, written = s1k.replica_file(base, 7)
    assert written and path.is_relative_to(cache)
    got = np.fromfile(path, dtype=np.float32).reshape(-1, 16)
    assert np.array_equal(got, _replicate_vectors(base, 7))  # same draws, same order
    again, written = s1k.replica_file(base, 7)
    assert again == path and not written
    assert s1k.replica_file(base, 8)[0] != path  # the key holds the replication parameters
    assert np.array_equal(s1k.mapped_rows(path, 16), got)
    rows = np.array([0, 49, 50, 349])
    assert np.array_equal(s1k.read_rows(path, rows, 16), got[rows])
    blocks = list(s1k.iter_blocks(path, 16, block=64))
    assert [b[0] for b in blocks] == list(range(0, 350, 64))
    assert np.array_equal(np.vstack([b[1] for b in blocks]), got)


def test_exact_topk_streamed_in_blocks_equals_brute_force_with_ties_to_the_lower_id(tmp_path):
    x = _unit(300, 8, seed=1)
    x[200] = x[10]  # an exact tie across blocks: row 10 must come first
    path = tmp_path / "v.f32"
    x.tofile(path)
    q = np.vstack([x[10], _unit(4, 8, seed=2)])
    got = s1k.exact_topk(path, q, 5, block=37)
    s = q @ x.T
    want = np.array([np.lexsort((np.arange(300), -row))[:5] for row in s])
    assert np.array_equal(got, want)
    assert got[0][:2].tolist() == [10, 200]


def test_streamed_ivf_pq_with_exact_rerank_beats_plain_pq_and_reloads_memory_mapped(tmp_path):
    base = _unit(300, 32, seed=3)
    x = _replicate_vectors(base, 10)  # clouds of near-duplicates, as in the bench
    path = tmp_path / "v.f32"
    x.tofile(path)
    idx, stats = s1k.build_streaming(path, 32, pq_m=2, nbits=4, block=512)
    assert idx.ntotal == len(x) and stats["nlist"] == len(x) // 39
    assert stats["train_points"] == len(x)
    q = x[::97] + 0.01 * _unit(len(x[::97]), 32, seed=4)
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    exact = s1k.exact_topk(path, q, 10)
    idx.nprobe = 8
    vecs = np.memmap(path, dtype=np.float32, mode="r").reshape(-1, 32)
    plain = s1k.recall_at_k(
        np.array([s1k.refine_search(idx, vecs, v[None], 10, 1)[1] for v in q]), exact
    )
    refined = [s1k.refine_search(idx, vecs, v[None], 10, 16) for v in q]
    rerank = s1k.recall_at_k(np.array([r[1] for r in refined]), exact)
    assert rerank > plain and rerank >= 0.9
    scores, ids = refined[0]
    assert np.allclose(scores, x[ids] @ q[0], atol=1e-5) and np.all(np.diff(scores) <= 0)
    out = tmp_path / "i.faiss"
    faiss.write_index(idx, str(out))
    mm = faiss.read_index(str(out), faiss.IO_FLAG_MMAP)
    mm.nprobe = 8
    assert np.array_equal(mm.search(q, 10)[1], idx.search(q, 10)[1])
    rows = s1k.measure_grid(mm, path, 32, q, exact, nprobes=(8,), k_factors=(1, 16))
    assert [(r["nprobe"], r["k_factor"]) for r in rows] == [(8, 1), (8, 16)]
    assert rows[1]["recall"] == rerank and rows[1]["cold_p50_ms"] > 0


def test_streamed_build_refuses_too_few_rows_for_the_codebooks(tmp_path):
    path = tmp_path / "v.f32"
    _unit(100, 16).tofile(path)
    with pytest.raises(s1k.IndexBuildError, match="100 rows"):
        s1k.build_streaming(path, 16, pq_m=4, nbits=8)


def test_bm25_sizes_stop_where_the_predicted_peak_exceeds_the_budget():
    texts = [f"retrieval of paper {i} with dense and sparse terms {i % 7}" for i in range(40)]
    res = s1k.bench_bm25_sizes(texts, ["dense retrieval"], scales=(1, 2), budget_bytes=1)
    assert [r["scale"] for r in res["measured"]] == [1]
    assert res["stopped_before"]["scale"] == 2
    assert res["measured"][0]["postings"] > 0 and res["measured"][0]["build_peak_rss_mb"] >= 0
    assert res["extrapolated_1000x"]["n"] == 40 * s1k.SCALE
