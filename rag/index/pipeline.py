"""A folder of PDFs → parse → chunk → embed → index, serially or as one Ray Data job.

The folder follows the mirror convention (``<arxiv_id>.pdf``, as ``$RAG_PDF_MIRROR``): every PDF
is a paper whose id is its file name's stem, and its parse is cached under the file's sha256
(the same key ingest uses for a verified paper). Both engines run the project's own stages and
fill the same content-addressed caches:

* ``serial`` is the serial path itself: :func:`rag.corpus.parse.load_parsed` per PDF,
  :func:`rag.text.chunk_cache.chunk_corpus`, then :func:`rag.index.build.index_corpus` (hygiene,
  cached embeddings, dense and BM25 indexes).
* ``ray`` streams the PDFs through Ray Data stages (:mod:`rag.index.ray_pipeline`) that call the
  same functions per paper, then ends in the same :func:`index_corpus` call, which finds every
  chunk and vector in the cache.

So either engine resumes the other's work, and a killed job keeps every parse, chunk set and
committed vector it finished. A PDF that fails at any stage is one row of the summary's
``failed`` list (paper id, stage, status, error) and is left out of the index; it never fails the
job. ``rag pipeline FOLDER [--engine ray --address HOST:PORT]`` runs it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.errors import ConfigError
from rag.index.ray_embed import EmbedderSpec
from rag.paths import display
from rag.scrub import scrub

if TYPE_CHECKING:
    from rag.corpus.parse import ParseSettings
    from rag.index.build import Indexed
    from rag.index.embed import Embedder
    from rag.text.chunk import ChunkSettings

logger = logging.getLogger(__name__)

ENGINES = ("serial", "ray")
#: ``package.module:factory``: an importable zero-argument embedder factory (a class, usually)
FACTORY_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
#: A mirror file's stem: an arXiv id (old-style ``/`` written ``_``), optionally versioned.
MIRROR_NAME_RE = re.compile(r"(\d{4}\.\d{4,5}|[a-z-]+(\.[A-Z]{2})?_\d{7})(v\d+)?")
#: A paper id :mod:`rag.index.folder` derives from a PDF's content (``pdf-`` + 12 hex digits).
CONTENT_ID_RE = re.compile(r"pdf-[0-9a-f]{12}")


@dataclass
class PipelineResult:
    """The index built from a folder (None when no PDF got through) and the job's summary."""

    indexed: Indexed | None
    summary: dict[str, Any] = field(default_factory=dict)


