"""Dense index: exact search vs brute force, ties, HNSW recall, persistence and rebuild."""

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


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_save_load_roundtrip(tmp_path, data, kind):
    ids, vecs, queries = data
    idx = DenseIndex(ids, vecs, kind=kind, embedder_fingerprint="emb1", chunk_fingerprint="ch1")
    idx.save(tmp_path / "d")
    back = DenseIndex.load(tmp_path / "d", {"embedder_fingerprint": "emb1"})
    assert back.ids == ids and back.settings == idx.settings
    assert back.search(queries, 10) == idx.search(queries, 10)


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

    d = tmp_path / "dense"
    load_or_build(d, build(), embedder_fingerprint="emb1", chunk_fingerprint="ch1")
    load_or_build(d, build(), embedder_fingerprint="emb1", chunk_fingerprint="ch1")
    assert calls == ["flat"]  # second time loaded from disk
    hnsw = DenseSettings(kind="hnsw")
    idx = load_or_build(
        d, build("hnsw"), settings=hnsw, embedder_fingerprint="emb1", chunk_fingerprint="ch1"
    )
    assert calls == ["flat", "hnsw"] and idx.settings.kind == "hnsw"
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
