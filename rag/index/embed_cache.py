"""An on-disk, content-addressed cache of passage embeddings, and :func:`embed_texts` through it.

:func:`embed_texts` caches passage vectors in SQLite under ``cache_dir("embeddings")``, keyed by
the embedder fingerprint plus the sha256 of each text: an unchanged corpus is never re-embedded, a
changed paper re-embeds only its changed chunks, and every finished block is committed so an
interrupted run loses nothing. :class:`VectorCache` is the one way in or out of that cache (the
serial path here, :mod:`rag.index.ray_embed` and :mod:`rag.index.ray_pipeline` all use it): it
checks each vector before commit and drops stored ones that fail the check.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
from collections.abc import Container, Iterator
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


def distinct_texts(
    ids: list[str], texts: list[str], caller: str
) -> tuple[list[bytes], dict[bytes, int]]:
    """Each text's cache key, and the first position of every distinct key (identical texts are
    embedded once), after checking that ``ids`` and ``texts`` align.

    Raises:
        IndexBuildError: one id per text is not given; the message names ``caller``.
    """
    if len(ids) != len(texts):
        raise IndexBuildError(f"{caller}: {len(ids)} ids but {len(texts)} texts; align them")
    keys = [text_key(t) for t in texts]
    first: dict[bytes, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    return keys, first


def longest_first(
    first: dict[bytes, int], found: Container[bytes], texts: list[str]
) -> list[bytes]:
    """The keys of ``first`` not ``found``, longest text first (similar lengths batch with
    little padding), ties in text order."""
    todo = [k for k in first if k not in found]
    todo.sort(key=lambda k: (-len(texts[first[k]]), first[k]))
    return todo


def default_block(embedder: object) -> int:
    """Texts per model call and commit when none is given: 8 batches, at least 128."""
    return max(128, 8 * int(getattr(embedder, "batch_size", 32)))


def cache_path(fingerprint: str) -> Path:
    """The SQLite file holding one embedder fingerprint's vectors."""
    h = hashlib.sha256(f"v{CACHE_FORMAT_VERSION}|{fingerprint}".encode()).hexdigest()[:20]
    return cache_dir("embeddings") / f"{h}.sqlite"


#: How far a stored vector's L2 norm may sit from 1 (float32 normalisation is exact to ~1e-7).
NORM_TOLERANCE = 1e-3


