"""Build the searchable state a notebook needs: chunks → embeddings → dense and BM25 indexes.

Everything is content-addressed and cached (chunks by chunk fingerprint, vectors per text and
embedder, indexes by embedder + chunk fingerprint + settings), so notebooks 03, 04 and 05 share one
build and a re-run does no work. The same function indexes the corpus chunks and the SciFact
abstracts (one :class:`~rag.types.Chunk` per document); only the corpus path drops tables of
contents and stray reference lists first (:mod:`rag.text.hygiene`, ``index_hygiene``). The dense
index kind is :func:`rag.index.choose.choose_index`'s pick for the number of chunks unless the
caller names one (exact ``flat`` for the 100-paper corpus; HNSW, IVF-Flat or IVF-PQ as the corpus
grows).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rag.atomic import write_atomic
from rag.index import bm25 as bm25_mod
from rag.index import dense as dense_mod
from rag.index.choose import choose_index
from rag.index.embed import Embedder, load_embedder
from rag.index.embed_cache import embed_texts
from rag.index.store import ChunkStore
from rag.paths import cache_dir
from rag.text.chunk import ChunkSettings, require_settings
from rag.text.chunk_cache import chunk_corpus, chunk_fingerprint
from rag.text.hygiene import HYGIENE_VERSION, split_body
from rag.types import Chunk, ParsedPaper


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


@dataclass
class Indexed:
    """Chunks with their store, embedder, dense and BM25 indexes, and what building them cost."""

    chunks: list[Chunk]
    chunk_fingerprint: str
    store: ChunkStore
    embedder: Embedder | None
    dense: dense_mod.DenseIndex | None
    bm25: bm25_mod.BM25Index
    stats: dict[str, Any] = field(default_factory=dict)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _bm25(
    ids: list[str], texts: list[str], fingerprint: str, params: dict[str, Any], stats: dict
) -> bm25_mod.BM25Index:
    bm25_dir = cache_dir("indexes", f"bm25-{_key(fingerprint, params)}")
    t0 = time.perf_counter()
    index = bm25_mod.load_or_build(bm25_dir, ids, texts, **params)
    stats["bm25_load_or_build_s"] = round(time.perf_counter() - t0, 2)
    stats["bm25_disk_bytes"] = _dir_bytes(bm25_dir)
    return index


def index_chunks(
    chunks: Sequence[Chunk],
    fingerprint: str,
    *,
    embedder: Embedder | str | None = "minilm",
    dense: Mapping[str, Any] | None = None,
    bm25: Mapping[str, Any] | None = None,
    show_progress: bool = True,
) -> Indexed:
    """Embed (cached per text) and index ``chunks``; load saved indexes when they match.

    ``embedder=None`` builds the BM25 index only (``dense`` and ``embedder`` are then None), for
    lexical runs that should not pay for an embedding model.

    Args:
        chunks: the records to index (``chunk_id`` unique).
        fingerprint: identifies the chunk set (``rag.text.chunk.chunk_fingerprint`` or a dataset
            id).
        embedder: an :class:`~rag.index.embed.Embedder`, a name for
            :func:`~rag.index.embed.load_embedder`, or None (BM25 only).
        dense: :class:`~rag.index.dense.DenseSettings` fields; None or ``{"kind": "auto"}``
            lets :func:`~rag.index.choose.choose_index` pick by the number of chunks.
        bm25: :class:`~rag.index.bm25.BM25Settings` fields (default rank-bm25's k1=1.5, b=0.75).
    """
    ids = [c.chunk_id for c in chunks]
    texts = [c.text for c in chunks]
    bm25_params = dict(bm25 or {})
    if embedder is None:
        stats: dict[str, Any] = {"chunks": len(chunks), "embedder": None}
        bm25_index = _bm25(ids, texts, fingerprint, bm25_params, stats)
        return Indexed(list(chunks), fingerprint, ChunkStore(chunks), None, None, bm25_index, stats)
    emb = load_embedder(embedder) if isinstance(embedder, str) else embedder
    dense_params = dict(dense or {"kind": "auto"})
    stats = {"chunks": len(chunks), "embedder": emb.fingerprint}
    if dense_params.get("kind") == "auto":
        choice = choose_index(max(1, len(chunks)), int(emb.dim))
        dense_params = {**dense_params, **choice.settings.model_dump()}
        stats["dense_choice"] = choice.reason
    dense_settings = dense_mod.DenseSettings(**dense_params)
    stats["dense_kind"] = dense_settings.kind

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
    bm25_index = _bm25(ids, texts, fingerprint, bm25_params, stats)
    stats["dense_disk_bytes"] = _dir_bytes(dense_dir)
    stats["dense_memory_bytes"] = int(dense_index.vectors.nbytes)
    return Indexed(
        list(chunks), fingerprint, ChunkStore(chunks), emb, dense_index, bm25_index, stats
    )


def indexed_fingerprint(fingerprint: str, hygiene: bool) -> str:
    """The fingerprint of the chunks an index holds: the chunk set's own without hygiene, else
    the chunk set's plus the hygiene classifier's version (its labels decide what is kept)."""
    return f"{fingerprint}-h{HYGIENE_VERSION}" if hygiene else fingerprint


def body_chunks(
    chunks: Sequence[Chunk], fingerprint: str, *, enabled: bool = True
) -> tuple[list[Chunk], dict[str, int]]:
    """:func:`rag.text.hygiene.split_body` of a chunk set, its result cached by the set's
    fingerprint and the classifier's version: classifying every chunk again was a fifth of the
    CPU time of a warm ``rag ask``. The entry holds the kept ids and the texts hygiene repaired
    (TOC runs cut, hyphen splits joined). A cached entry that does not fit the chunks is
    recomputed."""
    if not enabled:
        return split_body(chunks, enabled=False)
    path = cache_dir("hygiene") / f"{_key(indexed_fingerprint(fingerprint, True))}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        keep, texts = set(record["kept"]), record["texts"]
        kept = [
            replace(c, text=texts[c.chunk_id]) if c.chunk_id in texts else c
            for c in chunks
            if c.chunk_id in keep
        ]
        if len(kept) == len(keep) == record["counts"]["body"]:
            return kept, dict(record["counts"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    kept, counts = split_body(chunks, enabled=True)
    before = {c.chunk_id: c.text for c in chunks}
    texts = {c.chunk_id: c.text for c in kept if c.text != before[c.chunk_id]}
    record = {"kept": [c.chunk_id for c in kept], "counts": counts, "texts": texts}
    write_atomic(path, json.dumps(record, ensure_ascii=False))
    return kept, counts


def index_corpus(
    parsed: Sequence[ParsedPaper],
    chunking: ChunkSettings,
    *,
    embedder: Embedder | str = "minilm",
    dense: Mapping[str, Any] | None = None,
    bm25: Mapping[str, Any] | None = None,
    show_progress: bool = True,
) -> Indexed:
    """Chunk the parsed papers with ``chunking`` settings and index the chunks.

    With ``chunking.index_hygiene`` (the default) only the chunks :mod:`rag.text.hygiene` labels
    ``body`` are indexed: ``Indexed.chunks``, its store and both indexes hold those, the indexes
    are cached under :func:`indexed_fingerprint`, and ``stats`` records how many chunks were
    chunked (``chunks_before_hygiene``) and dropped (``hygiene_dropped_toc``,
    ``hygiene_dropped_references``). Off, every chunk is indexed under the chunk fingerprint, as
    before hygiene existed.
    """
    settings = require_settings(chunking, "index_corpus")
    chunks = chunk_corpus(parsed, settings)
    fp = chunk_fingerprint([p for p in parsed if p.ok], settings)
    kept, counts = body_chunks(chunks, fp, enabled=settings.index_hygiene)
    ix = index_chunks(
        kept,
        indexed_fingerprint(fp, settings.index_hygiene),
        embedder=embedder,
        dense=dense,
        bm25=bm25,
        show_progress=show_progress,
    )
    ix.stats.update(
        {
            "chunks_before_hygiene": len(chunks),
            "index_hygiene": settings.index_hygiene,
            "hygiene_version": HYGIENE_VERSION if settings.index_hygiene else None,
            "hygiene_dropped_toc": counts["toc"],
            "hygiene_dropped_references": counts["references"],
        }
    )
    return ix


def index_documents(
    docs: Mapping[str, Mapping[str, str]],
    name: str,
    *,
    embedder: Embedder | str | None = "minilm",
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


def build_corpus_index(
    *,
    manifest_path: str = "data/manifest.jsonl",
    max_papers: int = 0,
    chunking: ChunkSettings | None = None,
    embedder: str = "minilm",
    engine: str = "serial",
    address: str | None = None,
) -> Indexed:
    """``rag index``: parse, chunk, embed and index the pinned corpus (all cached).

    ``engine="ray"`` embeds the chunks missing from the cache as a Ray Data job
    (:func:`rag.index.ray_embed.ray_embed_texts`, local Ray or the cluster at ``address``) before
    the indexes are built from the filled cache; ``"serial"`` embeds in this process.
    """
    from rag.corpus.papers import corpus_papers
    from rag.errors import ConfigError

    if engine not in ("serial", "ray"):
        raise ConfigError(f"rag index: engine must be serial or ray, got {engine!r}")
    _, parsed = corpus_papers(manifest_path, (), max_papers)
    settings = require_settings(chunking, "build_corpus_index")
    chunks = chunk_corpus(parsed, settings)
    stats: dict[str, Any] = {}
    if engine == "ray":
        from rag.index.ray_embed import ray_embed_texts

        t0 = time.perf_counter()
        ray_embed_texts(
            [c.chunk_id for c in chunks], [c.text for c in chunks], embedder, address=address,
            stats=stats,
        )  # fmt: skip
        stats["ray_embed_s"] = round(time.perf_counter() - t0, 2)
    ix = index_corpus(parsed, settings, embedder=embedder)
    ix.stats.update({f"ray_{k}" if not k.startswith("ray") else k: v for k, v in stats.items()})
    return ix
