"""Chunking a whole corpus, cached: content fingerprints, atomic JSONL persistence.

A chunk set is keyed by :func:`chunk_fingerprint` (settings, chunker and format versions,
tokenizer and library versions, and each parsed paper's content hash), so a re-run reuses the
chunks and anything that could change them builds new ones. Embedding caches key on the same
fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from rag.atomic import atomic_path
from rag.errors import ChunkError
from rag.paths import cache_dir
from rag.text.chunk import (
    CHUNKER_VERSION,
    FORMAT_VERSION,
    ChunkSettings,
    make_chunker,
    paper_text,
    require_settings,
)
from rag.text.tokenize import Tokenizer, default_tokenizer, tokenizer_id
from rag.types import Chunk, ParsedPaper

logger = logging.getLogger(__name__)


def parsed_sha(parsed: ParsedPaper) -> str:
    """Content hash of a parsed paper (id, pages, status, blocks; not its parse time)."""
    return parsed.content_sha1()


def chunk_fingerprint(
    parsed_papers: Iterable[ParsedPaper],
    settings: ChunkSettings,
    tokenizer: Tokenizer | None = None,
) -> str:
    """Fingerprint of a chunk set: settings, chunker and format versions, tokenizer, inputs.

    The inputs enter by content (:func:`parsed_sha`) and only when parsed ok (failed parses
    yield no chunks), so a new parser version that changes the blocks changes the fingerprint
    and one that does not keeps it. Embedding caches key on it; it equals the key
    :func:`chunk_corpus` caches under for the same arguments. ``index_hygiene`` is left out: it
    changes which chunks are indexed, not the chunks, and the index build keys on it instead
    (:func:`rag.index.build.index_corpus`).
    """
    settings = require_settings(settings, "chunk_fingerprint")
    key = {
        "chunker_version": CHUNKER_VERSION,
        "format_version": FORMAT_VERSION,
        "settings": settings.model_dump(mode="json", exclude={"index_hygiene"}),
        "tokenizer": tokenizer_id(tokenizer),
        "papers": sorted((p.paper_id, parsed_sha(p)) for p in parsed_papers if p.ok),
    }
    blob = json.dumps(key, sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:20]


def save_chunks(chunks: Sequence[Chunk], path: str | os.PathLike[str], meta: Mapping) -> Path:
    """Write chunks as JSONL (first line ``{"_meta": meta}``), atomically (temp file + rename)."""
    path = Path(path)
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"_meta": dict(meta)}, sort_keys=True, ensure_ascii=False) + "\n")
        for c in chunks:
            f.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
    return path


def load_chunks(path: str | os.PathLike[str]) -> tuple[list[Chunk], dict]:
    """Read chunks written by :func:`save_chunks`; returns ``(chunks, meta)``.

    Raises:
        ChunkError: if the file is missing or malformed (delete it to rebuild).
    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            head = json.loads(f.readline())
            meta = head["_meta"]
            chunks = [Chunk(**json.loads(line)) for line in f if line.strip()]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ChunkError(f"cannot read chunks from {path}: {e}; delete the file to rebuild") from e
    return chunks, meta


def chunks_path(fingerprint: str) -> Path:
    """Where the chunks of a fingerprint are cached."""
    return cache_dir("chunks") / f"{fingerprint}.jsonl"


def chunk_corpus(
    parsed_papers: Sequence[ParsedPaper],
    settings: ChunkSettings,
    *,
    tokenizer: Tokenizer | None = None,
    use_cache: bool = True,
) -> list[Chunk]:
    """Chunk every successfully parsed paper, in input order, cached by :func:`chunk_fingerprint`.

    Papers whose parse failed (``status != "ok"``) are skipped with a warning.
    """
    s = require_settings(settings, "chunk_corpus")
    ok = [p for p in parsed_papers if p.ok]
    for p in parsed_papers:
        if not p.ok:
            logger.warning("skipping %s: parse status %s (%s)", p.paper_id, p.status, p.error)
    fp = chunk_fingerprint(ok, s, tokenizer)
    path = chunks_path(fp)
    if use_cache and path.exists():
        chunks, _ = load_chunks(path)
        logger.info("loaded %d %s chunks from cache %s", len(chunks), s.strategy, fp)
        return chunks
    # The default tokenizer is loaded (seconds: it imports transformers) only on a cache miss.
    tok = tokenizer if tokenizer is not None else default_tokenizer()
    chunker = make_chunker(s, tok)
    chunks: list[Chunk] = []
    for p in tqdm(ok, desc=f"chunk[{s.strategy}]", unit="paper", disable=len(ok) < 5):
        pt = paper_text(
            p,
            include_references=s.include_references,
            include_captions=s.include_captions,
            include_footnotes=s.include_footnotes,
        )
        chunks.extend(chunker.chunk(pt, p.paper_id))
    if use_cache:
        save_chunk_set(chunks, fp, s, n_papers=len(ok), tokenizer=tok)
    return chunks


def save_chunk_set(
    chunks: Sequence[Chunk],
    fingerprint: str,
    settings: ChunkSettings,
    *,
    n_papers: int,
    tokenizer: Tokenizer | None = None,
) -> Path:
    """Store a corpus chunk set under ``fingerprint`` with the metadata :func:`chunk_corpus`
    writes, so a chunk set made elsewhere (the Ray pipeline) is the same file."""
    meta = {
        "fingerprint": fingerprint,
        "chunker_version": CHUNKER_VERSION,
        "format_version": FORMAT_VERSION,
        "settings": settings.model_dump(mode="json", exclude={"index_hygiene"}),
        "tokenizer": tokenizer_id(tokenizer),
        "n_papers": n_papers,
        "n_chunks": len(chunks),
    }
    return save_chunks(chunks, chunks_path(fingerprint), meta)
