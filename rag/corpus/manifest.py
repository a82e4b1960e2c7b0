"""The pinned corpus: ``data/manifest.jsonl``, one arXiv paper per line.

The manifest *is* the corpus. Each line pins a paper by arXiv id **and version** (so the versioned
PDF URL always names the same submission) plus the sha256, byte size and page count observed when
the pin was made; anyone with internet rebuilds the identical set from it. A query against arXiv
(see :func:`rag.corpus.arxiv_client.bootstrap_manifest`) drifts daily — new papers, new versions —
so a bootstrapped list only becomes a corpus once it is written to a manifest file and committed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rag.atomic import write_atomic
from rag.errors import ManifestError
from rag.jsonl import read_records
from rag.paths import display, project_root, resolve

log = logging.getLogger(__name__)

#: New-style (``2401.01234``) and old-style (``cs/0112017``) arXiv identifiers, without version.
ARXIV_ID_RE = r"^(\d{4}\.\d{4,5}|[a-z-]+(\.[A-Z]{2})?/\d{7})$"
#: Field order of a manifest line; written in this order so manifests diff cleanly.
FIELDS = ("arxiv_id", "version", "title", "primary_category", "stamp_date", "pages", "bytes")


class Paper(BaseModel):
    """One pinned paper of the corpus."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arxiv_id: str = Field(pattern=ARXIV_ID_RE, description="arXiv id without version")
    version: str = Field(pattern=r"^v[1-9]\d*$", description="pinned version, e.g. 'v2'")
    title: str = Field(min_length=1, description="paper title as listed by arXiv")
    primary_category: str = Field(
        pattern=r"^[a-z-]+(\.[A-Za-z-]+)?$", description="arXiv primary category"
    )
    stamp_date: str | None = Field(None, description="date in arXiv's page-1 margin stamp")
    pages: int | None = Field(None, ge=1, description="page count observed when pinned")
    bytes: int | None = Field(None, ge=1, description="PDF size in bytes observed when pinned")
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of the PDF observed when pinned; None only in an unobserved bootstrap",
    )

    @property
    def versioned_id(self) -> str:
        """``<id><version>``, the form the versioned PDF URL uses."""
        return f"{self.arxiv_id}{self.version}"

    @property
    def filename(self) -> str:
        """The PDF's file name in caches and mirrors (old-style ids have ``/`` → ``_``)."""
        return self.arxiv_id.replace("/", "_") + ".pdf"


def default_manifest_path() -> Path:
    """The project's pinned manifest, ``data/manifest.jsonl``."""
    return project_root() / "data" / "manifest.jsonl"


def parse_manifest_lines(lines: Iterable[str], source: str = "<manifest>") -> list[Paper]:
    """Validate manifest lines into papers; blank lines and ``#`` comments are skipped.

    Raises:
        ManifestError: naming ``source:line`` for bad JSON, a bad field or a duplicate id.
    """
    return read_records(
        source, Paper, ManifestError, id_field="arxiv_id", lines=list(lines), source=source
    )


def load_manifest(path: str | os.PathLike[str] | None = None) -> list[Paper]:
    """Load and validate a manifest (default ``data/manifest.jsonl``), in file order.

    A relative ``path`` is the project's (:func:`rag.paths.resolve`), wherever the caller stands: a
    notebook kernel started in ``notebooks/`` reads the same manifest as the CLI.

    Raises:
        ManifestError: the file is missing (with how to get one) or a line is malformed.
    """
    p = resolve(path) if path is not None else default_manifest_path()
    if not p.is_file():
        raise ManifestError(
            f"manifest not found: {display(p)}. Restore data/manifest.jsonl from git "
            "(`git checkout -- data/manifest.jsonl`), pass --manifest <file>, or build a new one "
            "with bootstrap mode "
            "(`python -m rag.corpus.ingest --bootstrap 'cat:cs.IR' --out <file>`)"
        )
    with p.open(encoding="utf-8") as f:
        papers = parse_manifest_lines(f, source=display(p))
    if not papers:
        raise ManifestError(f"manifest {display(p)} holds no papers; add one JSON line per paper")
    log.info("manifest %s: %d papers", display(p), len(papers))
    return papers


def manifest_line(paper: Paper) -> str:
    """One manifest line: fixed field order, sha256 last, no trailing spaces."""
    row = {k: getattr(paper, k) for k in FIELDS}
    row["sha256"] = paper.sha256
    return json.dumps(row, ensure_ascii=False)


def write_manifest(papers: Iterable[Paper], path: str | os.PathLike[str]) -> Path:
    """Write papers as a manifest, atomically, byte-identical for the same papers."""
    return write_atomic(path, "".join(manifest_line(x) + "\n" for x in papers))


def observe(paper: Paper, pdf_path: Path, sha256: str) -> Paper:
    """The paper with the size, page count and sha256 of a downloaded PDF filled in."""
    import pymupdf

    with pymupdf.open(pdf_path) as doc:
        pages = doc.page_count
    return paper.model_copy(
        update={"sha256": sha256, "bytes": pdf_path.stat().st_size, "pages": pages}
    )
