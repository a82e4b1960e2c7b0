"""rag.index.build: one cached build of the dense and BM25 indexes, reused only when nothing that
changes them has changed (STYLE.md §10).

A tiny hashing embedder counts every text it encodes, so "reused" means provably no model call;
the saved index folders under a per-test cache show which index was built anew.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from rag.index.build import index_chunks, index_corpus, index_documents
from rag.paths import cache_dir
from rag.text.chunk import ChunkSettings
from rag.types import Block, Chunk, ParsedPaper


class CountingEmbedder:
    """Bag-of-words vectors hashed into 16 buckets; records every text it is asked to encode."""

    def __init__(self, fingerprint: str = "count-v1") -> None:
        self.name = "counting"
        self.dim = 16
        self.fingerprint = fingerprint
        self.encoded: list[str] = []

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            out[i] /= max(np.linalg.norm(out[i]), 1e-9)
        return out

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        return self._encode(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)


TEXTS = {
    "a": "dense retrieval with dual encoders",
    "b": "bm25 scores terms by frequency",
    "c": "rank fusion of bm25 and dense runs",
    "d": "cross encoders rerank a small pool",
}


def chunks(texts: dict[str, str] = TEXTS) -> list[Chunk]:
    return [Chunk(cid, f"p-{cid}", "test", t, "S", 1, 1, 0, len(t), len(t.split()))
            for cid, t in texts.items()]  # fmt: skip


def saved(kind: str) -> set[str]:
    """Names of the saved index folders of one kind ("dense" or "bm25")."""
    return {p.name for p in cache_dir("indexes").iterdir() if p.name.startswith(f"{kind}-")}


def test_same_inputs_reuse_both_saved_indexes(tmp_cache):
    emb = CountingEmbedder()
    first = index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    assert sorted(emb.encoded) == sorted(TEXTS.values()), "each chunk embedded once"
    assert first.stats["dense_from_cache"] is False
    assert (len(saved("dense")), len(saved("bm25"))) == (1, 1)
    dense_dir = cache_dir("indexes") / next(iter(saved("dense")))
    mtimes = {p.name: p.stat().st_mtime_ns for p in dense_dir.iterdir()}

    again = index_chunks(chunks(), "fp1", embedder=CountingEmbedder(), show_progress=False)
    assert again.stats["dense_from_cache"] is True and "embed_s" not in again.stats
    assert {p.name: p.stat().st_mtime_ns for p in dense_dir.iterdir()} == mtimes, "not rewritten"
    assert (len(saved("dense")), len(saved("bm25"))) == (1, 1)
    np.testing.assert_array_equal(again.dense.vectors, first.dense.vectors)
    assert again.bm25.search("bm25 dense", 4) == first.bm25.search("bm25 dense", 4)
    assert again.store.ids == first.store.ids == ["a", "b", "c", "d"]


def test_an_edited_chunk_rebuilds_and_embeds_only_the_new_text(tmp_cache):
    emb = CountingEmbedder()
    index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    emb.encoded.clear()
    edited = {**TEXTS, "c": "reciprocal rank fusion"}
    ix = index_chunks(chunks(edited), "fp2", embedder=emb, show_progress=False)
    assert emb.encoded == ["reciprocal rank fusion"], "the three unchanged texts come from cache"
    assert ix.stats["dense_from_cache"] is False
    assert (len(saved("dense")), len(saved("bm25"))) == (2, 2)
    assert ix.bm25.search("reciprocal", 1)[0][0] == "c"


def test_changed_settings_rebuild_only_their_own_index(tmp_cache):
    emb = CountingEmbedder()
    index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    emb.encoded.clear()
    hnsw = index_chunks(chunks(), "fp1", embedder=emb, dense={"kind": "hnsw"}, show_progress=False)
    assert hnsw.stats["dense_from_cache"] is False and emb.encoded == [], "vectors from cache"
    assert (len(saved("dense")), len(saved("bm25"))) == (2, 1), "BM25 unchanged: reused"
    k1 = index_chunks(chunks(), "fp1", embedder=emb, bm25={"k1": 1.2}, show_progress=False)
    assert k1.stats["dense_from_cache"] is True
    assert (len(saved("dense")), len(saved("bm25"))) == (2, 2)
    assert k1.bm25.settings.k1 == 1.2


def test_a_new_embedder_fingerprint_re_embeds_and_rebuilds_dense_only(tmp_cache):
    index_chunks(chunks(), "fp1", embedder=CountingEmbedder("count-v1"), show_progress=False)
    emb2 = CountingEmbedder("count-v2")
    ix = index_chunks(chunks(), "fp1", embedder=emb2, show_progress=False)
    assert sorted(emb2.encoded) == sorted(TEXTS.values())
    assert ix.stats["dense_from_cache"] is False and ix.stats["embedder"] == "count-v2"
    assert (len(saved("dense")), len(saved("bm25"))) == (2, 1)


def test_no_embedder_builds_bm25_only(tmp_cache):
    ix = index_chunks(chunks(), "fp1", embedder=None, show_progress=False)
    assert ix.embedder is None and ix.dense is None
    assert ix.stats["embedder"] is None and ix.stats["chunks"] == 4
    assert saved("dense") == set() and len(saved("bm25")) == 1
    # the BM25 index it saved is the one a full build reuses
    emb = CountingEmbedder()
    full = index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    assert len(saved("bm25")) == 1 and len(saved("dense")) == 1
    assert full.bm25.search("bm25", 2) == ix.bm25.search("bm25", 2)


def test_index_documents_keys_on_the_documents(tmp_cache):
    docs = {"d1": {"title": "Aspirin", "text": "reduces fever"}, "d2": {"title": "", "text": "x y"}}
    a = index_documents(docs, "toy", embedder=None, show_progress=False)
    assert a.store["d1"].text == "Aspirin reduces fever"
    index_documents(docs, "toy", embedder=None, show_progress=False)
    assert len(saved("bm25")) == 1
    b = index_documents({**docs, "d2": {"title": "", "text": "x z"}}, "toy", embedder=None)
    assert len(saved("bm25")) == 2 and b.chunk_fingerprint != a.chunk_fingerprint


def _paper() -> ParsedPaper:
    body = " ".join(f"Sentence number {i} talks about retrieval and ranking." for i in range(30))
    return ParsedPaper("2401.00001", 1, [Block(1, "body", "Intro", body)])


def test_index_corpus_rebuilds_when_the_chunk_settings_change(tmp_cache):
    emb = CountingEmbedder()
    a = index_corpus([_paper()], ChunkSettings(max_tokens=64), embedder=emb, show_progress=False)
    n_a = len(emb.encoded)
    assert n_a == len(a.chunks) > 1
    again = index_corpus(
        [_paper()], ChunkSettings(max_tokens=64), embedder=emb, show_progress=False
    )
    assert len(emb.encoded) == n_a and again.stats["dense_from_cache"] is True
    assert again.chunk_fingerprint == a.chunk_fingerprint
    b = index_corpus([_paper()], ChunkSettings(max_tokens=128), embedder=emb, show_progress=False)
    assert b.chunk_fingerprint != a.chunk_fingerprint and b.stats["dense_from_cache"] is False
    assert len(b.chunks) < len(a.chunks)
    assert (len(saved("dense")), len(saved("bm25"))) == (2, 2)


@pytest.mark.parametrize("bad", [{"kind": "ivf"}, {"m": 1}])
def test_bad_dense_settings_are_refused(tmp_cache, bad):
    import pydantic

    with pytest.raises(pydantic.ValidationError):
        index_chunks(chunks(), "fp1", embedder=CountingEmbedder(), dense=bad)


def test_default_dense_kind_is_the_rules_pick(tmp_cache, monkeypatch):
    """No ``dense`` settings: rag.index.choose picks (flat for a small corpus); when the rule's
    latency constant makes exact search too slow, the same call builds its other pick."""
    from rag.index import choose

    emb = CountingEmbedder()
    ix = index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    assert ix.stats["dense_kind"] == "flat" and "exact" in ix.stats["dense_choice"]
    monkeypatch.setattr(choose, "FLAT_NS_PER_VECTOR", 1e12)  # pretend one vector costs 1000 s
    ix = index_chunks(chunks(), "fp1", embedder=emb, show_progress=False)
    assert ix.stats["dense_kind"] == ix.dense.settings.kind == "ivf_flat"
    assert ix.dense.search(emb.encode_queries(["reciprocal"]), 1)[0]