def pdf_files(folder: str | os.PathLike[str], limit: int = 0) -> list[Path]:
    """The ``*.pdf`` files of ``folder`` sorted by paper id (file stem); the first ``limit``.

    Raises:
        ConfigError: the folder does not exist or holds no PDF.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"pipeline: {display(root)} is not a folder; pass a folder of <id>.pdf")
    files = sorted((p for p in root.iterdir() if p.suffix.lower() == ".pdf"), key=lambda p: p.stem)
    if not files:
        raise ConfigError(f"pipeline: {display(root)} holds no .pdf file")
    files = files[:limit] if limit > 0 else files
    named = [p for p in files if not MIRROR_NAME_RE.fullmatch(p.stem)]
    if other := [p for p in named if not CONTENT_ID_RE.fullmatch(p.stem)]:
        logger.warning(
            "pipeline: %d PDF(s) not named <arxiv_id>.pdf are indexed under their file name as "
            "the paper id: %s; rename a file to its arXiv id, or serve the folder with "
            "`rag ask --pdfs DIR`, which names papers by their content",
            len(other), "; ".join(f"{p.name!r} as {p.stem!r}" for p in other),
        )  # fmt: skip
    return files


def embedder_spec(name: EmbedderSpec) -> EmbedderSpec:
    """``module:factory`` imported to its factory (workers import it by reference); any other
    name is left for :func:`rag.index.embed.load_embedder`, a callable is kept.

    Raises:
        ConfigError: a ``module:factory`` that does not import.
    """
    if callable(name) or not FACTORY_RE.fullmatch(name):
        return name
    module, attr = name.split(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            f"pipeline: embedder {name!r} does not import ({e}); name a registered embedder or "
            "an importable module:factory"
        ) from e


def failed_row(paper_id: str, stage: str, status: str, error: str | None) -> dict[str, str]:
    """One failed PDF as the summary lists it."""
    return {"paper_id": paper_id, "stage": stage, "status": status, "error": error or ""}


def _rate(n: int | float, seconds: float) -> float | None:
    return round(n / seconds, 3) if seconds > 0 else None


def stage_rows(counts: Mapping[str, int], seconds: Mapping[str, float]) -> dict[str, Any]:
    """``{stage: {items, seconds, per_s}}`` for parse (PDFs), chunk (chunks) and embed (the
    kept passages that went through the stage, from the model or the cache)."""
    return {
        s: {
            "items": counts[s],
            "seconds": round(seconds[s], 3),
            "per_s": _rate(counts[s], seconds[s]),
        }
        for s in ("parse", "chunk", "embed")
    }


def _serial(
    files: list[Path],
    chunking: ChunkSettings,
    parse: ParseSettings,
    emb: Embedder,
    show_progress: bool,
    verify: bool = False,
) -> tuple[Indexed | None, dict[str, Any]]:
    from rag.corpus.parse import load_parsed
    from rag.filehash import sha256_file
    from rag.index.build import index_corpus
    from rag.text.chunk_cache import chunk_corpus
    from rag.types import ParsedPaper

    def one(path: Path) -> ParsedPaper:
        try:
            sha = sha256_file(path)
        except OSError as e:  # unreadable file: load_parsed itself never raises for a bad PDF
            return ParsedPaper(paper_id=path.stem, n_pages=0, status="error", error=str(e))
        return load_parsed(path, sha, parse, verify=verify)

    t0 = time.perf_counter()
    parsed = [one(p) for p in files]
    t_parse = time.perf_counter() - t0
    failed = [failed_row(p.paper_id, "parse", p.status, p.error) for p in parsed if not p.ok]
    ok = [p for p in parsed if p.ok]
    if not ok:
        return None, {"failed": failed, "seconds": {"parse": t_parse, "chunk": 0, "embed": 0}}
    t0 = time.perf_counter()
    chunks = chunk_corpus(ok, chunking)
    t_chunk = time.perf_counter() - t0
    ix = index_corpus(ok, chunking, embedder=emb, show_progress=show_progress)
    return ix, {
        "failed": failed,
        "papers_indexed": len(ok),
        "chunks": len(chunks),
        "seconds": {"parse": t_parse, "chunk": t_chunk, "embed": ix.stats.get("embed_s", 0.0)},
    }


def run_pipeline(
    folder: str | os.PathLike[str],
    *,
    engine: str = "serial",
    address: str | None = None,
    chunking: ChunkSettings | None = None,
    parse: ParseSettings | None = None,
    embedder: EmbedderSpec = "minilm",
    limit: int = 0,
    summary_path: str | os.PathLike[str] | None = None,
    show_progress: bool = False,
    verify: bool = False,
) -> PipelineResult:
    """Parse, chunk, embed and index every PDF of ``folder`` with ``engine``.

    Args:
        folder: a folder of ``<paper_id>.pdf`` (the mirror convention).
        engine: ``serial`` (this process) or ``ray`` (Ray Data stages; local Ray or ``address``).
        address: the Ray cluster to join, e.g. ``127.0.0.1:6379`` (``--engine ray`` only).
        chunking: the chunk settings (None: the defaults, the fixed chunker).
        parse: :class:`~rag.corpus.parse.ParseSettings` (default settings when None).
        embedder: a name for :func:`~rag.index.embed.load_embedder`, ``module:factory`` or a
            zero-argument factory (the Ray workers build their own from it).
        limit: the first N PDFs by id (0: all).
        summary_path: where to write the summary as JSON (optional).
        verify: (serial) hash each PDF right before and after parsing it, so a file rewritten
            while it is parsed is a failed row, never a cached parse under the wrong sha256.

    Returns:
        The index of the PDFs that got through every stage, and the summary: counts, ``failed``
        rows, ``stages`` (items, seconds and items per second for parse, chunk and embed; for the
        Ray engine seconds are summed over workers), the chunk fingerprint, wall seconds.
    """
    from rag.corpus.parse import ParseSettings
    from rag.index.build import index_corpus
    from rag.index.ray_embed import _make
    from rag.text.chunk import require_settings

    if engine not in ENGINES:
        raise ConfigError(f"pipeline: engine must be one of {ENGINES}, got {engine!r}")
    if address and engine != "ray":
        raise ConfigError("pipeline: --address joins a Ray cluster: use it with --engine ray")
    t_start = time.perf_counter()
    settings = require_settings(chunking, "run_pipeline")
    files = pdf_files(folder, limit)
    parse = parse or ParseSettings()
    spec = embedder_spec(embedder)
    emb = _make(spec)
    extra: dict[str, Any] = {}
    if engine == "serial":
        ix, run = _serial(files, settings, parse, emb, show_progress, verify)
        embedded = len(ix.chunks) if ix and "embed_s" in ix.stats else 0
    else:
        from rag.index.ray_pipeline import ray_stages

        ok, run = ray_stages(
            files, settings, parse, spec, emb, address=address, show_progress=show_progress
        )
        extra["ray"] = {**run.pop("ray"), "embedded": run["embedded"], "cached": run["cached"]}
        t0 = time.perf_counter()
        ix = index_corpus(ok, settings, embedder=emb, show_progress=False) if ok else None
        extra["index_s"] = round(time.perf_counter() - t0, 3)
        embedded = run.pop("passages")
    kept = len(ix.chunks) if ix else 0
    counts = {"parse": len(files), "chunk": run.get("chunks", 0), "embed": embedded}
    summary = {
        "engine": engine,
        "pdfs": len(files),
        "papers_indexed": run.get("papers_indexed", 0),
        "failed": [{**r, "error": scrub(r["error"])[0]} for r in run["failed"]],
        "chunks": run.get("chunks", 0),
        "chunks_indexed": kept,
        "chunk_fingerprint": ix.chunk_fingerprint if ix else None,
        "embedder": emb.fingerprint,
        "stages": stage_rows(counts, run["seconds"]),
        "wall_s": round(time.perf_counter() - t_start, 3),
        **extra,
    }
    if summary_path:
        dst = Path(summary_path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    logger.info(
        "pipeline[%s]: %d PDFs, %d indexed, %d failed, %d chunks in %.1fs",
        engine,
        len(files),
        summary["papers_indexed"],
        len(summary["failed"]),
        kept,
        summary["wall_s"],
    )
    return PipelineResult(ix, summary)
