"""A parsed paper's reference list, split into entries.

The parser (:mod:`rag.corpus.parse`) already marks every block after a References/Bibliography
heading as ``references``; this module cuts those blocks into one entry per cited work. MuPDF
blocks do not follow entries: a block may hold one line of an entry, or the end of one entry and
the start of the next, or a whole column. So entries are cut from three signals, in order:

1. **Numbered lists** (``[1] ... [2] ...``): the markers ``[N]`` taken in sequence, wherever they
   sit in a block; a marker is accepted 1-3 above the last one, or ahead of the sequence when a
   column was read early (:func:`_sequence`), so a bracketed number inside an entry does not cut.
2. **Label lists** (``[Devlin et al.2019] ...``): a bracketed author-year label opens an entry.
3. **Author-year lists**: a block whose left edge sits on its column's margin opens an entry, one
   indented past it continues the previous one (the hanging indent of ACL, NeurIPS and ICLR
   styles); and inside a block, ``Surname, I.`` after a finished entry (one that holds a year and
   ends a sentence) opens one (AAAI and APA styles, whose columns MuPDF returns as one block).

The largest ``[N]`` of a numbered list is its true length, which measures the splitter
(:func:`numbered_count`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag.types import AsDict, Block, ParsedPaper

_MARKER = re.compile(r"\[(\d{1,3})\]")
_LABEL = re.compile(r"\[(?:[A-Z][^\[\]]{1,60}?(?:19|20)\d{2}[a-z]?|[A-Z][A-Za-z]+\d{2})\]")
#: "Surname, I." (optionally "Surname Surname, I. J.") followed by ";", ",", " and", " &" or a
#: year: how AAAI and APA entries open.
_AUTHOR_OPEN = re.compile(
    r"(?<=[.?!)] )(?=(?:[A-Z][\w'\u2019-]+(?: (?:[a-z]{1,3} )?[A-Z][\w'\u2019-]+)?), "
    r"(?:[A-Z]\.(?:\s?-?[A-Z]\.)*)(?:;|,| and\b| &| \(?(?:19|20)\d{2}))"
)
#: "First Last, First Last, and First Last. 2019." : how ACL entries open; a run of capitalised
#: name tokens (particles, and a name's tail after a line-end hyphen) with a comma or "and",
#: straight into the year.
_NAMES_OPEN = re.compile(
    r"(?<=[.?!)] )(?!In )(?=(?:(?:(?![a-z\d])[^\s,;]+|(?<=- )[a-z][^\s,;]*"
    r"|and|et|al\.?|van|von|der|de|den|la|le|da|di|du)(?:,? )){2,40}?(?:19|20)\d{2}[a-z]?\.)"
    r"(?=[^.]*?(?:,| and ))"
)
_YEAR = re.compile(r"\b(?:19|20)\d{2}[a-z]?\b")
#: How far past its column's margin a block's left edge must sit to continue an entry (points).
HANGING_INDENT_PT = 3.0
#: Numbered lists need this many markers in sequence before the marker splitter is trusted.
MIN_NUMBERED = 3


@dataclass(frozen=True, slots=True)
class Reference(AsDict):
    """One entry of a reference list.

    Attributes:
        index: 1-based position in the paper's list.
        text: the entry's text (marker included), whitespace collapsed.
        page: page where the entry starts.
        label: the number of a numbered list's marker (``"12"`` for ``[12]``), else "".
    """

    index: int
    text: str
    page: int
    label: str = ""


def reference_blocks(parsed: ParsedPaper) -> list[Block]:
    """The paper's ``references`` blocks in reading order (empty when it has no such section)."""
    return [b for b in parsed.blocks if b.kind == "references" and b.text.strip()]


def _sequence(text: str) -> list[tuple[int, int]]:
    """``(position, number)`` of the markers ``[N]`` that open entries, in text order.

    A marker continues the sequence 1, 2, 3, ... (1-3 above the last one). A column that the
    reading order placed early shows as markers ahead of the sequence: they are taken too when
    they run on from each other (``[33] [34]`` between ``[15]`` and ``[16]``), or when a number
    occurs once only, is within the list's length and opens an entry (after a full stop, before a
    capital: a displaced last entry); the sequence then resumes where it was.
    """
    marks = [(m.start(), int(m.group(1))) for m in _MARKER.finditer(text)]
    ends = {m.start(): m.end() for m in _MARKER.finditer(text)}

    def at_entry_start(pos: int) -> bool:
        before = text[:pos].rstrip()
        return (not before or before[-1] in '.)"\u201d') and text[ends[pos] :].lstrip()[
            :1
        ].isupper()

    counts: dict[int, int] = {}
    for _, n in marks:
        counts[n] = counts.get(n, 0) + 1
    limit = len(counts) + 3
    out: list[tuple[int, int]] = []
    used: set[int] = set()
    last = 0
    ahead = 0  # the last marker taken ahead of the sequence
    for i, (pos, n) in enumerate(marks):
        if n in used:
            continue
        nxt = marks[i + 1][1] if i + 1 < len(marks) else None
        if last < n <= last + 3 and (last > 0 or n == 1):
            last = n
        elif (
            last
            and n > last + 3
            and (
                (ahead and n == ahead + 1)
                or nxt == n + 1
                or (counts[n] == 1 and n <= limit and at_entry_start(pos))
            )
        ):
            ahead = n
        else:
            continue
        used.add(n)
        out.append((pos, n))
    return out


