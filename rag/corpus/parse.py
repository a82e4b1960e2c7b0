"""PDF → page- and section-aware text blocks in reading order, with PyMuPDF.

What the parser does, in order, per paper:

1. Guard rails: open (corrupt → ``corrupt``), password (``encrypted``), page count (``empty``,
   ``too_many_pages``), a wall-clock budget checked between pages (``timeout``), and no text at all
   (``image_only`` when pages carry images, else ``empty``).
2. Lines from ``page.get_text("dict")``: ligatures expanded, NFKC, plain spaces; fragments on one
   baseline merged. Rotated lines in the side margins (the arXiv stamp ``arXiv:1706.03762v7
   [cs.CL] 2 Aug 2023`` on page 1) become ``header_footer``.
3. Running headers and footers: blocks in the top/bottom margin band whose text (digits masked)
   repeats on several pages, and bare page numbers there, become ``header_footer``.
4. Reading order: on two-column pages, blocks are cut into horizontal bands at full-width blocks
   (title, wide figures and tables); inside a band the left column is read before the right.
5. Block text: lines joined; a line-end hyphen is dropped (``retrie-`` + ``val``) unless the
   document itself spells the word with a hyphen more often than without (``pre-trained``).
6. Kinds and sections: numbered headings (``3``, ``3.1``, ``A.2``, ``IV.``) in bold or larger type
   and well-known unnumbered ones (Abstract, References, ...) start sections; captions start with
   ``Figure n:`` / ``Table n:``; small type low on a page is a footnote; everything after a
   References/Bibliography heading up to the next heading (an appendix) is ``references``.

Steps 2 and 5 live in :mod:`rag.corpus.pdf_lines`, steps 3, 4 and 6 in :mod:`rag.corpus.pdf_layout`;
this module holds the settings, the guard rails, the pipeline and the parse cache.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from rag.atomic import write_atomic
from rag.corpus.pdf_layout import body_size, classify, mark_margins, reading_order
from rag.corpus.pdf_lines import RawBlock, join_lines, page_lines, vocabulary
from rag.errors import ParseError
from rag.paths import cache_dir
from rag.types import ParsedPaper, ParseStatus

if TYPE_CHECKING:  # imported where a PDF is opened: loading a cached parse needs no PyMuPDF
    import pymupdf

logger = logging.getLogger(__name__)

#: Bump when the parser's output changes for the same PDF; part of every cache key.
PARSER_VERSION = "2"


class ParseSettings(BaseModel):
    """Settings of the PDF parsing stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_pages: int = Field(
        200, ge=1, le=100_000, description="PDFs with more pages are rejected (too_many_pages)."
    )
    time_limit_s: float = Field(
        60.0, gt=0, le=3600, description="Wall-clock budget per PDF, checked between pages."
    )
    margin_band: float = Field(
        0.09,
        ge=0.0,
        le=0.3,
        description="Top/bottom fraction of the page height searched for running headers/footers.",
    )
    min_repeat_pages: int = Field(
        3,
        ge=2,
        le=1000,
        description="A margin text repeating on this many pages is a header/footer.",
    )
    columns: bool = Field(True, description="Detect two-column pages and read column by column.")
    nfkc: bool = Field(True, description="Apply Unicode NFKC to the extracted text.")
    keep_compound_hyphens: bool = Field(
        True,
        description="At a line-end hyphen keep it when the paper spells the word hyphenated more "
        "often than joined; else always drop it.",
    )


class ParseFailure(ParseError):
    """A PDF that cannot be parsed, with the :data:`rag.types.ParseStatus` that says why."""

    def __init__(self, status: ParseStatus, message: str) -> None:
        super().__init__(message)
        self.status: ParseStatus = status


# --- parsing -----------------------------------------------------------------------------


def _open(path: Path) -> pymupdf.Document:
    import pymupdf

    try:
        doc = pymupdf.open(path, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError, OSError) as e:
        if not Path(path).exists():
            raise ParseFailure("error", f"PDF not found: {path}; check the path") from e
        raise ParseFailure("corrupt", f"{path.name} is not a readable PDF ({e})") from e
    if doc.needs_pass and not doc.authenticate(""):
        doc.close()
        raise ParseFailure(
            "encrypted", f"{path.name} is password-protected; supply an unlocked copy"
        )
    return doc


