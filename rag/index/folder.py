"""Any folder of PDFs as a corpus: scanned, identified by content, indexed through the pipeline.

A researcher's folder (Zotero storage, downloads, a lab drive) holds files under any names. Each
run of :func:`build_folder`:

1. **Scans** the folder (sub-folders too, symbolic links followed once: a loop is named, not
   walked forever) for ``*.pdf`` files; a zero-byte file, a dangling or looping link and an
   unreadable file are rows of the summary's ``bad`` list (file, stage, reason).
2. **Identifies** every file by content: its sha256, and its metadata read from the PDF
   (:mod:`rag.corpus.pdf_meta`). The paper id is the arXiv id of the margin stamp when the PDF
   carries one, else ``pdf-`` and the first 12 hex digits of the sha256, so renaming or moving a
   file keeps its id, the same file under two names is one paper, and a changed file is a new
   version (the old one leaves the index). A non-PDF named ``.pdf`` and an encrypted PDF are
   ``bad`` rows here. Metadata of a file whose sha256 the last run saw is not read again.
3. **Indexes** the papers through :func:`rag.index.pipeline.run_pipeline`, the one pipeline, over a
   folder of links named ``<paper id>.pdf`` (the mirror convention it reads). Parses are cached
   by sha256 and vectors by text, so a folder that gained one paper parses, chunks and embeds only
   that paper and rebuilds the index from cached vectors; a file the parser refuses (image-only,
   too many pages) or that changed while it was parsed is a ``bad`` row and the rest is indexed.
4. **Records** the folder manifest (``folder-manifest.jsonl``: id, file names, sha256, bytes,
   pages, extracted metadata) and the run's summary (``folder-summary.json``, with what was
   added, removed and changed since the last run) beside the index, in
   ``cache_dir("folders", ...)`` unless a folder is named.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag import paths
from rag.atomic import write_atomic
from rag.corpus.lock import file_lock
from rag.corpus.pdf_meta import META_VERSION, PdfMeta, read_meta
from rag.errors import ConfigError
from rag.filehash import sha256_file
from rag.paths import display

if TYPE_CHECKING:
    from rag.text.chunk import ChunkSettings

logger = logging.getLogger(__name__)

FOLDER_FORMAT = 1
MANIFEST = "folder-manifest.jsonl"
SUMMARY = "folder-summary.json"
LINKS = "pdfs"


@dataclass
class FolderPaper:
    """One paper of a folder (a line of ``folder-manifest.jsonl``)."""

    paper_id: str
    files: list[str]
    sha256: str
    bytes: int
    pages: int
    title: str = ""
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    arxiv_id: str = ""
    arxiv_version: str = ""
    arxiv_category: str = ""
    stamp_date: str = ""
    doi: str = ""
    title_source: str = ""
    meta_version: int = 0  # rag.corpus.pdf_meta.META_VERSION that read the metadata

    @property
    def file(self) -> str:
        """The file the paper is served from (the first name, sorted)."""
        return self.files[0]


@dataclass
class FolderBuild:
    """The result of :func:`build_folder`: the index (None when no paper got through), the
    folder's papers that are indexed, the run's summary and where it is all kept."""

    indexed: Any
    papers: list[FolderPaper]
    summary: dict[str, Any]
    root: Path
    links: Path

    @property
    def titles(self) -> dict[str, str]:
        return {p.paper_id: p.title for p in self.papers}


def bad_row(file: str, stage: str, reason: str) -> dict[str, str]:
    """One file that is not indexed, as the summary lists it."""
    return {"file": file, "stage": stage, "reason": reason}


def folder_root(
    folder: str | os.PathLike[str],
    embedder: Any = "minilm",
    chunking: ChunkSettings | None = None,
) -> Path:
    """Where a folder's index lives: a cache folder named after it and keyed by its real path and
    what shapes the index (embedder, every chunk setting)."""
    from rag.text.chunk import require_settings

    chunks = require_settings(chunking, "folder_root").model_dump(mode="json")
    emb = embedder if isinstance(embedder, str) else repr(embedder)
    key = {"embedder": emb, "chunking": chunks}
    real = Path(folder).resolve()
    h = hashlib.sha256(json.dumps([str(real), key], sort_keys=True).encode()).hexdigest()[:12]
    slug = "".join(c if c.isalnum() else "-" for c in real.name)[:32] or "folder"
    return paths.cache_dir("folders", f"{slug}-{h}")


def scan(folder: str | os.PathLike[str]) -> tuple[list[Path], list[dict[str, str]]]:
    """The ``*.pdf`` files under ``folder`` (links followed, each real folder walked once) and the
    rows of those that cannot be read.

    Raises:
        ConfigError: ``folder`` is not a folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--pdfs {display(root)} is not a folder; name a folder of PDFs")
    files: list[Path] = []
    bad: list[dict[str, str]] = []
    seen_dirs: set[str] = set()

    def rel(p: Path) -> str:
        return str(p.relative_to(root))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen_dirs:
            bad.append(bad_row(rel(Path(dirpath)), "scan", "symlink loop: folder already walked"))
            dirnames[:] = []
            continue
        seen_dirs.add(real)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.lower().endswith(".pdf") or name.startswith("."):
                continue
            p = Path(dirpath) / name
            try:
                st = p.stat()
            except OSError as e:
                why = (
                    "symlink loop"
                    if e.errno == errno.ELOOP
                    else "dangling link"
                    if p.is_symlink()
                    else ""
                )
                bad.append(bad_row(rel(p), "scan", f"{why or 'unreadable'}: {e.strerror}"))
                continue
            if st.st_size == 0:
                bad.append(bad_row(rel(p), "scan", "zero-byte file"))
                continue
            files.append(p)
    return files, bad


