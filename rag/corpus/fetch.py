"""One pinned paper's PDF, verified: cache → mirror → arXiv, its sha256 against the manifest.

A PDF already in the cache folder (only complete, verified files ever get there, see
:mod:`rag.corpus.arxiv_client`) is reused without a request; else a PDF in the local mirror is used
in place; else the versioned PDF is downloaded politely. A sha256 that differs from the manifest
(arXiv occasionally regenerates PDFs) marks the paper ``changed``; a changed PDF whose page count or
size contradicts the manifest beyond :data:`PAGES_TOLERANCE` / :data:`BYTES_TOLERANCE`, or whose
page 1 does not carry the manifest's title (:mod:`rag.corpus.titlecheck`), is another file and is
refused by name. A file that is there but unusable (truncated, not a PDF) is skipped with its
reason; once arXiv is unreachable, the remaining papers are not tried. The loop over a corpus, the
parse and the summary are :mod:`rag.corpus.ingest`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rag.corpus.arxiv_client import ArxivClient, ArxivUnreachable, pdf_problem, unreachable_hint
from rag.corpus.ingest_summary import PaperOutcome, Source
from rag.corpus.manifest import Paper
from rag.corpus.pdf_check import sha256_file_cached
from rag.corpus.titlecheck import check_title
from rag.errors import DownloadError, WrongPaperError
from rag.paths import display

log = logging.getLogger(__name__)

#: A changed PDF may differ from the manifest by this many pages (a regenerated PDF reflows a
#: little) ...
PAGES_TOLERANCE = 1
#: ... and by this fraction of the manifest's byte size (other fonts and compression); beyond
#: either it is refused as another file.
BYTES_TOLERANCE = 0.25


def _page_count(path: Path) -> int | None:
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            return doc.page_count
    except Exception:  # noqa: BLE001 - a PDF MuPDF cannot open has no page count to compare
        return None


def manifest_mismatch(paper: Paper, path: Path, size: int) -> str | None:
    """Why a changed PDF is not the pinned paper (pages or size beyond tolerance), or None.

    A regenerated arXiv PDF keeps its pages (within :data:`PAGES_TOLERANCE`) and roughly its size
    (within :data:`BYTES_TOLERANCE`); another paper saved under this name does not.
    """
    problems = []
    if paper.bytes:
        rel = (size - paper.bytes) / paper.bytes
        if abs(rel) > BYTES_TOLERANCE:
            problems.append(
                f"{size:,} bytes vs the manifest's {paper.bytes:,} ({rel:+.0%}; tolerance "
                f"±{BYTES_TOLERANCE:.0%})"
            )
    if paper.pages:
        pages = _page_count(path)
        if pages is not None and abs(pages - paper.pages) > PAGES_TOLERANCE:
            problems.append(
                f"{pages} pages vs the manifest's {paper.pages} (tolerance ±{PAGES_TOLERANCE})"
            )
    if not problems:
        return None
    return (
        f"refused: sha256 differs and {'; '.join(problems)}: not a regenerated copy of "
        f"{paper.versioned_id}; replace {display(path)} with the pinned PDF"
    )


def _check_changed(paper: Paper, out: PaperOutcome, path: Path) -> None:
    """Flag a changed PDF; refuse it (status failed, not used) when it contradicts the manifest:
    pages or size beyond tolerance, or a page 1 without the manifest's title (another paper)."""
    if not out.changed:
        return
    why = manifest_mismatch(paper, path, out.bytes or path.stat().st_size)
    if why is None:
        try:
            check_title(paper, path)
        except WrongPaperError as e:
            why = f"refused: sha256 differs and the file is another paper: {e}"
    if why is None:
        out.reason = (
            "sha256 differs from the manifest (pages, size and page-1 title agree: regenerated "
            "PDF?)"
        )
        return
    log.error("%s: %s", paper.arxiv_id, why)
    out.status, out.refused, out.used, out.reason = "failed", True, False, why


