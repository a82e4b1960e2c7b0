"""Dense index: exact search vs brute force, ties, HNSW/IVF recall, persistence and rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import IndexBuildError, RetrievalError
from rag.index.dense import DenseIndex, DenseSettings, load_or_build


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    vecs = _unit(rng, 2000, 32)
    ids = [f"c{i:05d}" for i in range(2000)]
    queries = _unit(rng, 50, 32)
    return ids, vecs, queries


def test_flat_equals_brute_force(data):
    ids, vecs, queries = data
    idx = DenseIndex(ids, vecs)
    got = idx.search(queries, 10)
    brute = queries @ vecs.T
    for row, hits in enumerate(got):
        want = np.argsort(-brute[row], kind="stable")[:10]
        assert [h[0] for h in hits] == [ids[i] for i in want]
        np.testing.assert_allclose([h[1] for h in hits], brute[row, want], rtol=1e-5, atol=1e-6)
    assert idx.recall_vs_exact(queries, 10) == 1.0


def test_ties_broken_by_id_even_across_the_cut():
    # five identical vectors: any 2 of them are "top 2"; the answer must be the two smallest ids
    v = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (5, 1))
    v = np.vstack([v, [[0.0, 1.0]]]).astype(np.float32)
    ids = ["e", "c", "a", "d", "b", "z"]
    idx = DenseIndex(ids, v)
    hits = idx.search(np.array([1.0, 0.0], dtype=np.float32), 2)
    assert hits == [[("a", 1.0), ("b", 1.0)]]
    assert [h[0] for h in idx.search(np.array([[1.0, 0.0]]), 6)[0]] == [
        "a",
        "b",
        "c",
        "d",
        "e",
        "z",
    ]
    assert len(idx.search(np.array([[1.0, 0.0]]), 100)[0]) == 6  # k > n: all of them


def test_hnsw_recall_measured_and_reproducible(data):
    ids, vecs, queries = data
    idx = DenseIndex(ids, vecs, kind="hnsw", m=16, ef_search=64)
    r = idx.recall_vs_exact(queries, 10)
    # random 32-d vectors are a hard case; efSearch=64 still finds most neighbours
    assert 0.8 <= r <= 1.0
    low = DenseIndex(ids, vecs, kind="hnsw", m=4, ef_construction=8, ef_search=8)
    assert low.recall_vs_exact(queries, 10) < r  # the measurement responds to the parameters
    again = DenseIndex(ids, vecs, kind="hnsw", m=16, ef_search=64)
    assert again.search(queries, 10) == idx.search(queries, 10)


def test_bad_input(data):
    ids, vecs, _ = data
    idx = DenseIndex(ids[:10], vecs[:10])
    with pytest.raises(RetrievalError, match="positive"):
        idx.search(vecs[:1], 0)
    with pytest.raises(RetrievalError, match="dim"):
        idx.search(np.zeros((1, 3), dtype=np.float32), 1)
    with pytest.raises(IndexBuildError, match="do not match"):
        DenseIndex(ids[:3], vecs[:2])
    with pytest.raises(IndexBuildError, match="unique"):
        DenseIndex(["a", "a"], vecs[:2])
    bad = vecs[:2].copy()
    bad[0, 0] = np.nan
    with pytest.raises(IndexBuildError, match="NaN"):
        DenseIndex(["a", "b"], bad)
    with pytest.raises(ValueError):
        DenseSettings(kind="ivf")


@pytest.fixture(scope="module")
def clustered():
    """3000 unit vectors in 40 clusters (text embeddings are clustered; isotropic noise is not)."""
    rng = np.random.default_rng(1)
    centres = _unit(rng, 40, 32)
    x = centres[rng.integers(0, 40, 3000)] + 0.15 * rng.standard_normal((3000, 32))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    q = x[rng.choice(3000, 60, replace=False)] + 0.05 * rng.standard_normal((60, 32))
    return [f"c{i:05d}" for i in range(3000)], x, q.astype(np.float32)


def _brute_recall(idx: DenseIndex, vecs: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Recall@k against numpy brute force (not against the index's own exact path)."""
    sims = queries @ vecs.T
    got = idx.search(queries, k)
    rec = [
        len({h[0] for h in hits} & {idx.ids[i] for i in np.argsort(-sims[r])[:k]}) / k
        for r, hits in enumerate(got)
    ]
    return float(np.mean(rec))


