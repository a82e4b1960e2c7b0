"""Lines and blocks of a PDF page, and the text of a block: the parser's first and last steps.

:func:`page_lines` reads MuPDF's ``page.get_text("dict")`` into cleaned lines (ligatures expanded,
NFKC, plain spaces) and merges fragments on one baseline; :func:`join_lines` joins a block's lines,
dropping a line-end hyphen unless the paper itself spells the word with a hyphen more often than
without (counted by :func:`vocabulary`). :class:`RawBlock` is the record the layout steps of
:mod:`rag.corpus.pdf_layout` order and classify.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from rag.text.normalize import expand_ligatures, plain_punctuation
from rag.types import BlockKind

if TYPE_CHECKING:  # PyMuPDF is imported where a PDF is read: loading a cached parse needs none
    import pymupdf

_BOLD_FONT = re.compile(
    r"bold|black|heavy|semibold|demi|-medi|\bcmbx|^cmbx|sfbx|lmroman\d+-bold", re.I
)
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


@dataclass(slots=True)
class Line:
    """One text line: its cleaned text, box, mean font size, style and orientation."""

    text: str
    bbox: tuple[float, float, float, float]
    size: float
    bold: bool
    horizontal: bool


@dataclass(slots=True)
class RawBlock:
    """A block of lines on one page, with the kind the layout steps give it."""

    page: int
    lines: list[Line]
    kind: BlockKind = "body"
    text: str = ""

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        """The box around every line."""
        return (
            min(ln.bbox[0] for ln in self.lines),
            min(ln.bbox[1] for ln in self.lines),
            max(ln.bbox[2] for ln in self.lines),
            max(ln.bbox[3] for ln in self.lines),
        )

    @property
    def size(self) -> float:
        """Mean font size, weighted by characters."""
        n = sum(len(ln.text) for ln in self.lines) or 1
        return sum(ln.size * len(ln.text) for ln in self.lines) / n


def clean_text(text: str, nfkc: bool) -> str:
    """Ligatures expanded, optionally NFKC, plain punctuation, single spaces."""
    text = expand_ligatures(text)
    if nfkc:
        text = unicodedata.normalize("NFKC", text)
    text = plain_punctuation(text).replace("\t", " ")
    return re.sub(r" {2,}", " ", text)


@lru_cache(maxsize=1024)
def is_bold(flags: int, font: str) -> bool:
    """Whether a span is bold, by MuPDF's bold flag or a bold-looking font name."""
    return bool(flags & 16) or bool(_BOLD_FONT.search(font))


def page_lines(page: pymupdf.Page, nfkc: bool) -> list[list[Line]]:
    import pymupdf

    """The page's MuPDF blocks as lists of cleaned lines (same-baseline fragments merged)."""
    flags = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
    out = []
    for blk in page.get_text("dict", flags=flags)["blocks"]:
        if blk.get("type", 0) != 0:
            continue
        lines: list[Line] = []
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
                if n and is_bold(sp["flags"], sp["font"]):
                    bold_chars += n
            if not total:
                continue
            text = clean_text("".join(parts), nfkc)
            size = weighted / total
            dx, dy = ln["dir"]
            lines.append(
                Line(
                    text=text.strip(),
                    bbox=tuple(ln["bbox"]),
                    size=size,
                    bold=bold_chars >= 0.8 * total,
                    horizontal=abs(dy) < 1e-3 and dx > 0,
                )
            )
        out.append(merge_baselines(lines, page.rect.width / 2.0))
    return [b for b in out if b]


def merge_baselines(lines: list[Line], mid: float) -> list[Line]:
    """Merge horizontal line fragments sharing a baseline ("3" + "Method" → "3 Method").

    Table cells on one row merge too (MuPDF put them in one block), but two lines facing each
    other across the column gutter at ``mid`` stay apart unless they nearly touch.
    """
    merged: list[Line] = []
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
            merged[-1] = Line(
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


def vocabulary(pages: list[list[RawBlock]]) -> Counter[str]:
    """How often the paper spells each word (casefolded, hyphenated compounds kept whole)."""
    vocab: Counter[str] = Counter()
    for blocks in pages:
        for b in blocks:
            for ln in b.lines:
                vocab.update(w.casefold() for w in _WORD.findall(ln.text))
    return vocab


def join_lines(lines: list[str], vocab: Counter[str], keep_compounds: bool) -> str:
    """Join a block's lines with spaces, resolving line-end hyphens (see the module docstring)."""
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