def parse_pdf(path: Path, settings: ParseSettings) -> ParsedPaper:
    """Parse one PDF into blocks in reading order (see the module docstring for the steps).

    A page MuPDF cannot read is skipped and named in ``error`` (the status stays "ok"), so one
    broken content stream does not lose the rest of the paper.

    Raises:
        ParseFailure: (a :class:`rag.errors.ParseError`) with ``status`` corrupt, encrypted, empty,
            image_only, too_many_pages or timeout.
    """
    path = Path(path)
    t0 = time.perf_counter()
    doc = _open(path)
    try:
        n_pages = doc.page_count
        if n_pages == 0:
            raise ParseFailure("empty", f"{path.name} has no pages")
        if n_pages > settings.max_pages:
            raise ParseFailure(
                "too_many_pages",
                f"{path.name} has {n_pages} pages, more than max_pages={settings.max_pages}; "
                "raise ParseSettings.max_pages to parse it",
            )
        pages: list[list[RawBlock]] = []
        sizes: list[tuple[float, float]] = []
        n_images = 0
        bad_pages: list[int] = []
        for i, page in enumerate(doc):
            if time.perf_counter() - t0 > settings.time_limit_s:
                raise ParseFailure(
                    "timeout",
                    f"{path.name}: parsing exceeded time_limit_s={settings.time_limit_s} at page "
                    f"{i + 1}/{n_pages}; raise ParseSettings.time_limit_s if the PDF is sound",
                )
            try:
                blocks = [RawBlock(i + 1, lines) for lines in page_lines(page, settings.nfkc)]
            except (RuntimeError, ValueError) as e:
                # One broken page (bad content stream) should not cost the other pages.
                logger.warning("%s: page %d unreadable, skipped (%s)", path.name, i + 1, e)
                bad_pages.append(i + 1)
                blocks = []
            if not blocks:
                n_images += len(page.get_images(full=False))
            pages.append(blocks)
            sizes.append((page.rect.width, page.rect.height))
    except ParseError:
        raise
    except (RuntimeError, ValueError) as e:
        raise ParseFailure("corrupt", f"{path.name}: MuPDF failed while reading ({e})") from e
    finally:
        doc.close()

    if len(bad_pages) == n_pages:
        raise ParseFailure("corrupt", f"{path.name}: no page could be read")
    if not any(pages):
        status: ParseStatus = "image_only" if n_images else "empty"
        what = "only images (scanned? run OCR first)" if n_images else "no text"
        raise ParseFailure(status, f"{path.name} has {what}")

    mark_margins(pages, sizes, settings.margin_band, settings.min_repeat_pages)
    vocab = vocabulary(pages)
    body = body_size(pages)
    ordered: list[RawBlock] = []
    for blocks, (w, _) in zip(pages, sizes, strict=True):
        ordered.extend(reading_order(blocks, w, settings.columns))
    height_of = {i + 1: h for i, (_, h) in enumerate(sizes)}
    out = classify(
        ordered, body, height_of, lambda ls: join_lines(ls, vocab, settings.keep_compound_hyphens)
    )
    return ParsedPaper(
        paper_id=path.stem,
        n_pages=n_pages,
        blocks=out,
        error=f"unreadable pages skipped: {bad_pages}" if bad_pages else None,
        parse_seconds=round(time.perf_counter() - t0, 4),
    )


@functools.cache
def pymupdf_version() -> str:
    """PyMuPDF's version as ``pymupdf.VersionBind`` states it (its distribution's version, read
    without importing PyMuPDF, which takes a second)."""
    return importlib.metadata.version("pymupdf")