def numbered_count(blocks: Sequence[Block]) -> int:
    """The true length of a numbered list, its largest ``[N]``; 0 when the list is not numbered
    (fewer than :data:`MIN_NUMBERED` markers in sequence)."""
    text = " ".join(b.text for b in blocks)
    if len(_sequence(text)) < MIN_NUMBERED:
        return 0
    return max(int(n) for n in _MARKER.findall(text))


def _joined(blocks: Sequence[Block]) -> tuple[str, list[tuple[int, int]]]:
    """The blocks' texts joined by spaces, with ``(start offset, page)`` of every block."""
    parts: list[str] = []
    starts: list[tuple[int, int]] = []
    pos = 0
    for b in blocks:
        starts.append((pos, b.page))
        parts.append(b.text)
        pos += len(b.text) + 1
    return " ".join(parts), starts


def _page_at(starts: list[tuple[int, int]], pos: int) -> int:
    page = starts[0][1]
    for s, p in starts:
        if s > pos:
            break
        page = p
    return page


def _cut(text: str, cuts: list[int]) -> list[tuple[int, str]]:
    bounds = sorted({0, *cuts, len(text)})
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        piece = re.sub(r"\s+", " ", text[a:b]).strip()
        if piece:
            out.append((a, piece))
    return out


def _flush_starts(blocks: Sequence[Block]) -> list[bool]:
    """Whether each block's left edge sits on its column's margin (True) or is indented."""
    by_page: dict[int, list[Block]] = {}
    for b in blocks:
        by_page.setdefault(b.page, []).append(b)
    margin: dict[tuple[int, int], float] = {}

    def column(b: Block, mid: float) -> int:
        return int(b.bbox[0] >= mid)

    mids = {}
    for page, bs in by_page.items():
        mid = (min(b.bbox[0] for b in bs) + max(b.bbox[2] for b in bs)) / 2.0
        mids[page] = mid
        for b in bs:
            key = (page, column(b, mid))
            margin[key] = min(margin.get(key, b.bbox[0]), b.bbox[0])
    return [
        b.bbox[0] - margin[(b.page, column(b, mids[b.page]))] < HANGING_INDENT_PT for b in blocks
    ]


def _continues(prev: str, nxt: str) -> bool:
    """Whether ``nxt`` reads as the continuation of ``prev`` whatever the layout says."""
    prev = prev.rstrip()
    return (
        not prev
        or prev.endswith(("-", ",", ";", ":", "&", "(", " and", " of", " in", " the"))
        or nxt[:1].islower()
        or nxt[:1].isdigit()
        or not _YEAR.search(prev)
        # an entry ends with a full stop, a digit, a bracket or a URL; "and Jeffrey" does not
        or (prev[-1].isalpha() and not re.search(r"https?://\S*$", prev))
    )


def split_references(blocks: Sequence[Block]) -> list[Reference]:
    """Cut reference blocks into entries (see the module docstring for the signals)."""
    if not blocks:
        return []
    text, starts = _joined(blocks)
    seq = _sequence(text)
    if len(seq) >= MIN_NUMBERED:
        cuts = [pos for pos, _ in seq]
        pieces = _cut(text, cuts)
        labels = {pos: str(n) for pos, n in seq}
        # text before the first marker is no entry (a stray heading or page furniture)
        pieces = [(pos, piece) for pos, piece in pieces if pos in labels]
        return [
            Reference(i, piece, _page_at(starts, pos), labels[pos])
            for i, (pos, piece) in enumerate(pieces, start=1)
        ]
    cuts: list[int] = [m.start() for m in _LABEL.finditer(text)]
    if len(cuts) < MIN_NUMBERED:
        cuts = []
        flush = _flush_starts(blocks)
        entry = ""
        for (pos, _), is_flush, b in zip(starts, flush, blocks, strict=True):
            if entry and is_flush and not _continues(entry, b.text):
                cuts.append(pos)
                entry = ""
            entry = f"{entry} {b.text}"
        # Inside a block: an author list opening after a finished entry.
        opens = sorted({m.start() for r in (_AUTHOR_OPEN, _NAMES_OPEN) for m in r.finditer(text)})
        bounds = sorted({0, *cuts, len(text)})
        for a, b in zip(bounds, bounds[1:], strict=False):
            last = a
            for start in (s for s in opens if a < s < b):
                if _YEAR.search(text, last, start) and start - last >= 20:
                    cuts.append(start)
                    last = start
    return [
        Reference(i, piece, _page_at(starts, pos))
        for i, (pos, piece) in enumerate(_cut(text, cuts), start=1)
    ]


def paper_references(parsed: ParsedPaper) -> list[Reference]:
    """The entries of a parsed paper's reference list (empty when none was found)."""
    return split_references(reference_blocks(parsed))
