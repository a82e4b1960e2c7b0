"""The served index: the profile's cached build plus the papers ingested while serving.

The base is :func:`rag.index.build.index_corpus` over the profile's papers, from the same cache the
notebooks use (nothing cached is rebuilt). A paper ingested while serving becomes a *segment*
(``segments/<id>/chunks.jsonl`` + ``vectors.npy``) beside a ``manifest.json`` that records the
served corpus. Adding a paper is atomic on disk with respect to a crash:

1. the segment is written into ``segments/.tmp-*`` and renamed into place (``os.rename``);
2. the new in-memory snapshot (dense + BM25 over all chunks) is built;
3. ``manifest.json`` is replaced atomically (write to a temp file, fsync, ``os.replace``);
4. the snapshot is swapped in (one reference assignment; readers keep the one they hold).

Only papers listed in the manifest are served; at start, segments the manifest does not list
(a crash between 1 and 3) and temp folders are deleted. So a crash leaves a paper wholly in
(manifest written) or wholly out, and adding an id that is already served adds nothing.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag.atomic import fsync_dir, write_atomic
from rag.errors import IndexBuildError
from rag.index.bm25 import BM25Index
from rag.index.build import Indexed
from rag.index.dense import DenseIndex
from rag.index.embed_cache import embed_texts
from rag.index.store import ChunkStore
from rag.ir import EmbedderLike
from rag.text.chunk import ChunkSettings
from rag.text.chunk_cache import chunk_corpus
from rag.text.hygiene import split_body
from rag.types import Chunk, ParsedPaper

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SEGMENTS = "segments"


@dataclass(frozen=True, slots=True)
class ServedPaper:
    """One paper of the served corpus (a line of ``manifest.json``)."""

    paper_id: str
    title: str
    source: str  # "profile" (the cached base build), "arxiv" or "upload"
    n_chunks: int
    sha256: str | None = None
    added_at: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the served index; requests hold one for their whole life."""

    store: ChunkStore
    dense: DenseIndex
    bm25: BM25Index
    papers: tuple[ServedPaper, ...]
    titles: dict[str, str] = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return len(self.store)

    def paper_ids(self) -> set[str]:
        return {p.paper_id for p in self.papers}


def segment_name(paper_id: str) -> str:
    """A folder name for a paper id (old-style ids contain ``/``)."""
    return re.sub(r"[^A-Za-z0-9.\-]", "_", paper_id)


def read_manifest(root: Path) -> list[ServedPaper]:
    """The served corpus recorded in ``root/manifest.json`` ([] when there is none yet)."""
    p = root / MANIFEST
    if not p.exists():
        return []
    data = json.loads(p.read_text(encoding="utf-8"))
    if data.get("format_version") != FORMAT_VERSION:
        raise IndexBuildError(
            f"served manifest has format {data.get('format_version')!r}, expected "
            f"{FORMAT_VERSION}; delete the served index folder to rebuild it"
        )
    return [ServedPaper(**p) for p in data["papers"]]


