"""An on-disk, content-addressed cache of passage embeddings, and :func:`embed_texts` through it.

:func:`embed_texts` caches passage vectors in SQLite under ``cache_dir("embeddings")``, keyed by
the embedder fingerprint plus the sha256 of each text: an unchanged corpus is never re-embedded, a
changed paper re-embeds only its changed chunks, and every finished block is committed so an
interrupted run loses nothing.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from rag.errors import IndexBuildError
from rag.index.embed import Embedder, normalise
from rag.paths import cache_dir
from rag.shard import sharded_map, torch_threads

logger = logging.getLogger(__name__)

#: Bump when the cache layout changes; a new version writes to a new file.
CACHE_FORMAT_VERSION = 1


def text_key(text: str) -> bytes:
    """sha256 of a text (the per-text half of the cache key; the file holds one fingerprint)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def cache_path(fingerprint: str) -> Path:
    """The SQLite file holding one embedder fingerprint's vectors."""
    h = hashlib.sha256(f"v{CACHE_FORMAT_VERSION}|{fingerprint}".encode()).hexdigest()[:20]
    return cache_dir("embeddings") / f"{h}.sqlite"


@contextmanager
def _open_cache(fingerprint: str, dim: int) -> Iterator[sqlite3.Connection]:
    path = cache_path(fingerprint)
    con = sqlite3.connect(path, timeout=60)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
        con.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL)")
        con.execute("INSERT OR IGNORE INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
        con.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(dim),))
        con.commit()
        have = dict(con.execute("SELECT k, v FROM meta").fetchall())
        if have.get("fingerprint") != fingerprint or have.get("dim") != str(dim):
            raise IndexBuildError(
                f"embedding cache {path.name} holds {have} but {fingerprint!r} (dim {dim}) was "
                "asked for; delete that file"
            )
        yield con
    finally:
        con.close()


def _lookup(con: sqlite3.Connection, keys: list[bytes], dim: int) -> dict[bytes, np.ndarray]:
    found: dict[bytes, np.ndarray] = {}
    for i in range(0, len(keys), 500):
        part = keys[i : i + 500]
        q = f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(part))})"
        for k, v in con.execute(q, part):
            found[k] = np.frombuffer(v, dtype=np.float32, count=dim)
    return found


def embed_texts(
    ids: list[str],
    texts: list[str],
    embedder: Embedder,
    *,
    cache: bool = True,
    show_progress: bool = True,
    block_size: int | None = None,
) -> np.ndarray:
    """Embed passages, reusing cached vectors; returns float32 (len(texts), dim), L2-normalised.

    Only texts not yet cached for ``embedder.fingerprint`` are sent to the model, longest first
    in blocks (similar lengths batch with little padding); each block is committed before the
    next, so an interrupted run keeps its work. Identical texts are embedded once. An embedder
    with ``passage_shards`` > 1 has that many blocks encoded at a time, each in its own pinned
    thread with one PyTorch thread (:mod:`rag.shard`): the same blocks as in order, so the same
    vectors.

    Args:
        ids: one id per text (validated for alignment; used in messages).
        texts: passages to embed.
        embedder: any :class:`Embedder`.
        cache: read and write the on-disk cache; False always calls the model.
        show_progress: show a tqdm bar over texts to embed.
        block_size: texts per model call and commit (default 8 batches, at least 128).
    """
    if len(ids) != len(texts):
        raise IndexBuildError(f"embed_texts: {len(ids)} ids but {len(texts)} texts; align them")
    dim = int(embedder.dim)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    keys = [text_key(t) for t in texts]
    first: dict[bytes, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    block = block_size or max(128, 8 * int(getattr(embedder, "batch_size", 32)))
    shards = max(1, int(getattr(embedder, "passage_shards", 1)))

    def run(con: sqlite3.Connection | None) -> None:
        found = _lookup(con, list(first), dim) if con is not None else {}
        todo = [k for k in first if k not in found]
        todo.sort(key=lambda k: (-len(texts[first[k]]), first[k]))
        logger.info(
            "embed_texts[%s]: %d texts, %d unique, %d cached, %d to embed",
            embedder.name,
            len(texts),
            len(first),
            len(found),
            len(todo),
        )
        bar = tqdm(
            total=len(todo), desc=f"embed {embedder.name}", unit="text", disable=not show_progress
        )
        blocks = [todo[s : s + block] for s in range(0, len(todo), block)]

        def encode(part: list[bytes]) -> np.ndarray:
            return np.asarray(
                embedder.encode_passages([texts[first[k]] for k in part]), dtype=np.float32
            )

        with bar:
            # a round is one block per shard, encoded side by side (rag.shard), then committed
            for r in range(0, len(blocks), shards):
                parts = blocks[r : r + shards]
                with torch_threads(1) if len(parts) > 1 else nullcontext():
                    encoded = sharded_map(encode, parts, shards, progress=False)
                for part, vecs in zip(parts, encoded, strict=True):
                    if vecs.shape != (len(part), dim):
                        raise IndexBuildError(
                            f"embedder {embedder.name!r} returned shape {vecs.shape} for "
                            f"{len(part)} texts (dim {dim}), e.g. id {ids[first[part[0]]]!r}"
                        )
                    vecs = normalise(vecs)
                    for k, v in zip(part, vecs, strict=True):
                        found[k] = v
                    if con is not None:
                        con.executemany(
                            "INSERT OR REPLACE INTO vec VALUES (?, ?)",
                            [(k, v.tobytes()) for k, v in zip(part, vecs, strict=True)],
                        )
                        con.commit()
                    bar.update(len(part))
        for i, k in enumerate(keys):
            out[i] = found[k]

    if cache:
        with _open_cache(embedder.fingerprint, dim) as con:
            run(con)
    else:
        run(None)
    return out