def _from_disk(
    paper: Paper, path: Path, source: Source, use_changed: bool, notes: list[str]
) -> PaperOutcome | None:
    """An outcome for a usable local PDF, or None when there is none at ``path``.

    A file that is there but unusable adds its problem to ``notes`` (for the paper's reason).
    """
    if not path.is_file():
        return None
    problem = pdf_problem(path)
    if problem is not None:
        log.warning("%s: %s is %s; ignoring it", paper.arxiv_id, display(path), problem)
        notes.append(f"{source} file {display(path)} is {problem}")
        if source == "cache":
            # Only verified files are moved into the cache, so this one was put there by hand.
            path.unlink()
        return None
    sha = sha256_file_cached(path)
    changed = paper.sha256 is not None and sha != paper.sha256
    out = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="changed" if changed else ("cached" if source == "cache" else "mirror"),
        source=source,
        path=display(path),
        expected_sha256=paper.sha256,
        sha256=sha,
        bytes=path.stat().st_size,
        changed=changed,
        used=use_changed or not changed,
    )
    _check_changed(paper, out, path)
    return out


def fetch_paper(
    paper: Paper,
    client: ArxivClient,
    pdf_dir: Path,
    mirror: Path | None,
    unreachable: list[tuple[str, ArxivUnreachable]],
    *,
    use_changed: bool = True,
) -> tuple[PaperOutcome, Path | None]:
    """Cache → mirror → network for one paper: its outcome, and the PDF to parse (None when it
    failed or was refused).

    Args:
        paper: the pinned paper.
        client: the arXiv client (its request count gives the outcome's attempts).
        pdf_dir: the cache folder of verified PDFs (a download lands here).
        mirror: a folder of ``<arxiv_id>.pdf`` read before the network (None: none).
        unreachable: shared across one run's papers: once arXiv is unreachable, later papers are
            not tried and their reason says why.
        use_changed: a PDF whose sha256 differs from the manifest is still used (and flagged).
    """
    notes: list[str] = []
    cached = pdf_dir / paper.filename
    out = _from_disk(paper, cached, "cache", use_changed, notes)
    if out is not None:
        return out, (None if out.refused else cached)
    if mirror is not None:
        mirrored = mirror / paper.filename
        out = _from_disk(paper, mirrored, "mirror", use_changed, notes)
        if out is not None:
            return (out, mirrored) if not out.refused else (out, None)
    base = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="failed",
        expected_sha256=paper.sha256,
    )

    def because(reason: str) -> str:
        return "; ".join([*notes, reason])

    if unreachable:
        # One unreachable arXiv is enough: do not spend every paper's attempts on it. The reason
        # names this paper's own URL and says it was not tried, and why.
        first_id, _ = unreachable[0]
        base.reason = because(
            f"not tried (arXiv was unreachable for {first_id}): "
            + unreachable_hint(client.pdf_url(paper))
        )
        return base, None
    before = client.requests_sent
    try:
        got = client.download(paper, cached)
    except ArxivUnreachable as e:
        unreachable.append((paper.arxiv_id, e))
        base.reason = because(f"network unreachable: {e}")
        base.attempts = client.requests_sent - before
        return base, None
    except DownloadError as e:
        log.error("%s: download failed: %s", paper.arxiv_id, e)
        base.reason = because(str(e))
        base.attempts = client.requests_sent - before
        return base, None
    changed = paper.sha256 is not None and got.sha256 != paper.sha256
    if changed:
        log.warning(
            "%s: sha256 %s differs from the manifest's %s (arXiv regenerated the PDF?)",
            paper.arxiv_id,
            got.sha256[:12],
            (paper.sha256 or "")[:12],
        )
    out = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="changed" if changed else "downloaded",
        source="network",
        path=display(got.path),
        expected_sha256=paper.sha256,
        sha256=got.sha256,
        bytes=got.bytes,
        changed=changed,
        used=use_changed or not changed,
        attempts=got.attempts,
    )
    _check_changed(paper, out, got.path)
    return out, (None if out.refused else got.path)
