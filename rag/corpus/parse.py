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

Why this module is long: PDF layout analysis is one pipeline (lines, baselines, margins, columns,
reading order, headings, hyphen joins) whose steps share private records (``_Line``, ``_RawBlock``)
and thresholds; split apart, each piece would expose internals that mean nothing alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pymupdf
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ParseError
from rag.paths import cache_dir
from rag.text.normalize import expand_ligatures, plain_punctuation
from rag.types import Block, BlockKind, ParsedPaper, ParseStatus

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


# --- line and block records -------------------------------------------------------------------

_BOLD_FONT = re.compile(
    r"bold|black|heavy|semibold|demi|-medi|\bcmbx|^cmbx|sfbx|lmroman\d+-bold", re.I
)
_STAMP = re.compile(r"arXiv:\s*\d{4}\.\d{4,5}(v\d+)?|arXiv:[a-z\-]+/\d{7}", re.I)
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s*(?:/|of)\s*\d{1,4})?$", re.I)
_CAPTION = re.compile(
    r"^(?:figure|fig\.|table|tab\.|algorithm|listing|chart)\s*[A-Z]?\d+(?:\.\d+)?\s*[:.|]", re.I
)
_NUMBERED = re.compile(
    r"^(?P<num>(?:\d{1,2}(?:\.\d{1,2}){0,3}|[A-H](?:\.\d{1,2}){0,3}|[IVX]{1,5}(?=\.)))"
    r"\.?\s+(?P<title>[A-Z\u00c0-\u024f].*)$"
)
_APPENDIX = re.compile(r"^(?:appendix|appendices|supplementary)\b", re.I)
_REFERENCES = {
    "references",
    "bibliography",
    "reference",
    "references and notes",
    "literature cited",
}
_NAMED = _REFERENCES | {
    "abstract",
    "introduction",
    "related work",
    "related works",
    "background",
    "conclusion",
    "conclusions",
    "discussion",
    "limitations",
    "acknowledgments",
    "acknowledgements",
    "acknowledgment",
    "acknowledgement",
    "ethics statement",
    "ethical considerations",
    "broader impact",
    "broader impacts",
    "impact statement",
    "appendix",
    "appendices",
    "supplementary material",
    "conclusion and future work",
    "conclusions and future work",
}
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


@dataclass(slots=True)
class _Line:
    text: str
    bbox: tuple[float, float, float, float]
    size: float
    bold: bool
    horizontal: bool


@dataclass(slots=True)
class _RawBlock:
    page: int
    lines: list[_Line]
    kind: BlockKind = "body"
    text: str = ""

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        return (
            min(ln.bbox[0] for ln in self.lines),
            min(ln.bbox[1] for ln in self.lines),
            max(ln.bbox[2] for ln in self.lines),
            max(ln.bbox[3] for ln in self.lines),
        )

    @property
    def size(self) -> float:
        n = sum(len(ln.text) for ln in self.lines) or 1
        return sum(ln.size * len(ln.text) for ln in self.lines) / n


def _clean(text: str, nfkc: bool) -> str:
    text = expand_ligatures(text)
    if nfkc:
        text = unicodedata.normalize("NFKC", text)
    text = plain_punctuation(text).replace("\t", " ")
    return re.sub(r" {2,}", " ", text)


@lru_cache(maxsize=1024)
def _is_bold(flags: int, font: str) -> bool:
    return bool(flags & 16) or bool(_BOLD_FONT.search(font))


def _page_lines(page: pymupdf.Page, nfkc: bool) -> list[list[_Line]]:
    """The page's MuPDF blocks as lists of cleaned lines (same-baseline fragments merged)."""
    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
    out = []
    for blk in page.get_text("dict", flags=flags)["blocks"]:
        if blk.get("type", 0) != 0:
            continue
        lines: list[_Line] = []
        for ln in blk["lines"]:
            parts: list[str] = []
            total = weighted = bold_chars = 0.0
            for sp in ln["spans"]:
                t = sp["text"]
                if not t:
                    continue
                parts.append(t)
                n = len(t) - t.count(" ")
                total += n
                weighted += sp["size"] * n
                if n and _is_bold(sp["flags"], sp["font"]):
                    bold_chars += n
            if not total:
                continue
            text = _clean("".join(parts), nfkc)
            size = weighted / total
            dx, dy = ln["dir"]
            lines.append(
                _Line(
                    text=text.strip(),
                    bbox=tuple(ln["bbox"]),
                    size=size,
                    bold=bold_chars >= 0.8 * total,
                    horizontal=abs(dy) < 1e-3 and dx > 0,
                )
            )
        out.append(_merge_baselines(lines, page.rect.width / 2.0))
    return [b for b in out if b]