def _read(path: Path) -> PdfMeta:
    import pymupdf

    try:
        return read_meta(path)
    except ValueError as e:
        if "password" in str(e):
            raise ValueError("encrypted PDF (password-protected); supply an unlocked copy") from e
        raise ValueError(f"not a readable PDF ({e})") from e
    except (pymupdf.FileDataError, RuntimeError) as e:
        raise ValueError(f"not a readable PDF ({e})") from e


def identify(
    root: Path, files: list[Path], known: Mapping[str, FolderPaper]
) -> tuple[list[FolderPaper], list[dict[str, str]]]:
    """One :class:`FolderPaper` per distinct content, and the rows of files that are not papers.

    ``known`` maps a sha256 to the paper last run's manifest recorded for it (its metadata is
    reused when the same :data:`~rag.corpus.pdf_meta.META_VERSION` read it). Two files with one
    content are one paper with two names; two contents with one arXiv id (two versions) keep the
    later version and name the other.
    """
    by_sha: dict[str, FolderPaper] = {}
    bad: list[dict[str, str]] = []
    for p in files:
        name = str(p.relative_to(root))
        try:
            sha = sha256_file(p)
            size = p.stat().st_size
        except OSError as e:
            bad.append(bad_row(name, "read", f"unreadable: {e}"))
            continue
        if sha in by_sha:
            by_sha[sha].files.append(name)
            continue
        if sha in known and known[sha].meta_version == META_VERSION:
            paper = FolderPaper(**{**asdict(known[sha]), "files": [name]})
        else:
            try:
                m = _read(p)
            except ValueError as e:
                bad.append(bad_row(name, "read", str(e)))
                continue
            pid = m.arxiv_id or f"pdf-{sha[:12]}"
            meta = {k: v for k, v in m.to_dict().items() if k != "pages"}
            paper = FolderPaper(pid, [name], sha, size, m.pages, **meta, meta_version=META_VERSION)
        by_sha[sha] = paper
    by_id: dict[str, FolderPaper] = {}
    for paper in sorted(by_sha.values(), key=lambda q: (q.paper_id, q.file)):
        paper.files.sort()
        held = by_id.get(paper.paper_id)
        if held is None:
            by_id[paper.paper_id] = paper
            continue
        newer, older = sorted((held, paper), key=lambda q: _version(q), reverse=True)
        by_id[paper.paper_id] = newer
        for f in older.files:
            bad.append(bad_row(f, "identify", f"another version of {newer.paper_id} "
                               f"({newer.file}) is indexed instead"))  # fmt: skip
    return sorted(by_id.values(), key=lambda q: q.paper_id), bad


def _version(p: FolderPaper) -> tuple[int, str]:
    return (int(p.arxiv_version[1:]) if p.arxiv_version[1:].isdigit() else 0, p.file)


def read_folder_manifest(root: Path) -> list[FolderPaper]:
    """The papers the last run recorded ([] when there is none or it is of another format)."""
    path = root / MANIFEST
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not rows or rows[0].get("format") != FOLDER_FORMAT:
        return []
    return [FolderPaper(**r["paper"]) for r in rows[1:]]


def write_folder_manifest(root: Path, folder: Path, papers: list[FolderPaper]) -> Path:
    """Write the manifest: a header line (format, folder) and one line per paper, atomically."""
    head = {"format": FOLDER_FORMAT, "folder": folder.name, "papers": len(papers)}
    lines = [json.dumps(head)] + [
        json.dumps({"paper": asdict(p)}, ensure_ascii=False, sort_keys=True) for p in papers
    ]
    write_atomic(root / MANIFEST, "\n".join(lines) + "\n")
    return root / MANIFEST