class ServedIndex:
    """The base build plus ingested segments, with atomic incremental adds (module docstring)."""

    def __init__(
        self,
        root: Path,
        base: Indexed,
        titles: dict[str, str],
        chunking: ChunkSettings,
        *,
        base_sources: dict[str, str] | None = None,
    ) -> None:
        if base.embedder is None or base.dense is None:
            raise IndexBuildError("the served index needs a dense index and its embedder")
        self.root, self.base, self.chunking = root, base, chunking
        self.embedder: EmbedderLike = base.embedder
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        (root / SEGMENTS).mkdir(exist_ok=True)
        counts: dict[str, int] = {}
        for c in base.chunks:
            counts[c.paper_id] = counts.get(c.paper_id, 0) + 1
        base_papers = [
            ServedPaper(pid, titles.get(pid, ""), (base_sources or {}).get(pid, "profile"), n)
            for pid, n in counts.items()
        ]
        recorded = read_manifest(root)
        base_ids = set(counts)
        added = [p for p in recorded if p.source != "profile" and p.paper_id not in base_ids]
        self._clean(added)
        segments = {p.paper_id: self._load_segment(p.paper_id) for p in added}
        all_titles = {**titles, **{p.paper_id: p.title for p in added}}
        self.snapshot = self._build(base_papers + added, segments, all_titles)
        self._segments = segments
        self._write_manifest(self.snapshot.papers)

    # -- disk ----------------------------------------------------------------------------------

    def _clean(self, keep: Sequence[ServedPaper]) -> None:
        """Delete temp folders and segments the manifest does not list (a crash before commit)."""
        wanted = {segment_name(p.paper_id) for p in keep}
        for d in (self.root / SEGMENTS).iterdir():
            if d.name not in wanted:
                log.warning("removing uncommitted segment %s (interrupted ingest)", d.name)
                shutil.rmtree(d, ignore_errors=True)

    def _load_segment(self, paper_id: str) -> tuple[list[Chunk], np.ndarray]:
        d = self.root / SEGMENTS / segment_name(paper_id)
        chunks = [
            Chunk(**json.loads(line))
            for line in (d / "chunks.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        vectors = np.load(d / "vectors.npy")
        if len(chunks) != vectors.shape[0]:
            raise IndexBuildError(f"segment {d.name}: {len(chunks)} chunks, {len(vectors)} vectors")
        return chunks, vectors

    def _write_segment(self, paper_id: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        seg = self.root / SEGMENTS
        final = seg / segment_name(paper_id)
        tmp = seg / f".tmp-{segment_name(paper_id)}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        with (tmp / "chunks.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(c.to_dict()) + "\n" for c in chunks)
            f.flush()
            os.fsync(f.fileno())
        with (tmp / "vectors.npy").open("wb") as f:
            np.save(f, vectors)
            f.flush()
            os.fsync(f.fileno())
        if final.exists():  # left by an earlier crash before its manifest was written
            shutil.rmtree(final)
        os.rename(tmp, final)
        fsync_dir(seg)

    def _write_manifest(self, papers: Sequence[ServedPaper]) -> None:
        body = {
            "format_version": FORMAT_VERSION,
            "embedder": getattr(self.embedder, "fingerprint", getattr(self.embedder, "name", "")),
            "chunking": self.chunking.model_dump(),
            "base_fingerprint": self.base.chunk_fingerprint,
            "n_chunks": sum(p.n_chunks for p in papers),
            "papers": [asdict(p) for p in papers],
        }
        write_atomic(self.root / MANIFEST, json.dumps(body, indent=1), fsync=True)

    # -- memory --------------------------------------------------------------------------------

    def _build(
        self,
        papers: Sequence[ServedPaper],
        segments: dict[str, tuple[list[Chunk], np.ndarray]],
        titles: dict[str, str],
    ) -> Snapshot:
        base = self.base
        if not segments:
            return Snapshot(ChunkStore(base.chunks), base.dense, base.bm25, tuple(papers), titles)
        chunks = list(base.chunks)
        vectors = [base.dense.vectors]
        for pid in [p.paper_id for p in papers if p.paper_id in segments]:
            chunks.extend(segments[pid][0])
            vectors.append(segments[pid][1])
        ids = [c.chunk_id for c in chunks]
        dense = DenseIndex(
            ids,
            np.concatenate(vectors),
            **base.dense.settings.model_dump(),
            embedder_fingerprint=base.dense.embedder_fingerprint,
        )
        bm25 = BM25Index(ids, [c.text for c in chunks], **_bm25_params(base.bm25))
        return Snapshot(ChunkStore(chunks), dense, bm25, tuple(papers), titles)

    def add_paper(
        self,
        parsed: ParsedPaper,
        title: str,
        source: str,
        *,
        sha256: str | None = None,
        progress: Callable[[str], None] = lambda stage: None,
    ) -> int:
        """Chunk, embed and add one parsed paper; returns the chunks added (0: already served).

        Raises:
            IndexBuildError: the paper yields no chunk (e.g. an image-only PDF).
        """
        with self._lock:
            if parsed.paper_id in self.snapshot.paper_ids():
                return 0
            progress("chunking")
            # The same hygiene as the base build, so a served paper's TOC stays out too.
            chunks, _ = split_body(
                chunk_corpus([parsed], self.chunking), enabled=self.chunking.index_hygiene
            )
            if not chunks:
                raise IndexBuildError(
                    f"{parsed.paper_id}: no text to index (parse: {parsed.status})"
                )
            progress("embedding")
            ids = [c.chunk_id for c in chunks]
            vectors = embed_texts(ids, [c.text for c in chunks], self.embedder, show_progress=False)
            progress("committing")
            self._write_segment(parsed.paper_id, chunks, np.asarray(vectors, dtype=np.float32))
            paper = ServedPaper(
                parsed.paper_id,
                title,
                source,
                len(chunks),
                sha256,
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            segments = {**self._segments, parsed.paper_id: (chunks, vectors)}
            papers = (*self.snapshot.papers, paper)
            snap = self._build(papers, segments, {**self.snapshot.titles, paper.paper_id: title})
            self._write_manifest(papers)  # the commit point
            self._segments, self.snapshot = segments, snap
            return len(chunks)


def _bm25_params(index: BM25Index) -> dict[str, Any]:
    s = index.settings
    return {"k1": s.k1, "b": s.b, "epsilon": s.epsilon, "tokenizer": s.tokenizer}