def _merge_baselines(lines: list[_Line], mid: float) -> list[_Line]:
    """Merge horizontal line fragments sharing a baseline ("3" + "Method" → "3 Method").

    Table cells on one row merge too (MuPDF put them in one block), but two lines facing each
    other across the column gutter at ``mid`` stay apart unless they nearly touch.
    """
    merged: list[_Line] = []
    for ln in lines:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and prev.horizontal
            and ln.horizontal
            and abs(prev.bbox[3] - ln.bbox[3]) < 1.5
            and ln.bbox[0] >= prev.bbox[2] - 1.0
            and (
                ln.bbox[0] <= prev.bbox[2] + 2.5 * max(ln.size, prev.size)
                or not (prev.bbox[2] <= mid < ln.bbox[0])
            )
        ):
            n1, n2 = len(prev.text), len(ln.text)
            merged[-1] = _Line(
                text=f"{prev.text} {ln.text}",
                bbox=(
                    prev.bbox[0],
                    min(prev.bbox[1], ln.bbox[1]),
                    ln.bbox[2],
                    max(prev.bbox[3], ln.bbox[3]),
                ),
                size=(prev.size * n1 + ln.size * n2) / (n1 + n2),
                bold=prev.bold and ln.bold,
                horizontal=True,
            )
        else:
            merged.append(ln)
    return merged


# --- layout: margins, columns, reading order ----------------------------------------------------


def _mark_margins(
    pages: list[list[_RawBlock]], sizes: list[tuple[float, float]], s: ParseSettings
) -> None:
    """Mark the arXiv stamp, rotated side-margin text and running headers/footers."""
    signatures: Counter[tuple[str, str]] = Counter()
    candidates: list[tuple[_RawBlock, tuple[str, str]]] = []
    for blocks, (w, h) in zip(pages, sizes, strict=True):
        seen: set[tuple[str, str]] = set()
        for b in blocks:
            text = " ".join(ln.text for ln in b.lines)
            x0, y0, x1, y1 = b.bbox
            if _STAMP.search(text) and (
                not b.lines[0].horizontal or x1 < 0.12 * w or x0 > 0.88 * w
            ):
                b.kind = "header_footer"
                continue
            if all(not ln.horizontal for ln in b.lines) and (x1 < 0.12 * w or x0 > 0.88 * w):
                b.kind = "header_footer"
                continue
            band = (
                "top"
                if y1 <= s.margin_band * h
                else "bottom"
                if y0 >= (1 - s.margin_band) * h
                else ""
            )
            if not band:
                continue
            if _PAGE_NUMBER.match(text.strip()):
                b.kind = "header_footer"
                continue
            sig = (band, re.sub(r"\d+", "#", text.casefold()).strip())
            candidates.append((b, sig))
            if sig not in seen:
                seen.add(sig)
                signatures[sig] += 1
    need = min(s.min_repeat_pages, max(2, len(pages)))
    for b, sig in candidates:
        if signatures[sig] >= need:
            b.kind = "header_footer"


def _split_columns(b: _RawBlock, mid: float, tol: float) -> list[_RawBlock]:
    """Split a MuPDF block whose lines sit in both columns into one block per column."""
    left = [ln for ln in b.lines if ln.bbox[2] <= mid + tol]
    right = [ln for ln in b.lines if ln.bbox[0] >= mid - tol]
    if not left or not right or len(left) + len(right) != len(b.lines):
        return [b]
    return [_RawBlock(b.page, left, b.kind), _RawBlock(b.page, right, b.kind)]


def _reading_order(blocks: list[_RawBlock], width: float, s: ParseSettings) -> list[_RawBlock]:
    """Order blocks for reading: bands split at full-width blocks, left column before right."""
    mid, tol = width / 2.0, 0.02 * width
    if s.columns:
        blocks = [part for b in blocks for part in _split_columns(b, mid, tol)]
    by_y = sorted(blocks, key=lambda b: (round(b.bbox[1], 1), b.bbox[0]))
    if not s.columns:
        return by_y

    def side(b: _RawBlock) -> str:
        x0, _, x1, _ = b.bbox
        if x1 <= mid + tol:
            return "L"
        if x0 >= mid - tol:
            return "R"
        return "F"

    chars = Counter()
    for b in by_y:
        if b.kind != "header_footer":
            chars[side(b)] += sum(len(ln.text) for ln in b.lines)
    total = sum(chars.values()) or 1
    if chars["L"] < 0.15 * total or chars["R"] < 0.15 * total:
        return by_y
    ordered: list[_RawBlock] = []
    band: list[_RawBlock] = []

    def flush() -> None:
        band.sort(key=lambda b: (side(b) != "L", round(b.bbox[1], 1), b.bbox[0]))
        ordered.extend(band)
        band.clear()

    for b in by_y:
        if side(b) == "F" and b.kind != "header_footer":
            flush()
            ordered.append(b)
        else:
            band.append(b)
    flush()
    return ordered


