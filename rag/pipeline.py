"""Build the searchable state a notebook needs: chunks → embeddings → dense and BM25 indexes.

Everything is content-addressed and cached (chunks by chunk fingerprint, vectors per text and
embedder, indexes by embedder + chunk fingerprint + settings), so notebooks 03, 04 and 05 share one
build and a re-run does no work. The same function indexes the corpus chunks and the SciFact
abstracts (one :class:`~rag.types.Chunk` per document).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag import bm25 as bm25_mod
from rag import dense as dense_mod
from rag.chunk import chunk_corpus, chunk_fingerprint, chunk_settings
from rag.embed import Embedder, embed_texts, load_embedder
from rag.paths import cache_dir
from rag.retrieve import ChunkStore
from rag.types import Chunk, ParsedPaper


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


@dataclass
class Indexed:
    """Chunks with their store, embedder, dense and BM25 indexes, and what building them cost."""

    chunks: list[Chunk]
    chunk_fingerprint: str
    store: ChunkStore
    embedder: Embedder
    dense: dense_mod.DenseIndex
    bm25: bm25_mod.BM25Index
    stats: dict[str, Any] = field(default_factory=dict)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def index_chunks(
    chunks: Sequence[Chunk],
    fingerprint: str,
    *,
    embedder: Embedder | str = "minilm",
    dense: Mapping[str, Any] | None = None,
    bm25: Mapping[str, Any] | None = None,
    show_progress: bool = True,
) -> Indexed:
    """Embed (cached per text) and index ``chunks``; load saved indexes when they match.

    Args:
        chunks: the records to index (``chunk_id`` unique).
        fingerprint: identifies the chunk set (``rag.chunk.chunk_fingerprint`` or a dataset id).
        embedder: an :class:`~rag.embed.Embedder` or a name for :func:`~rag.embed.load_embedder`.
        dense: :class:`~rag.dense.DenseSettings` fields (default exact IndexFlatIP).
        bm25: :class:`~rag.bm25.BM25Settings` fields (default rank-bm25's k1=1.5, b=0.75).
    """
    emb = load_embedder(embedder) if isinstance(embedder, str) else embedder
    ids = [c.chunk_id for c in chunks]
    texts = [c.text for c in chunks]
    dense_settings = dense_mod.DenseSettings(**dict(dense or {}))
    bm25_params = dict(bm25 or {})
    stats: dict[str, Any] = {"chunks": len(chunks), "embedder": emb.fingerprint}

    def build_dense() -> dense_mod.DenseIndex:
        t0 = time.perf_counter()
        vectors = embed_texts(ids, texts, emb, show_progress=show_progress)
        stats["embed_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        idx = dense_mod.DenseIndex(
            ids,
            vectors,
            **dense_settings.model_dump(),
            embedder_fingerprint=emb.fingerprint,
            chunk_fingerprint=fingerprint,
        )
        stats["dense_build_s"] = round(time.perf_counter() - t0, 3)
        return idx

    dense_dir = cache_dir(
        "indexes", f"dense-{_key(emb.fingerprint, fingerprint, dense_settings.model_dump())}"
    )
    t0 = time.perf_counter()
    dense_index = dense_mod.load_or_build(
        dense_dir,
        build_dense,
        settings=dense_settings,
        embedder_fingerprint=emb.fingerprint,
        chunk_fingerprint=fingerprint,
    )
    stats["dense_load_or_build_s"] = round(time.perf_counter() - t0, 2)
    stats["dense_from_cache"] = "embed_s" not in stats
    bm25_dir = cache_dir("indexes", f"bm25-{_key(fingerprint, bm25_params)}")
    t0 = time.perf_counter()
    bm25_index = bm25_mod.load_or_build(bm25_dir, ids, texts, **bm25_params)
    stats["bm25_load_or_build_s"] = round(time.perf_counter() - t0, 2)
    stats["dense_disk_bytes"] = _dir_bytes(dense_dir)
    stats["bm25_disk_bytes"] = _dir_bytes(bm25_dir)
    stats["dense_memory_bytes"] = int(dense_index.vectors.nbytes)
    return Indexed(
        list(chunks), fingerprint, ChunkStore(chunks), emb, dense_index, bm25_index, stats
    )


def index_corpus(
    parsed: Sequence[ParsedPaper],
    chunking: Mapping[str, Any],
    *,
    embedder: Embedder | str = "minilm",
    dense: Mapping[str, Any] | None = None,
    bm25: Mapping[str, Any] | None = None,
    show_progress: bool = True,
) -> Indexed:
    """Chunk the parsed papers with ``chunking`` settings and index the chunks."""
    settings = chunk_settings(chunking)
    chunks = chunk_corpus(parsed, settings)
    fp = chunk_fingerprint([p for p in parsed if p.ok], settings)
    return index_chunks(
        chunks, fp, embedder=embedder, dense=dense, bm25=bm25, show_progress=show_progress
    )


def index_documents(
    docs: Mapping[str, Mapping[str, str]],
    name: str,
    *,
    embedder: Embedder | str = "minilm",
    dense: Mapping[str, Any] | None = None,
    bm25: Mapping[str, Any] | None = None,
    show_progress: bool = True,
) -> Indexed:
    """Index a BEIR-style ``{doc_id: {title, text}}`` collection, one chunk per document."""
    store = ChunkStore.from_docs(docs)
    chunks = [store[i] for i in sorted(store)]
    fp = _key(name, [(c.chunk_id, c.text) for c in chunks])
    return index_chunks(
        chunks,
        f"{name}-{fp}",
        embedder=embedder,
        dense=dense,
        bm25=bm25,
        show_progress=show_progress,
    )
