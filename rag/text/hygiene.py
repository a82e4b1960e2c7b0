"""Index hygiene: label a chunk ``toc``, ``references`` or ``body`` from its text.

A table of contents (``A.1 Reflection Tokens . . . . . . 17``) or a stray reference list carries a
paper's vocabulary without its content: BM25 and dense search both rank it for questions about the
topics it lists, and a cited ``. . . . 20`` answers nothing. The parser already marks the blocks
after a *References* heading as ``references`` and chunking leaves them out
(:func:`rag.text.chunk.paper_text`); what leaks through is reference entries the parser placed
under another heading (two-column pages where an appendix heading sits beside the end of the list)
and tables of contents, which no parser step looks for. The index build
(:func:`rag.index.build.index_corpus`) drops the chunks this module does not call ``body``;
chunking, the chunk cache and the paper desk (which reads reference *blocks* of the parse, not
chunks) are unchanged.

How a chunk is read. Its text is cut into *lines* (``\\n`` and ``\\n\\n``: a parsed block or a
line of one). A line is

* a **TOC line** when it ends in a dot leader and a page number (four or more dots, single spaces
  allowed between them, then 1-4 digits: ``Analysis . . . . 20``, ``Setup ....... 12``), or when it
  is a numbered heading followed by a page number (``3.1 Task Definition 9``: a section number or
  letter, a title without digits, a number of at most three digits);
* a **reference line** when it carries a strong reference signal: an entry-year (``Bowman.
  2019b.``, ``In NeurIPS, 2017.``, ``Vaswani, A. (2017).``) or a venue phrase (``In Proceedings``,
  ``arXiv preprint``, ``Conference on``, ``Journal of``, ``pages 12-20``, ``CoRR``, ``abs/``,
  ``arXiv:2301.12652``, ``doi:``, ...), or a weak one: it opens with ``[12]`` and a capital or with
  a list of two or more personal names (``Alex Wang, Amanpreet Singh, Julian Michael, Felix``:
  entries wrap, and their first line often holds nothing but authors).

The decision shares characters (non-space) between the kinds of line, so a long paragraph counts
for more than a lone page number:

* ``toc`` when TOC lines hold at least half of the characters (:data:`MAJORITY`) and there are at
  least three of them (:data:`MIN_TOC_LINES`), with at least one dot leader or a *Contents* line:
  a majority because a chunk that is mostly a table of contents is what a reader would call one (a
  chunk that ends a TOC and opens the introduction stays body, and so keeps the introduction
  searchable); three lines because one or two dotted lines occur in tables and prompts; the leader
  or *Contents* requirement because ``<number> <title> <number>`` alone also describes table rows.
* ``references`` when reference lines hold at least half of the characters and the chunk has at
  least three strong signals (:data:`MIN_REF_SIGNALS`): an entry is ~30 words with one year and
  usually one venue, so a chunk that is mostly entries (a 254-token chunk holds five to eight) has
  well over three, while a body paragraph that cites ``[3]`` or ``(Dai et al., 2019)`` has none
  (a parenthesised citation is not an entry-year, and bracketed numbers count only at a line's
  start). Under a *References*/*Bibliography* section title the bar is one strong signal: the
  heading already says what follows, but the title alone is not enough, because the parser keeps
  the figure captions that a two-column page places after that heading, and those are body.
* ``body`` otherwise.

The thresholds are majorities and minimum counts argued from what a TOC line and a reference
entry look like; they were set before any chunk was labelled and are fitted neither to the labels
nor to any gold answer. ``data/hygiene/labels.jsonl`` holds labels written by reading each chunk
of a seeded sample of the real corpus (every flagged chunk, the unflagged chunks nearest the
thresholds, a random draw of the rest), independent of the classifier's character shares and
thresholds: a mixed chunk is labelled by what most of its text is, as a reader sees it, so on
mixed chunks the labels share the majority idea, not the measurement. ``python -m
rag.bench.hygiene`` reports precision and recall against them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rag.types import Chunk

#: Bump whenever a change here changes a label: index caches key on it.
HYGIENE_VERSION = "1"

Label = Literal["toc", "references", "body"]
LABELS: tuple[Label, ...] = ("toc", "references", "body")

#: Share of a chunk's non-space characters a kind of line must hold to name the chunk.
MAJORITY = 0.5
#: TOC lines a chunk needs before it can be a table of contents.
MIN_TOC_LINES = 3
#: Strong reference signals (entry-years, venue phrases) a chunk needs to be a reference list.
MIN_REF_SIGNALS = 3
#: The same under a References/Bibliography section title.
MIN_REF_SIGNALS_UNDER_HEADING = 1

_LEADER_LINE = re.compile(r"(?:\.[ ]?){4,}[ ]*\d{1,4}[ ]*$")
_HEADING_PAGE_LINE = re.compile(
    r"^(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*\.?[ ]+[A-Za-z][^\d\n]{1,100}?[ ]\d{1,3}$"
)
_CONTENTS_LINE = re.compile(r"^(?:table of )?contents$", re.IGNORECASE)
_REF_HEADING = re.compile(r"^(?:[\dA-Z]{1,3}\.?\s+)?(?:references|bibliography)\b", re.IGNORECASE)

_YEAR = r"(?:19[5-9]\d|20[0-4]\d)[a-z]?"
_ENTRY_YEAR = re.compile(
    rf"(?:(?<=[.,] )|(?<=[.,]\n)|^){_YEAR}\.(?=\s|$)"  # "Bowman. 2019b." / "NeurIPS, 2017."
    rf"|[A-Z]\.[ ]\({_YEAR}\)\.",  # "Vaswani, A. (2017)."
    re.MULTILINE,
)
_VENUE = re.compile(
    r"\bIn Proceedings\b|\bProceedings of\b|\barXiv preprint\b|\barXiv:\s?\d{4}\.\d{4,5}"
    r"|\bAdvances in Neural Information Processing Systems\b|\bConference on\b|\bJournal of\b"
    r"|\bTransactions on\b|\bpages \d+\s?[-–]\s?\d+|\bpp\.\s?\d+|\bCoRR\b|\babs/\d{4}\.\d{4,5}"
    r"|\bAssociation for Computational Linguistics\b|\bdoi:|\bURL\s+https?://"
)
_NUMBERED_ENTRY = re.compile(r"^\[\d{1,3}\][ ]+[A-Z]")
_NAME = r"(?:[A-Z][\w'’\-]*\.?[ ]){0,2}[A-Z][\w'’\-]+"
_AUTHOR_LIST = re.compile(rf"^{_NAME},[ ]{_NAME}(?:,|[ ]and[ ]|$)")


@dataclass(frozen=True, slots=True)
class Signals:
    """What :func:`classify` read in one chunk (character shares over non-space characters)."""

    chars: int
    toc_share: float
    toc_lines: int
    leader_lines: int
    contents_line: bool
    ref_share: float
    ref_signals: int
    under_ref_heading: bool


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.split("\n") if ln.strip()]


def _weight(line: str) -> int:
    """Non-space characters of ``line`` (``str.split`` splits on exactly what ``str.isspace``
    calls space, in C: every chunk of every ``rag ask`` passes through here)."""
    return len("".join(line.split()))


def signals(text: str, section: str = "") -> Signals:
    """The line shares and counts :func:`classify` decides on (see the module docstring)."""
    lines = _lines(text)
    weights = [_weight(ln) for ln in lines]
    total = sum(weights)
    toc_w = ref_w = toc_n = leader_n = strong = 0
    contents = False
    for ln, w in zip(lines, weights, strict=True):
        leader = bool(_LEADER_LINE.search(ln))
        if leader or _HEADING_PAGE_LINE.match(ln):
            toc_w += w
            toc_n += 1
            leader_n += leader
        contents = contents or bool(_CONTENTS_LINE.match(ln))
        n_strong = len(_ENTRY_YEAR.findall(ln)) + len(_VENUE.findall(ln))
        strong += n_strong
        if n_strong or _NUMBERED_ENTRY.match(ln) or _AUTHOR_LIST.match(ln):
            ref_w += w
    return Signals(
        chars=total,
        toc_share=toc_w / total if total else 0.0,
        toc_lines=toc_n,
        leader_lines=leader_n,
        contents_line=contents,
        ref_share=ref_w / total if total else 0.0,
        ref_signals=strong,
        under_ref_heading=bool(_REF_HEADING.match(section.strip())),
    )


def decide(s: Signals) -> Label:
    """The label for measured :class:`Signals` (the thresholds of the module docstring)."""
    if (
        s.toc_share >= MAJORITY
        and s.toc_lines >= MIN_TOC_LINES
        and (s.leader_lines >= 1 or s.contents_line)
    ):
        return "toc"
    need = MIN_REF_SIGNALS_UNDER_HEADING if s.under_ref_heading else MIN_REF_SIGNALS
    if s.ref_share >= MAJORITY and s.ref_signals >= need:
        return "references"
    return "body"


def classify(text: str, section: str = "") -> Label:
    """``"toc"``, ``"references"`` or ``"body"`` for a chunk's text and its section title."""
    return decide(signals(text, section))


def split_body(
    chunks: Iterable[Chunk], *, enabled: bool = True
) -> tuple[list[Chunk], dict[str, int]]:
    """The chunks labelled ``body`` (order kept) and how many of each label were seen.

    With ``enabled=False`` every chunk is kept and nothing is classified (counts are then only
    ``{"body": n}``), the behaviour before hygiene.
    """
    items = list(chunks)
    if not enabled:
        return items, {"toc": 0, "references": 0, "body": len(items)}
    counts = dict.fromkeys(LABELS, 0)
    kept = []
    for c in items:
        label = classify(c.text, c.section)
        counts[label] += 1
        if label == "body":
            kept.append(c)
    return kept, counts