# --- text assembly --------------------------------------------------------------------------


def _vocabulary(pages: list[list[_RawBlock]]) -> Counter[str]:
    vocab: Counter[str] = Counter()
    for blocks in pages:
        for b in blocks:
            for ln in b.lines:
                vocab.update(w.casefold() for w in _WORD.findall(ln.text))
    return vocab


def _join_lines(lines: list[str], vocab: Counter[str], keep_compounds: bool) -> str:
    """Join a block's lines with spaces, resolving line-end hyphens (see module docstring)."""
    text = ""
    for line in lines:
        if not text:
            text = line
            continue
        if len(text) >= 2 and text[-1] == "-" and text[-2].isalpha() and line[:1].isalnum():
            head_m = re.search(r"([^\W\d_]+(?:-[^\W\d_]+)*)-$", text)
            tail_m = re.match(r"[^\W\d_]+", line)
            if line[0].islower() and head_m and tail_m:
                head, tail = head_m.group(1), tail_m.group(0)
                hyphenated = f"{head}-{tail}".casefold()
                joined = f"{head}{tail}".casefold()
                if keep_compounds and vocab[hyphenated] > vocab[joined]:
                    text = text + line
                else:
                    text = text[:-1] + line
            else:
                # "GPT-" + "4", "Bi-" + "LSTM": a compound with a digit or capital, keep the hyphen.
                text = text + line
        else:
            text = f"{text} {line}"
    return re.sub(r" {2,}", " ", text).strip()


# --- kinds and sections ---------------------------------------------------------------------


def _body_size(pages: list[list[_RawBlock]]) -> float:
    sizes: Counter[float] = Counter()
    for blocks in pages:
        for b in blocks:
            for ln in b.lines:
                sizes[round(ln.size * 2) / 2] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _plausible_title(num: str, title: str) -> bool:
    """Whether a numbered line's text reads like a section title, not a table row or a label."""
    top = num.split(".")[0]
    return (
        (not top.isdigit() or int(top) <= 30)
        and not title.rstrip().endswith((",", ";"))
        and not _PAGE_NUMBER.match(title)
        and sum(c.isalpha() for c in title) >= 0.5 * len(title)
        and re.search(r"[^\W\d_]{2,}", title) is not None
    )


def _heading_lines(b: _RawBlock, body: float, letters: bool) -> int:
    """How many leading lines of a block form a section heading (0 if none).

    ``letters`` allows appendix numbering (``A``, ``B.2``); it is off until a numbered section or
    the references were seen, so a title such as "A Study of ..." is not taken for an appendix.
    """
    first = b.lines[0]
    text = first.text.strip()
    if not first.horizontal or len(text) > 120:
        return 0
    larger = first.size >= body + 0.8
    styled = first.bold or larger
    bare = text.rstrip(".:").strip()
    m = _NUMBERED.match(text)
    if m and not letters and m.group("num")[0] in "ABCDEFGH":
        m = None
    if m and not _plausible_title(m.group("num"), m.group("title")):
        m = None  # table rows ("77.2 CWQ 51.2") and figure labels ("B D") are not headings
    is_heading = False
    if m and styled:
        is_heading = len(m.group("title").split()) <= 14
    elif bare.casefold() in _NAMED and (styled or bare.isupper() or len(b.lines) == 1):
        is_heading = True
    elif m and m.group("title").isupper() and len(m.group("title").split()) <= 8:
        is_heading = True  # "IV. EXPERIMENTS" in small caps, not bold
    elif _APPENDIX.match(bare) and (styled or bare.isupper()) and len(bare.split()) <= 12:
        is_heading = True
    if not is_heading:
        return 0
    n = 1
    if first.bold:
        # A heading that wraps: following lines in the same style.
        while (
            n < len(b.lines)
            and n < 3
            and b.lines[n].bold
            and abs(b.lines[n].size - first.size) < 0.5
            and len(b.lines[n].text) < 80
        ):
            n += 1
    return n


