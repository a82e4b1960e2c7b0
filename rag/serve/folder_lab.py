"""The lab over a folder of PDFs: the folder's index served through the same engine
(:class:`rag.serve.engine.Engine`) and desk.

:func:`folder_index` builds or reuses the folder's index (:func:`rag.index.folder.build_folder`,
the one pipeline) as a :class:`~rag.serve.index.ServedIndex`, and
:func:`rag.serve.engine.load_lab` hangs its :class:`FolderCorpus` on the lab, from which the
paper desk reads what a pinned corpus reads from its manifest: titles, page counts, the parsed
papers (summaries) and the citation graph, resolved between the folder's papers by the corpus's
own title resolution (:class:`rag.papers.resolve.TitleMatcher`) plus any arXiv id or DOI a
reference writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rag.errors import ConfigError
from rag.serve.config import LabSettings, ServeSettings

if TYPE_CHECKING:  # the folder route's modules load when a folder is served, not for every desk
    from rag.index.folder import FolderBuild, FolderPaper

log = logging.getLogger(__name__)

CITATIONS = "folder-citations.jsonl"


class FolderCorpus:
    """What the desk knows about a folder's papers (ids, files, metadata, parses, citations)."""

    def __init__(self, build: FolderBuild) -> None:
        self.build = build
        self.papers: dict[str, FolderPaper] = {p.paper_id: p for p in build.papers}
        self._rows: list | None = None
        self._lock = threading.Lock()

    def file(self, paper_id: str) -> str:
        """The file a paper is read from ('' for an id the folder does not hold)."""
        p = self.papers.get(paper_id)
        return p.file if p else ""

    def by_file(self, name: str) -> str:
        """The id of the paper a file name (relative to the folder, or its last part) names."""
        for p in self.papers.values():
            if name in p.files or name in {f.rsplit("/", 1)[-1] for f in p.files}:
                return p.paper_id
        return ""

    def meta(self) -> dict[str, Any]:
        """``{id: record}`` with the fields the desk reads from a manifest paper."""
        return {
            pid: SimpleNamespace(arxiv_id=pid, title=p.title, primary_category="",
                                 version=p.arxiv_version, pages=p.pages)
            for pid, p in self.papers.items()
        }  # fmt: skip

    def parsed(self, paper_id: str) -> Any:
        """The cached parse of one paper (the pipeline parsed it; this reads the cache)."""
        from rag.corpus.parse import ParseSettings, load_parsed

        p = self.papers[paper_id]
        link = self.build.links / f"{paper_id.replace('/', '_')}.pdf"
        return load_parsed(link, p.sha256, ParseSettings())

    def _key(self) -> str:
        body = sorted((p.paper_id, p.sha256, p.title) for p in self.papers.values())
        return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:20]

    def citation_rows(self) -> list:
        """The folder's citation graph, resolved once per set of papers and kept on disk."""
        from rag.papers.graph import paper_citations, read_citations, write_citations
        from rag.papers.resolve import TitleMatcher

        with self._lock:
            if self._rows is not None:
                return self._rows
            path = self.build.root / CITATIONS
            stamp = path.with_suffix(".key")
            if path.exists() and stamp.exists() and stamp.read_text() == self._key():
                self._rows = read_citations(path)
                return self._rows
            titles = {pid: p.title for pid, p in self.papers.items() if p.title}
            rows: list = []
            if titles:
                matcher = TitleMatcher(titles, date_slack_months=None)
                for pid in sorted(self.papers):
                    parsed = self.parsed(pid)
                    if parsed.ok:
                        rows.extend(paper_citations(parsed, matcher))
            write_citations(rows, path)
            stamp.write_text(self._key())
            self._rows = rows
            return rows


def folder_index(settings: LabSettings, serve: ServeSettings) -> tuple[Any, FolderCorpus]:
    """Build or reuse the index of ``settings.pdfs``: the served index and the folder's papers
    (:func:`rag.serve.engine.load_lab` loads the lab over them).

    Raises:
        ConfigError: the folder is missing, holds no PDF, or no PDF of it could be indexed (the
            message names each file and why).
    """
    from rag.index.folder import build_folder
    from rag.paths import resolve
    from rag.serve.index import ServedIndex

    chunking = settings.chunking()
    build = build_folder(
        resolve(settings.pdfs), embedder=settings.embedder, chunking=chunking,
        root=resolve(serve.index_dir) if serve.index_dir else None,
    )  # fmt: skip
    if build.indexed is None:
        rows = "; ".join(f"{r['file']} ({r['stage']}: {r['reason']})" for r in build.summary["bad"])
        raise ConfigError(f"--pdfs {settings.pdfs}: no PDF could be indexed: {rows}")
    served = ServedIndex(build.root / "served", build.indexed, build.titles, chunking)
    return served, FolderCorpus(build)


def add_files(lab: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each row with an ``arxiv_id`` of a folder's paper its ``file`` (in place)."""
    folder = getattr(lab, "folder", None)
    if folder is not None:
        for r in rows:
            r["file"] = folder.file(r.get("arxiv_id", ""))
    return rows