@pytest.mark.parametrize(
    ("kind", "params", "floor"),
    [
        ("flat", {}, 1.0),
        ("hnsw", {"m": 16, "ef_search": 64}, 0.95),
        ("ivf_flat", {"nprobe": 8}, 0.95),
        ("ivf_pq", {"nprobe": 8, "pq_m": 16, "pq_nbits": 4}, 0.5),  # 8-byte codes: lossy
    ],
)
def test_each_kind_recall_vs_brute_force(clustered, kind, params, floor):
    ids, vecs, queries = clustered
    idx = DenseIndex(ids, vecs, kind=kind, **params)
    r = _brute_recall(idx, vecs, queries)
    assert r >= floor
    assert idx.recall_vs_exact(queries, 10) == pytest.approx(r)  # the built-in check agrees


def test_ivf_scanning_every_cell_is_exact_and_nprobe_matters(clustered):
    ids, vecs, queries = clustered
    full = DenseIndex(ids, vecs, kind="ivf_flat", nlist=64, nprobe=64)
    assert _brute_recall(full, vecs, queries) == 1.0
    one = DenseIndex(ids, vecs, kind="ivf_flat", nlist=64, nprobe=1)
    assert _brute_recall(one, vecs, queries) < 1.0
    assert (
        full.memory_bytes()
        > DenseIndex(ids, vecs, kind="ivf_pq", pq_m=8, pq_nbits=4).memory_bytes()
    )
    with pytest.raises(IndexBuildError, match="divide"):
        DenseIndex(ids, vecs, kind="ivf_pq", pq_m=5)


def test_pq_exact_rerank_restores_recall_and_scores(tmp_path, clustered):
    ids, vecs, queries = clustered
    codes = {"nprobe": 8, "pq_m": 8, "pq_nbits": 4}  # 4-byte codes: too coarse to order neighbours
    plain = DenseIndex(ids, vecs, kind="ivf_pq", **codes)
    refined = DenseIndex(ids, vecs, kind="ivf_pq", refine_k_factor=16, **codes)
    r_plain, r_refined = (_brute_recall(i, vecs, queries) for i in (plain, refined))
    assert r_plain < 0.9 and r_refined >= 0.95 and r_refined > r_plain
    for q, hits in zip(queries, refined.search(queries, 10), strict=True):
        exact = {i: float(v) for i, v in zip(ids, vecs @ q, strict=True)}
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        assert all(s == pytest.approx(exact[i], abs=1e-5) for i, s in hits)  # not PQ estimates
    refined.save(tmp_path / "pq")
    back = DenseIndex.load(tmp_path / "pq")
    assert isinstance(back.vectors.base, np.memmap) or isinstance(back.vectors, np.memmap)
    assert back.search(queries, 10) == refined.search(queries, 10)
    assert back.settings.refine_k_factor == 16


def test_refine_k_factor_is_pq_only_and_absent_from_default_dumps():
    assert "refine_k_factor" not in DenseSettings().model_dump()  # cache keys stay as they were
    assert "refine_k_factor" not in DenseSettings(kind="ivf_pq").model_dump_json()
    assert DenseSettings(kind="ivf_pq", refine_k_factor=4).model_dump()["refine_k_factor"] == 4
    with pytest.raises(ValueError, match="ivf_pq"):
        DenseSettings(kind="ivf_flat", refine_k_factor=4)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf_flat", "ivf_pq"])