def bad_rows(vecs: np.ndarray, dim: int) -> np.ndarray:
    """Indices of the rows of ``vecs`` that may not be cached: not finite, or an L2 norm more
    than :data:`NORM_TOLERANCE` from 1 (a zero vector included).

    Raises:
        IndexBuildError: ``vecs`` is not a ``(n, dim)`` array.
    """
    vecs = np.asarray(vecs)
    if vecs.ndim != 2 or vecs.shape[1] != dim:
        raise IndexBuildError(f"vectors of shape {vecs.shape} where (n, {dim}) was expected")
    with np.errstate(invalid="ignore", over="ignore"):
        norms = np.linalg.norm(vecs.astype(np.float64), axis=1)
    ok = np.isfinite(vecs).all(axis=1) & (np.abs(norms - 1.0) <= NORM_TOLERANCE)
    return np.flatnonzero(~ok)


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    """An exclusive advisory ``flock`` on ``path``'s ``.lock`` file, released by the kernel if the
    process dies."""
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class VectorCache:
    """One embedder fingerprint's passage vectors on disk; the one way vectors enter or leave.

    :meth:`put` checks every vector (finite, the expected dimension, unit norm) before anything is
    committed, so an embedder that emits NaN or zeros never poisons the cache; :meth:`get` treats
    a stored row that fails the same check as missing and deletes it, so poison written by older
    code is recomputed. :meth:`lock` serialises work on one cache across processes, so a second
    run waits and then finds a block the first one committed.
    """

    def __init__(self, con: sqlite3.Connection, fingerprint: str, dim: int, path: Path) -> None:
        self._con = con
        self.fingerprint = fingerprint
        self.dim = dim
        self.path = path

    @classmethod
    @contextmanager
    def open(cls, fingerprint: str, dim: int, *, name: str = "") -> Iterator[VectorCache]:
        """Open (or create) the cache of ``fingerprint``'s ``dim``-d vectors; ``name`` is the
        embedder's short name, recorded so ``rag cache clear --embedder`` can find it.

        Raises:
            IndexBuildError: the file holds another fingerprint or dimension.
        """
        path = cache_path(fingerprint)
        con = sqlite3.connect(path, timeout=60)
        try:
            # Switching a new file to WAL takes an exclusive lock that SQLite does not wait for
            # ("database is locked" when two openers race), so a file not yet in WAL is set up
            # under the cache's lock; an existing cache opens without waiting for a running job.
            wal = con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            with nullcontext() if wal else _flock(path):
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")
                con.execute(
                    "CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL)"
                )
                con.execute("INSERT OR IGNORE INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
                con.execute("INSERT OR IGNORE INTO meta VALUES ('dim', ?)", (str(dim),))
                if name:
                    con.execute("INSERT OR IGNORE INTO meta VALUES ('name', ?)", (name,))
                con.commit()
            have = dict(con.execute("SELECT k, v FROM meta").fetchall())
            if have.get("fingerprint") != fingerprint or have.get("dim") != str(dim):
                raise IndexBuildError(
                    f"embedding cache {path.name} holds {have} but {fingerprint!r} (dim {dim}) "
                    "was asked for; delete that file"
                )
            yield cls(con, fingerprint, dim, path)
        finally:
            con.close()

    def get(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of ``keys`` that pass the check (others are deleted)."""
        found: dict[bytes, np.ndarray] = {}
        invalid: list[bytes] = []
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            q = f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(part))})"
            rows = self._con.execute(q, part).fetchall()
            for k, v in rows:
                vec = np.frombuffer(v, dtype=np.float32)
                if vec.size != self.dim or len(bad_rows(vec[None, :], self.dim)):
                    invalid.append(k)
                else:
                    found[k] = vec
        if invalid:
            logger.warning(
                "embedding cache %s: %d stored vector(s) failed the check; recomputing them",
                self.path.name,
                len(invalid),
            )
            self._con.executemany("DELETE FROM vec WHERE key = ?", [(k,) for k in invalid])
            self._con.commit()
        return found

    def missing(self, keys: list[bytes]) -> list[bytes]:
        """``keys`` (unique, in order) that the cache does not hold as valid vectors."""
        held = self.get(list(dict.fromkeys(keys)))
        return [k for k in dict.fromkeys(keys) if k not in held]

    def put(self, keys: list[bytes], vecs: np.ndarray) -> None:
        """Commit ``vecs`` under ``keys``, after checking every one.

        Raises:
            IndexBuildError: a count mismatch, another dimension, or any vector that is not
                finite or not unit length; nothing of the call is written.
        """
        vecs = np.asarray(vecs, dtype=np.float32)
        if len(keys) != len(vecs):
            raise IndexBuildError(f"{len(keys)} keys for {len(vecs)} vectors; nothing cached")
        bad = bad_rows(vecs, self.dim) if len(vecs) else np.array([], dtype=int)
        if len(bad):
            raise IndexBuildError(
                f"embedder {self.fingerprint!r} returned {len(bad)} of {len(vecs)} vector(s) "
                f"that are not finite or not unit length (first: row {int(bad[0])}); nothing of "
                "this block was cached: check the model (`rag cache verify`, `rag models fetch`)"
            )
        self._con.executemany(
            "INSERT OR REPLACE INTO vec VALUES (?, ?)",
            [(k, np.ascontiguousarray(v).tobytes()) for k, v in zip(keys, vecs, strict=True)],
        )
        self._con.commit()

    def scrub(self) -> tuple[int, int]:
        """Re-check every stored vector and delete those that fail; ``(kept, removed)``."""
        keys = [k for (k,) in self._con.execute("SELECT key FROM vec")]
        kept = len(self.get(keys))  # get deletes what fails the check
        return kept, len(keys) - kept

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold this cache's cross-process lock (an advisory ``flock`` beside the file, released
        by the kernel if the process dies)."""
        with _flock(self.path):
            yield


def stored_caches() -> list[dict[str, object]]:
    """Every embedding cache file: ``path``, ``fingerprint``, ``name`` (may be empty), ``dim``."""
    out: list[dict[str, object]] = []
    for path in sorted(cache_dir("embeddings").glob("*.sqlite")):
        try:
            with sqlite3.connect(path, timeout=60) as con:
                meta = dict(con.execute("SELECT k, v FROM meta").fetchall())
        except sqlite3.Error as e:
            logger.warning("skipping unreadable embedding cache %s: %s", path.name, e)
            continue
        out.append({"path": path, "fingerprint": meta.get("fingerprint", ""),
                    "name": meta.get("name", ""), "dim": int(meta.get("dim", 0))})  # fmt: skip
    return out


def embed_texts(
    ids: list[str],
    texts: list[str],
    embedder: Embedder,
    *,
    cache: bool = True,
    show_progress: bool = True,
    block_size: int | None = None,
    stats: dict[str, int] | None = None,
) -> np.ndarray:
    """Embed passages, reusing cached vectors; returns float32 (len(texts), dim), L2-normalised.

    Only texts not yet cached for ``embedder.fingerprint`` are sent to the model, longest first
    in blocks (similar lengths batch with little padding); each block is committed before the
    next, so an interrupted run keeps its work. Identical texts are embedded once. An embedder
    with ``passage_shards`` > 1 has that many blocks encoded at a time, each in its own pinned
    thread with one PyTorch thread (:mod:`rag.shard`): the same blocks as in order, so the same
    vectors. Each round of blocks is encoded under the cache's lock after a second look at the
    cache, so two runs over one cache embed every text once: the second waits, then skips what
    the first committed. Vectors are checked before they are committed (:class:`VectorCache`).

    Args:
        ids: one id per text (validated for alignment; used in messages).
        texts: passages to embed.
        embedder: any :class:`Embedder`.
        cache: read and write the on-disk cache; False always calls the model.
        show_progress: show a tqdm bar over texts to embed.
        block_size: texts per model call and commit (default 8 batches, at least 128).
        stats: filled with counts: ``cached`` (found at the start), ``embedded`` (by this call)
            and ``done_elsewhere`` (committed by another run while this one waited).
    """
    keys, first = distinct_texts(ids, texts, "embed_texts")
    stats = stats if stats is not None else {}
    dim = int(embedder.dim)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    block = block_size or default_block(embedder)
    shards = max(1, int(getattr(embedder, "passage_shards", 1)))

    def encode(part: list[bytes]) -> np.ndarray:
        vecs = np.asarray(
            embedder.encode_passages([texts[first[k]] for k in part]), dtype=np.float32
        )
        if vecs.shape != (len(part), dim):
            raise IndexBuildError(
                f"embedder {embedder.name!r} returned shape {vecs.shape} for "
                f"{len(part)} texts (dim {dim}), e.g. id {ids[first[part[0]]]!r}"
            )
        return normalise(vecs)

    def run(vc: VectorCache | None) -> None:
        found = vc.get(list(first)) if vc is not None else {}
        todo = longest_first(first, found, texts)
        stats.update(cached=len(found), embedded=0, done_elsewhere=0)
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
        with bar:
            # a round is one block per shard, encoded side by side (rag.shard), then committed
            for r in range(0, len(blocks), shards):
                with vc.lock() if vc is not None else nullcontext():
                    parts = blocks[r : r + shards]
                    if vc is not None:  # another run may have committed these while we waited
                        held = vc.get([k for p in parts for k in p])
                        found.update(held)
                        stats["done_elsewhere"] += len(held)
                        bar.update(len(held))
                        parts = [q for p in parts if (q := [k for k in p if k not in held])]
                    if not parts:
                        continue
                    with torch_threads(1) if len(parts) > 1 else nullcontext():
                        encoded = sharded_map(encode, parts, shards, progress=False)
                    for part, vecs in zip(parts, encoded, strict=True):
                        if vc is not None:
                            vc.put(part, vecs)
                        found.update(zip(part, vecs, strict=True))
                        stats["embedded"] += len(part)
                        bar.update(len(part))
        if stats["done_elsewhere"]:
            logger.info(
                "embed_texts[%s]: %d text(s) were embedded by another run meanwhile",
                embedder.name,
                stats["done_elsewhere"],
            )
        for i, k in enumerate(keys):
            out[i] = found[k]

    if cache:
        with VectorCache.open(embedder.fingerprint, dim, name=embedder.name) as vc:
            run(vc)
    else:
        run(None)
    return out