def cache_key(sha256: str, settings: ParseSettings) -> str:
    """Content address of a parse: PDF hash + settings + parser and PyMuPDF versions."""
    payload = json.dumps(
        {
            "sha256": sha256,
            "settings": settings.model_dump(mode="json"),
            "parser": PARSER_VERSION,
            "pymupdf": pymupdf_version(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _sha_mismatch(pdf_path: Path, sha256: str, when: str) -> str | None:
    """Why ``pdf_path`` is not the file with ``sha256`` right now, or None when it is."""
    if not sha256:
        return None  # no checksum to hold the file to (an unobserved bootstrap paper)
    h = hashlib.sha256()
    try:
        with pdf_path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    except OSError as e:
        return f"PDF unreadable {when}: {e}"
    if h.hexdigest() != sha256:
        logger.error("%s changed on disk %s; its parse is not cached", pdf_path.name, when)
        return (
            f"PDF changed on disk {when} (sha256 {h.hexdigest()[:12]}, verified as "
            f"{sha256[:12]}): another process writing the same file? Re-run the ingest"
        )
    return None


def load_parsed(
    pdf_path: Path, sha256: str, settings: ParseSettings, *, verify: bool = False
) -> ParsedPaper:
    """Parse a PDF through the cache; never raises for a bad PDF.

    A failed parse comes back as a :class:`ParsedPaper` with no blocks, a non-"ok" ``status`` and
    the reason in ``error``. Successful parses are stored as JSON under
    ``cache_dir("parsed")`` keyed by :func:`cache_key`; failures are not cached (a timeout may
    pass on a faster machine). With ``verify`` (as ingest calls it) a parse is made and cached
    only when the file's sha256, hashed right before and right after parsing, is ``sha256``: a PDF
    rewritten under the parser (another process writing the same file) is an ``error``, never a
    cached parse under a key that does not describe it.
    """
    pdf_path = Path(pdf_path)
    target = cache_dir("parsed") / f"{pdf_path.stem}-{cache_key(sha256, settings)[:24]}.json"
    if target.exists():
        try:
            cached = ParsedPaper.from_dict(json.loads(target.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as e:
            logger.warning("ignoring unreadable parse cache %s (%s)", target.name, e)
        else:
            _recall_sha1(cached, target)
            return cached
    moved = _sha_mismatch(pdf_path, sha256, "before parsing") if verify else None
    if moved is not None:
        return ParsedPaper(paper_id=pdf_path.stem, n_pages=0, status="error", error=moved)
    try:
        parsed = parse_pdf(pdf_path, settings)
    except ParseFailure as e:
        logger.warning("parse failed for %s: %s", pdf_path.name, e)
        return ParsedPaper(paper_id=pdf_path.stem, n_pages=0, status=e.status, error=str(e))
    except Exception as e:  # noqa: BLE001 — hostile PDFs can make MuPDF raise anything; the batch must go on
        logger.exception("unexpected parse error for %s", pdf_path.name)
        return ParsedPaper(
            paper_id=pdf_path.stem, n_pages=0, status="error", error=f"{type(e).__name__}: {e}"
        )
    moved = _sha_mismatch(pdf_path, sha256, "while it was parsed") if verify else None
    if moved is not None:
        return ParsedPaper(paper_id=pdf_path.stem, n_pages=0, status="error", error=moved)
    data = json.dumps(parsed.to_dict(), ensure_ascii=False, sort_keys=True)
    try:
        write_atomic(target, data)
    except OSError as e:
        logger.warning("could not write parse cache %s (%s)", target.name, e)
    else:
        _recall_sha1(parsed, target)
    return parsed


def _recall_sha1(parsed: ParsedPaper, target: Path) -> None:
    """Give a cached parse its content hash from the memo beside it, writing the memo if absent.

    A parse cache file is content-addressed, so its content hash never changes; the memo spares
    every load from re-encoding ~80k blocks to fingerprint the chunks built from them."""
    memo = target.with_suffix(".sha1")
    try:
        held = memo.read_text(encoding="ascii").strip()
    except OSError:
        held = ""
    if len(held) == 40 and all(c in "0123456789abcdef" for c in held):
        parsed.known_sha1 = held
        return
    try:
        memo.write_text(parsed.content_sha1() + "\n", encoding="ascii")
    except OSError as e:
        logger.warning("could not write parse hash memo %s (%s)", memo.name, e)


def paper_pages_text(parsed: ParsedPaper, kinds: frozenset[str] | None = None) -> dict[int, str]:
    """Text per page (blocks of the given kinds joined by newlines); for inspection and matching."""
    kinds = kinds or frozenset({"heading", "body", "caption", "footnote", "references"})
    pages: dict[int, list[str]] = {}
    for b in parsed.blocks:
        if b.kind in kinds:
            pages.setdefault(b.page, []).append(b.text)
    return {p: "\n".join(t) for p, t in sorted(pages.items())}
