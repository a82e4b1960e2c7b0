"""Resolve a reference entry to the work it cites: by an id written in it, else by a corpus title.

Order, precision first:

1. an arXiv id written in the entry (``arXiv:``, ``abs/``, an arxiv.org URL) — exact, in the
   corpus or not (``how="arxiv_id"``; ``"doi"`` when written only as arXiv's DOI);
2. otherwise a corpus title found in the entry (``how="title"``). rapidfuzz's ``partial_ratio``
   alignment finds the window of the entry (casefolded alphanumeric tokens) closest to the title;
   the window is snapped to whole tokens and scored by ``ratio`` against the title (0-100). It is
   accepted only when four structural checks pass: the window sits between title boundaries (a
   full stop, comma or quote, or an end of the entry, on both sides); its first and last words
   agree with the title's ("corrective retrieval augmented generation" is not "active retrieval
   augmented generation"); the entry is at least as long as the title; and the cited paper's arXiv
   month is not after the citing paper's pinned version (a paper cannot cite later work);
3. otherwise a DOI (not arXiv's) written in the entry, kept as ``doi:<doi>`` outside the corpus.

The score threshold of step 2 is not set by hand: :func:`rag.papers.measure` chooses it on half
of the corpus's papers, on entries whose arXiv id is known and hidden, and reports the other half.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime

from rapidfuzz import fuzz, process

from rag.errors import ConfigError
from rag.papers.ids import arxiv_ids, dois, via_doi

#: The title score threshold (0-100) chosen on data by ``python -m rag.papers.measure``
#: (``outputs/bench/citations.json`` records the choice; a test holds the two equal).
TITLE_THRESHOLD = 88.0
#: Candidates below this partial_ratio are not aligned at all (far below any useful threshold).
_PREFILTER = 60.0
#: Characters that close a title in a reference.
_BOUNDARY = '.,;?!"\u201c\u201d\u2018\u2019'
_TOKEN = re.compile(r"[^\W_]+|[" + re.escape(_BOUNDARY) + "]")


def title_tokens(text: str) -> tuple[list[str], list[bool]]:
    """Casefolded alphanumeric tokens, and for each whether a title boundary (full stop, comma,
    quote, ...) follows it."""
    toks: list[str] = []
    after: list[bool] = []
    text = re.sub(r"(?<=[^\W\d_])- (?=[a-z])", "", text)  # a word broken at a line end
    for m in _TOKEN.finditer(text.casefold()):
        if m.group(0) in _BOUNDARY:
            if after:
                after[-1] = True
        else:
            toks.append(m.group(0))
            after.append(False)
    return toks, after


def normalise_title(text: str) -> str:
    """The text titles are matched on: casefolded alphanumeric tokens joined by single spaces."""
    return " ".join(title_tokens(text)[0])


def _month(arxiv_id: str) -> tuple[int, int] | None:
    m = re.match(r"(\d{2})(\d{2})\.", arxiv_id) or re.match(r"[a-z-]+/(\d{2})(\d{2})", arxiv_id)
    if not m:
        return None
    yy, mm = int(m.group(1)), int(m.group(2))
    return (2000 + yy if yy < 91 else 1900 + yy, mm)


def stamp_month(stamp_date: str | None) -> tuple[int, int] | None:
    """``(year, month)`` of a manifest ``stamp_date`` such as ``"7 Sep 2013"``; None if absent."""
    if not stamp_date:
        return None
    try:
        d = datetime.strptime(stamp_date.strip(), "%d %b %Y")
    except ValueError:
        return None
    return (d.year, d.month)


@dataclass(frozen=True, slots=True)
class TitleMatch:
    """The best corpus title found in an entry: its paper, score (0-100) and aligned text."""

    arxiv_id: str
    score: float
    matched: str


def _snap(toks: list[str], starts: list[int], start: int, end: int) -> tuple[int, int] | None:
    """The tokens ``i..j`` that the aligned window ``[start, end)`` covers more than half of."""
    covered = [
        k
        for k, (s, t) in enumerate(zip(starts, toks, strict=True))
        if 2 * (min(end, s + len(t)) - max(start, s)) > len(t)
    ]
    return (covered[0], covered[-1]) if covered else None


class TitleMatcher:
    """Finds corpus titles in reference entries.

    Args:
        titles: ``{arxiv_id: title}`` of the corpus.
    """

    def __init__(self, titles: Mapping[str, str]) -> None:
        if not titles:
            raise ConfigError("TitleMatcher needs at least one corpus title")
        self.ids = list(titles)
        self.titles = [normalise_title(titles[i]) for i in self.ids]
        self.words = [t.split() for t in self.titles]

    def best(self, entry: str, citing_month: tuple[int, int] | None = None) -> TitleMatch | None:
        """The highest-scoring corpus title that passes the structural checks, or None."""
        toks, after = title_tokens(entry)
        flat = " ".join(toks)
        starts = list(itertools.accumulate((len(t) + 1 for t in toks[:-1]), initial=0))
        cands = process.extract(
            flat, self.titles, scorer=fuzz.partial_ratio, score_cutoff=_PREFILTER, limit=8
        )
        best: TitleMatch | None = None
        for _, _, i in cands:
            title = self.titles[i]
            if len(title) > len(flat):
                continue  # a fragment inside a title is no evidence of citing it
            cited = _month(self.ids[i])
            if citing_month and cited and cited > citing_month:
                continue
            al = fuzz.partial_ratio_alignment(title, flat, processor=None)
            span = _snap(toks, starts, al.dest_start, al.dest_end) if al is not None else None
            if span is None:
                continue
            lo, hi = span
            if not ((lo == 0 or after[lo - 1]) and (hi == len(toks) - 1 or after[hi])):
                continue  # the window does not sit between title boundaries
            words = self.words[i]
            if not (toks[lo].startswith(words[0][:3]) and toks[hi].endswith(words[-1][-3:])):
                continue  # "corrective ..." is not "active ...": the edge words must agree
            window = " ".join(toks[lo : hi + 1])
            score = float(fuzz.ratio(title, window, processor=None))
            if best is None or score > best.score:
                best = TitleMatch(self.ids[i], score, window)
        return best


@dataclass(frozen=True, slots=True)
class Citation:
    """One resolved link of the citation graph (a row of ``citations.jsonl``).

    Attributes:
        citing: arXiv id of the citing corpus paper.
        cited: arXiv id (in the corpus or not), or ``doi:<doi>``.
        in_corpus: whether ``cited`` is a paper of the corpus.
        how: ``arxiv_id``, ``doi`` or ``title``.
        score: 1.0 for an id written in the entry; the title score / 100 for a title match.
        ref_index: the entry's position in the citing paper's reference list.
        reference: the entry's raw text.
    """

    citing: str
    cited: str
    in_corpus: bool
    how: str
    score: float
    ref_index: int
    reference: str

    def to_dict(self) -> dict:
        return asdict(self)


def resolve_entry(
    citing: str,
    index: int,
    text: str,
    matcher: TitleMatcher,
    *,
    threshold: float = TITLE_THRESHOLD,
    citing_month: tuple[int, int] | None = None,
) -> list[Citation]:
    """The links one reference entry makes (several when a merged entry carries several ids).

    Self-citations (the citing paper's own id) are dropped.
    """
    if not 0.0 <= threshold <= 100.0:
        raise ConfigError(f"title threshold must lie in [0, 100], got {threshold!r}")
    corpus = set(matcher.ids)
    ids = [a for a in arxiv_ids(text) if a != citing]
    if ids:
        return [
            Citation(
                citing, a, a in corpus, "doi" if via_doi(text, a) else "arxiv_id", 1.0, index, text
            )
            for a in ids
        ]
    if arxiv_ids(text):
        return []  # the entry names only the citing paper itself
    m = matcher.best(text, citing_month)
    if m is not None and m.score >= threshold and m.arxiv_id != citing:
        return [Citation(citing, m.arxiv_id, True, "title", round(m.score / 100, 4), index, text)]
    return [
        Citation(citing, f"doi:{d}", False, "doi", 1.0, index, text)
        for d in dois(text)
        if not d.startswith("10.48550/")
    ]