def _link(links: Path, papers: list[FolderPaper], folder: Path) -> dict[str, FolderPaper]:
    """Make ``links`` hold exactly one ``<id>.pdf`` link per paper; ``{link stem: paper}``."""
    tmp = links.with_name(f".{links.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    stems: dict[str, FolderPaper] = {}
    for p in papers:
        stem = p.paper_id.replace("/", "_")
        os.symlink((folder / p.file).resolve(), tmp / f"{stem}.pdf")
        stems[stem] = p
    old = links.with_name(f".{links.name}.old.{os.getpid()}")
    if links.exists():
        os.rename(links, old)
    os.rename(tmp, links)
    shutil.rmtree(old, ignore_errors=True)
    return stems


def _changes(before: list[FolderPaper], after: list[FolderPaper]) -> dict[str, list]:
    b = {p.paper_id: p for p in before}
    a = {p.paper_id: p for p in after}
    changed = [pid for pid in a if pid in b and a[pid].sha256 != b[pid].sha256]
    by_file = {f: p.paper_id for p in before for f in p.files}
    replaced = [
        {"file": f, "was": by_file[f], "now": p.paper_id}
        for p in after for f in p.files if by_file.get(f, p.paper_id) != p.paper_id
    ]  # fmt: skip
    return {
        "added": sorted(set(a) - set(b)),
        "removed": sorted(set(b) - set(a)),
        "changed": sorted(changed),
        "file_now_another_paper": replaced,
    }


def build_folder(
    folder: str | os.PathLike[str],
    *,
    embedder: Any = "minilm",
    chunking: ChunkSettings | None = None,
    root: str | os.PathLike[str] | None = None,
    engine: str = "serial",
    show_progress: bool | None = None,
) -> FolderBuild:
    """Scan, identify, index and record ``folder`` (module docstring).

    Args:
        folder: any folder of PDFs.
        embedder: as :func:`rag.index.pipeline.run_pipeline` takes it (default MiniLM).
        chunking: the chunk settings (None: the defaults, the fixed chunker).
        root: where the index, manifest and summary are kept (default: a cache folder).
        engine: ``serial`` or ``ray`` (the pipeline's engines).
        show_progress: progress bars per stage (None: on the folder's first run only).

    Raises:
        ConfigError: ``folder`` is not a folder, or holds no PDF at all.
    """
    t0 = time.perf_counter()
    folder = Path(folder)
    base = Path(root) if root else folder_root(folder, embedder, chunking)
    base.mkdir(parents=True, exist_ok=True)
    if show_progress is None:
        show_progress = not (base / MANIFEST).exists()
    with file_lock(base / ".folder.lock"):  # one build of a folder's index at a time
        return _build(folder, base, t0, embedder, chunking, engine, show_progress)


def _build(
    folder: Path,
    base: Path,
    t0: float,
    embedder: Any,
    chunking: ChunkSettings | None,
    engine: str,
    show_progress: bool,
) -> FolderBuild:
    from rag.index.pipeline import run_pipeline

    files, bad = scan(folder)
    if not files and not bad:
        raise ConfigError(
            f"--pdfs {display(folder)} holds no .pdf file (sub-folders included); put PDFs in it"
        )
    before = read_folder_manifest(base)
    papers, bad_ids = identify(folder, files, {p.sha256: p for p in before})
    bad += bad_ids
    links = base / LINKS
    stems = _link(links, papers, folder)
    indexed, run = None, {"failed": [], "stages": {}}
    if stems:
        res = run_pipeline(links, embedder=embedder, chunking=chunking, engine=engine,
                           verify=True, show_progress=show_progress)  # fmt: skip
        indexed, run = res.indexed, res.summary
    failed = {r["paper_id"]: r for r in run["failed"]}
    for pid, r in failed.items():
        why = f"{r['status']}: {r['error']}" if r["error"] else r["status"]
        # the parser names the link (<id>.pdf); the reader knows the file
        bad.append(bad_row(stems[pid].file, r["stage"], why.replace(f"{pid}.pdf", stems[pid].file)))
    moved = [s for s, p in stems.items() if s not in failed and _changed(folder / p.file, p)]
    if moved:  # changed after it was hashed: drop it now; the next run indexes its new content
        for s in moved:
            bad.append(bad_row(stems[s].file, "index", "file changed while it was indexed; "
                               "re-run to index its new content"))  # fmt: skip
            (links / f"{s}.pdf").unlink()
        ok = [s for s in stems if s not in failed and s not in moved]
        res = run_pipeline(links, embedder=embedder, chunking=chunking) if ok else None
        indexed = res.indexed if res else None
        failed.update({s: {} for s in moved})
    kept = [p for s, p in stems.items() if s not in failed]
    write_folder_manifest(base, folder, kept)
    summary = {
        "folder": folder.name,
        "pdf_files": len(files) + sum(r["stage"] == "scan" for r in bad),
        "papers_indexed": len(kept),
        "chunks_indexed": len(indexed.chunks) if indexed else 0,
        "duplicates": {p.paper_id: p.files for p in kept if len(p.files) > 1},
        "bad": sorted(bad, key=lambda r: r["file"]),
        "changes": _changes(before, kept),
        "stages": run.get("stages", {}),
        "embedder": run.get("embedder"),
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    write_atomic(base / SUMMARY, json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    for r in summary["bad"]:
        logger.warning("%s: not indexed (%s): %s", r["file"], r["stage"], r["reason"])
    return FolderBuild(indexed, kept, summary, base, links)


def _changed(path: Path, paper: FolderPaper) -> bool:
    try:
        return sha256_file(path) != paper.sha256
    except OSError:
        return True