def _classify(
    ordered: list[_RawBlock],
    body: float,
    height_of: dict[int, float],
    join: Callable[[list[str]], str],
) -> list[Block]:
    """Assign kinds and sections to blocks in reading order and build the output records."""
    out: list[Block] = []
    section = ""
    in_refs = False
    letters = False
    for b in ordered:
        b.text = join([ln.text for ln in b.lines])
        if b.kind == "header_footer":
            out.append(Block(b.page, "header_footer", section, b.text, _round_bbox(b.bbox)))
            continue
        n = _heading_lines(b, body, letters)
        if n:
            head = _RawBlock(b.page, b.lines[:n])
            title = re.sub(r"\s+", " ", " ".join(ln.text for ln in head.lines)).strip()
            section = title
            name = _NUMBERED.sub(r"\g<title>", title).rstrip(".:").strip().casefold()
            in_refs = name in _REFERENCES or title.rstrip(".:").casefold() in _REFERENCES
            letters = letters or in_refs or title[:1].isdigit()
            out.append(Block(b.page, "heading", section, title, _round_bbox(head.bbox)))
            if n == len(b.lines):
                continue
            b = _RawBlock(b.page, b.lines[n:])
            b.text = join([ln.text for ln in b.lines])
        kind: BlockKind
        if (
            not section
            and b.page == 1
            and len(b.lines) <= 3
            and b.size >= 1.3 * body
            and all(ln.horizontal for ln in b.lines)
        ):
            # The title: a heading that opens no section; a title set on two lines is one block.
            prev = out[-1] if out else None
            if prev is not None and prev.kind == "heading" and not prev.section and prev.page == 1:
                x0, y0, x1, y1 = prev.bbox
                bx0, by0, bx1, by1 = b.bbox
                box = (min(x0, bx0), min(y0, by0), max(x1, bx1), max(y1, by1))
                out[-1] = Block(1, "heading", "", f"{prev.text} {b.text}", _round_bbox(box))
            else:
                out.append(Block(b.page, "heading", section, b.text, _round_bbox(b.bbox)))
            continue
        if _CAPTION.match(b.text):
            kind = "caption"  # figures placed after the bibliography are still figures
        elif in_refs:
            kind = "references"
        elif b.size < body - 0.8 and b.bbox[1] > 0.6 * height_of[b.page]:
            kind = "footnote"
        else:
            kind = "body"
        out.append(Block(b.page, kind, section, b.text, _round_bbox(b.bbox)))
    return out


def _round_bbox(bbox: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    return tuple(round(v, 2) for v in bbox)  # type: ignore[return-value]


# --- public API -----------------------------------------------------------------------------


def _open(path: Path) -> pymupdf.Document:
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
        pages: list[list[_RawBlock]] = []
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
                blocks = [_RawBlock(i + 1, lines) for lines in _page_lines(page, settings.nfkc)]
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

    _mark_margins(pages, sizes, settings)
    vocab = _vocabulary(pages)
    body = _body_size(pages)
    ordered: list[_RawBlock] = []
    for blocks, (w, _) in zip(pages, sizes, strict=True):
        ordered.extend(_reading_order(blocks, w, settings))
    height_of = {i + 1: h for i, (_, h) in enumerate(sizes)}
    out = _classify(
        ordered, body, height_of, lambda ls: _join_lines(ls, vocab, settings.keep_compound_hyphens)
    )
    return ParsedPaper(
        paper_id=path.stem,
        n_pages=n_pages,
        blocks=out,
        error=f"unreadable pages skipped: {bad_pages}" if bad_pages else None,
        parse_seconds=round(time.perf_counter() - t0, 4),
    )


def cache_key(sha256: str, settings: ParseSettings) -> str:
    """Content address of a parse: PDF hash + settings + parser and PyMuPDF versions."""
    payload = json.dumps(
        {
            "sha256": sha256,
            "settings": settings.model_dump(mode="json"),
            "parser": PARSER_VERSION,
            "pymupdf": pymupdf.VersionBind,
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
            return ParsedPaper.from_dict(json.loads(target.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as e:
            logger.warning("ignoring unreadable parse cache %s (%s)", target.name, e)
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
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError as e:
        logger.warning("could not write parse cache %s (%s)", target.name, e)
        Path(tmp).unlink(missing_ok=True)
    return parsed


def paper_pages_text(parsed: ParsedPaper, kinds: frozenset[str] | None = None) -> dict[int, str]:
    """Text per page (blocks of the given kinds joined by newlines); for inspection and matching."""
    kinds = kinds or frozenset({"heading", "body", "caption", "footnote", "references"})
    pages: dict[int, list[str]] = {}
    for b in parsed.blocks:
        if b.kind in kinds:
            pages.setdefault(b.page, []).append(b.text)
    return {p: "\n".join(t) for p, t in sorted(pages.items())}
