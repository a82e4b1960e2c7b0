"""Layout and structure of a parsed PDF: margins, reading order, headings, kinds and sections.

* :func:`mark_margins` — the arXiv stamp and rotated side-margin text, then running headers and
  footers: blocks in the top/bottom band whose text (digits masked) repeats on several pages, and
  bare page numbers there, become ``header_footer``.
* :func:`reading_order` — on two-column pages, blocks are cut into horizontal bands at full-width
  blocks (title, wide figures and tables); inside a band the left column is read first.
* :func:`classify` — numbered headings (``3``, ``3.1``, ``A.2``, ``IV.``) in bold or larger type
  and well-known unnumbered ones start sections; captions start with ``Figure n:`` /
  ``Table n:``; small type low on a page is a footnote; everything after a References heading up
  to the next heading (an appendix) is ``references``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from rag.corpus.pdf_lines import RawBlock
from rag.types import Block, BlockKind

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


def mark_margins(
    pages: list[list[RawBlock]],
    sizes: list[tuple[float, float]],
    margin_band: float,
    min_repeat_pages: int,
) -> None:
    """Mark the arXiv stamp, rotated side-margin text and running headers/footers."""
    signatures: Counter[tuple[str, str]] = Counter()
    candidates: list[tuple[RawBlock, tuple[str, str]]] = []
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
                "top" if y1 <= margin_band * h else "bottom" if y0 >= (1 - margin_band) * h else ""
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
    need = min(min_repeat_pages, max(2, len(pages)))
    for b, sig in candidates:
        if signatures[sig] >= need:
            b.kind = "header_footer"


def split_columns(b: RawBlock, mid: float, tol: float) -> list[RawBlock]:
    """Split a MuPDF block whose lines sit in both columns into one block per column."""
    left = [ln for ln in b.lines if ln.bbox[2] <= mid + tol]
    right = [ln for ln in b.lines if ln.bbox[0] >= mid - tol]
    if not left or not right or len(left) + len(right) != len(b.lines):
        return [b]
    return [RawBlock(b.page, left, b.kind), RawBlock(b.page, right, b.kind)]


def reading_order(blocks: list[RawBlock], width: float, columns: bool) -> list[RawBlock]:
    """Order blocks for reading: bands split at full-width blocks, left column before right."""
    mid, tol = width / 2.0, 0.02 * width
    if columns:
        blocks = [part for b in blocks for part in split_columns(b, mid, tol)]
    by_y = sorted(blocks, key=lambda b: (round(b.bbox[1], 1), b.bbox[0]))
    if not columns:
        return by_y

    def side(b: RawBlock) -> str:
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
    ordered: list[RawBlock] = []
    band: list[RawBlock] = []

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


def body_size(pages: list[list[RawBlock]]) -> float:
    """The paper's body font size: the size (to half a point) that sets the most characters."""
    sizes: Counter[float] = Counter()
    for blocks in pages:
        for b in blocks:
            for ln in b.lines:
                sizes[round(ln.size * 2) / 2] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def plausible_title(num: str, title: str) -> bool:
    """Whether a numbered line's text reads like a section title, not a table row or a label."""
    top = num.split(".")[0]
    return (
        (not top.isdigit() or int(top) <= 30)
        and not title.rstrip().endswith((",", ";"))
        and not _PAGE_NUMBER.match(title)
        and sum(c.isalpha() for c in title) >= 0.5 * len(title)
        and re.search(r"[^\W\d_]{2,}", title) is not None
    )


def heading_lines(b: RawBlock, body: float, letters: bool) -> int:
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
    if m and not plausible_title(m.group("num"), m.group("title")):
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


def classify(
    ordered: list[RawBlock],
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
            out.append(Block(b.page, "header_footer", section, b.text, round_bbox(b.bbox)))
            continue
        n = heading_lines(b, body, letters)
        if n:
            head = RawBlock(b.page, b.lines[:n])
            title = re.sub(r"\s+", " ", " ".join(ln.text for ln in head.lines)).strip()
            section = title
            name = _NUMBERED.sub(r"\g<title>", title).rstrip(".:").strip().casefold()
            in_refs = name in _REFERENCES or title.rstrip(".:").casefold() in _REFERENCES
            letters = letters or in_refs or title[:1].isdigit()
            out.append(Block(b.page, "heading", section, title, round_bbox(head.bbox)))
            if n == len(b.lines):
                continue
            b = RawBlock(b.page, b.lines[n:])
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
                out[-1] = Block(1, "heading", "", f"{prev.text} {b.text}", round_bbox(box))
            else:
                out.append(Block(b.page, "heading", section, b.text, round_bbox(b.bbox)))
            continue
        if _CAPTION.match(b.text):
            kind = "caption"  # figures placed after the bibliography are still figures
        elif in_refs:
            kind = "references"
        elif b.size < body - 0.8 and b.bbox[1] > 0.6 * height_of[b.page]:
            kind = "footnote"
        else:
            kind = "body"
        out.append(Block(b.page, kind, section, b.text, round_bbox(b.bbox)))
    return out


def round_bbox(bbox: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """A box rounded to 0.01 pt for the output records."""
    return tuple(round(v, 2) for v in bbox)  # type: ignore[return-value]
