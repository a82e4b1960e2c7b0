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

A chunk kept as ``body`` can still hold a *run* of a table of contents (the end of one where the
introduction starts: ``. . . 20 C Results 20 C.1 Analysis . . . 20``), which an answer would
show as a source and BM25 would match on. :func:`strip_toc_runs` cuts such runs out of the text
and keeps the rest. A run is a maximal sequence of lines that are each a TOC line (above, or the
looser ``D Full List of Instructions for GPT-4 21``, whose title holds a digit), a bare page
number, a numbered heading without a page (``C Results``, its page on the next line), a
*Contents* line or a title cut off in its dot leader (``2.3 Setup . . .``); trailing headings
without a page (the body's own ``A SELF-RAG DETAILS`` after the last entry) are not part of it.
A run is cut when it holds at least :data:`MIN_RUN_ENTRIES` entries (TOC lines and bare page
numbers) and a dot leader or a *Contents* line, the chunk rule's guard against table rows.
:func:`repair_chunks` does that and joins the words a PDF split across blocks
(:mod:`rag.text.hyphens`) in the chunks the index keeps; labels are read on the unrepaired text,
the text the hand labels were written on.

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
from dataclasses import dataclass, replace
from typing import Literal

from rag.text.hyphens import Join, join_splits, vocabulary
from rag.types import Chunk

#: Bump whenever a change here changes a label or an indexed chunk's text: index caches key on it.
#: 2: TOC runs inside body chunks stripped, block-boundary hyphen splits joined.
HYGIENE_VERSION = "2"

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
#: Entries (TOC lines, bare page numbers) a run of TOC lines inside a chunk needs to be cut.
MIN_RUN_ENTRIES = 2

_LEADER_LINE = re.compile(r"(?:\.[ ]?){4,}[ ]*\d{1,4}[ ]*$")
_HEADING_PAGE_LINE = re.compile(
    r"^(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*\.?[ ]+[A-Za-z][^\d\n]{1,100}?[ ]\d{1,3}$"
)
_LOOSE_ENTRY = re.compile(
    r"^(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*\.?[ ]+[A-Za-z][^\n]{1,100}?[ ]\d{1,3}$"
)
_BARE_HEADING = re.compile(r"^(?:[A-Z]|\d{1,2})(?:\.\d{1,2})*\.?[ ]+[A-Z][^\n]{0,100}$")
_PAGE_ONLY = re.compile(r"^\d{1,3}$")
_CUT_LEADER = re.compile(r"(?:\.[ ]?){3,}$")
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
    chunks: Iterable[Chunk], *, enabled: bool = True, repair: bool = True
) -> tuple[list[Chunk], dict[str, int]]:
    """The chunks labelled ``body`` (order kept), repaired unless ``repair=False``
    (:func:`repair_chunks`, each paper's vocabulary read from all of its chunks), and how many of
    each label were seen; a body chunk that was nothing but a TOC run counts as ``toc``.

    With ``enabled=False`` every chunk is kept as it is and nothing is classified (counts are then
    only ``{"body": n}``), the behaviour before hygiene.
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
    if repair:
        n = len(kept)
        kept, _ = repair_chunks(kept, vocab_from=items)
        counts["toc"] += n - len(kept)
        counts["body"] = len(kept)
    return kept, counts


# -- repairs inside kept chunks ------------------------------------------------------------------


def _run_kind(line: str) -> str:
    """``"leader"``, ``"entry"``, ``"page"``, ``"contents"``, ``"cut"``, ``"heading"`` for a line
    that can belong to a TOC run, ``""`` for one that cannot."""
    if _LEADER_LINE.search(line):
        return "leader"
    if _HEADING_PAGE_LINE.match(line) or _LOOSE_ENTRY.match(line):
        return "entry"
    if _PAGE_ONLY.match(line):
        return "page"
    if _CONTENTS_LINE.match(line):
        return "contents"
    if _CUT_LEADER.search(line):
        return "cut"
    if _BARE_HEADING.match(line):
        return "heading"
    return ""


def strip_toc_runs(text: str) -> tuple[str, list[str]]:
    """``text`` without its runs of table-of-contents lines (the module docstring says which),
    and the runs cut (each as its lines joined by ``"\n"``); text with no run comes back as is."""
    lines = [(m.start(), m.end(), m.group().strip()) for m in re.finditer(r"[^\n]+", text)]
    lines = [ln for ln in lines if ln[2]]
    kinds = [_run_kind(ln[2]) for ln in lines]
    cuts: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if not kinds[i]:
            i += 1
            continue
        j = i
        while j < len(lines) and kinds[j]:
            j += 1
        end = j
        while end > i and kinds[end - 1] == "heading":
            end -= 1
        run = kinds[i:end]
        entries = sum(k in ("leader", "entry", "page") for k in run)
        if entries >= MIN_RUN_ENTRIES and ("leader" in run or "contents" in run):
            cuts.append((i, end))
        i = j
    if not cuts:
        return text, []
    out, runs, pos = [], [], 0
    for a, b in cuts:
        start = lines[a][0]
        stop = lines[b][0] if b < len(lines) else len(text)
        if b == len(lines):  # the run ends the chunk: the break before it goes too
            start = lines[a - 1][1] if a > 0 else 0
        out.append(text[pos:start])
        runs.append("\n".join(ln[2] for ln in lines[a:b]))
        pos = stop
    out.append(text[pos:])
    return "".join(out).strip(), runs


@dataclass(frozen=True, slots=True)
class Repair:
    """What :func:`repair_chunks` changed in one chunk's text."""

    chunk_id: str
    paper_id: str
    toc_runs: tuple[str, ...]
    joins: tuple[Join, ...]


def repair_chunks(
    chunks: Iterable[Chunk], vocab_from: Iterable[Chunk] | None = None
) -> tuple[list[Chunk], list[Repair]]:
    """The chunks with TOC runs cut (:func:`strip_toc_runs`) and block-boundary hyphen splits
    joined (:func:`rag.text.hyphens.join_splits`, each paper's vocabulary read from the texts of
    its chunks in ``vocab_from``, default ``chunks``), order and ids kept; a chunk left empty by
    the cut is dropped. Also returns one :class:`Repair` per changed chunk."""
    items = list(chunks)
    texts: dict[str, list[str]] = {}
    for c in items if vocab_from is None else vocab_from:
        texts.setdefault(c.paper_id, []).append(c.text)
    vocabs = {p: vocabulary(ts) for p, ts in texts.items()}
    out: list[Chunk] = []
    repairs: list[Repair] = []
    for c in items:
        text, runs = strip_toc_runs(c.text)
        text, joins = join_splits(text, vocabs.get(c.paper_id) or vocabulary([c.text]))
        if runs or joins:
            repairs.append(Repair(c.chunk_id, c.paper_id, tuple(runs), tuple(joins)))
        if text.strip():
            out.append(replace(c, text=text) if text != c.text else c)
    return out, repairs