def test_save_load_roundtrip(tmp_path, clustered, kind):
    ids, vecs, queries = clustered
    extra = {"pq_m": 8, "pq_nbits": 4} if kind == "ivf_pq" else {}
    idx = DenseIndex(
        ids, vecs, kind=kind, embedder_fingerprint="emb1", chunk_fingerprint="ch1", **extra
    )
    idx.save(tmp_path / "d")
    back = DenseIndex.load(tmp_path / "d", {"embedder_fingerprint": "emb1"})
    assert back.ids == ids and back.settings == idx.settings
    np.testing.assert_array_equal(back.vectors, vecs)
    assert back.search(queries, 10) == idx.search(queries, 10)
    again = DenseIndex(ids, vecs, kind=kind, **extra)  # fixed-seed training: same cells, same hits
    assert again.search(queries, 10) == idx.search(queries, 10)


def test_load_or_build_rebuilds_on_mismatch(tmp_path, data):
    ids, vecs, queries = data
    calls = []

    def build(kind="flat", emb="emb1"):
        def f():
            calls.append(kind)
            return DenseIndex(
                ids, vecs, kind=kind, embedder_fingerprint=emb, chunk_fingerprint="ch1"
            )

        return f

    def build_ivf_flat():
        calls.append("ivf_flat")
        return DenseIndex(
            ids,
            vecs,
            kind="ivf_flat",
            nprobe=4,
            embedder_fingerprint="emb1",
            chunk_fingerprint="ch1",
        )

    d = tmp_path / "dense"
    load_or_build(d, build(), embedder_fingerprint="emb1", chunk_fingerprint="ch1")
    load_or_build(d, build(), embedder_fingerprint="emb1", chunk_fingerprint="ch1")
    assert calls == ["flat"]  # second time loaded from disk
    hnsw = DenseSettings(kind="hnsw")
    idx = load_or_build(
        d, build("hnsw"), settings=hnsw, embedder_fingerprint="emb1", chunk_fingerprint="ch1"
    )
    assert calls == ["flat", "hnsw"] and idx.settings.kind == "hnsw"
    ivf = DenseSettings(kind="ivf_flat", nprobe=4)  # the kind changed: the cache is rebuilt
    idx = load_or_build(
        d, build_ivf_flat, settings=ivf, embedder_fingerprint="emb1", chunk_fingerprint="ch1"
    )
    assert calls == ["flat", "hnsw", "ivf_flat"] and idx.settings.kind == "ivf_flat"
    # a different embedder fingerprint is refused by load with a message naming it
    with pytest.raises(IndexBuildError, match="embedder_fingerprint"):
        DenseIndex.load(d, {"embedder_fingerprint": "emb2"})
    # and a build() that does not produce what was asked for is an error, not a silent save
    with pytest.raises(IndexBuildError, match="expected"):
        load_or_build(
            d, build("flat", "emb1"), embedder_fingerprint="emb2", chunk_fingerprint="ch1"
        )


def test_tampered_vectors_detected(tmp_path, data):
    ids, vecs, _ = data
    DenseIndex(ids[:20], vecs[:20]).save(tmp_path / "d")
    np.save(tmp_path / "d" / "vectors.npy", vecs[20:40])
    with pytest.raises(IndexBuildError, match="do not match"):
        DenseIndex.load(tmp_path / "d")


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_vectors_are_one_copy_that_outlives_the_index(clustered, kind):
    """flat/HNSW expose faiss's own storage (no second copy); the array keeps the index alive."""
    import gc

    ids, vecs, _ = clustered
    got = DenseIndex(ids, vecs, kind=kind).vectors  # the index itself is dropped at once
    gc.collect()
    _ = [np.ones((1000, 32), dtype=np.float32) for _ in range(50)]  # reuse any freed memory
    np.testing.assert_array_equal(got, vecs)
    assert not got.flags.writeable
