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
from dataclasses import dataclass
from datetime import datetime

from rapidfuzz import fuzz, process

from rag.errors import ConfigError
from rag.papers.ids import arxiv_ids, dois, via_doi
from rag.types import AsDict

#: The title score threshold (0-100) chosen on data by ``python -m rag.papers.measure``
#: (``outputs/bench/citations.json`` records the choice; a test holds the two equal).
TITLE_THRESHOLD = 88.5
#: Candidates below this partial_ratio are not aligned at all (far below any useful threshold).
_PREFILTER = 60.0
#: Placements of one title tried in an entry before giving up.
_PLACEMENTS = 3
#: A subtitle ("NAME: subtitle") is matched alone when it has at least this many words.
MIN_SUBTITLE_WORDS = 4
#: Months after the citing paper's pinned version that a cited paper's arXiv month may fall.
DATE_SLACK_MONTHS = 3
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

    Each paper is matched by its title and, for a title ``"NAME: subtitle"`` whose subtitle has at
    least :data:`MIN_SUBTITLE_WORDS` words, by the subtitle alone too (references often drop the
    name: "Retrieval augmented language model pre-training" for REALM).

    Args:
        titles: ``{arxiv_id: title}`` of the corpus.
        date_slack_months: how many months after the citing paper's pinned version a cited paper's
            arXiv month may fall (a paper posted to arXiv after its venue version can be cited
            before it appears there); None turns the date check off.
    """

    def __init__(
        self, titles: Mapping[str, str], *, date_slack_months: int | None = DATE_SLACK_MONTHS
    ) -> None:
        if not titles:
            raise ConfigError("TitleMatcher needs at least one corpus title")
        self.ids = list(titles)
        self.date_slack_months = date_slack_months
        self.forms: list[str] = []
        self.form_paper: list[str] = []
        for pid in self.ids:
            full = normalise_title(titles[pid])
            forms = [full]
            head, sep, sub = titles[pid].partition(":")
            sub_norm = normalise_title(sub)
            if sep and len(sub_norm.split()) >= MIN_SUBTITLE_WORDS and sub_norm != full:
                forms.append(sub_norm)
            for f in forms:
                self.forms.append(f)
                self.form_paper.append(pid)

    def _too_late(self, cited: str, citing_month: tuple[int, int] | None) -> bool:
        month = _month(cited)
        if self.date_slack_months is None or citing_month is None or month is None:
            return False
        y, m = citing_month
        latest = (
            y + (m - 1 + self.date_slack_months) // 12,
            (m - 1 + self.date_slack_months) % 12 + 1,
        )
        return month > latest

    def best(self, entry: str, citing_month: tuple[int, int] | None = None) -> TitleMatch | None:
        """The highest-scoring corpus title that passes the structural checks, or None."""
        toks, after = title_tokens(entry)
        flat = " ".join(toks)
        starts = list(itertools.accumulate((len(t) + 1 for t in toks[:-1]), initial=0))
        cands = process.extract(
            flat, self.forms, scorer=fuzz.partial_ratio, score_cutoff=_PREFILTER, limit=8
        )
        best: TitleMatch | None = None
        for _, _, i in cands:
            title, pid = self.forms[i], self.form_paper[i]
            if len(title) > len(flat):
                continue  # a fragment inside a title is no evidence of citing it
            if self._too_late(pid, citing_month):
                continue
            match = self._place(title, toks, after, starts, flat)
            if match is not None and (best is None or match[0] > best.score):
                best = TitleMatch(pid, match[0], match[1])
        return best

    @staticmethod
    def _place(
        title: str, toks: list[str], after: list[bool], starts: list[int], flat: str
    ) -> tuple[float, str] | None:
        """Score and window of the best placement of ``title`` that passes the checks; a
        placement that fails (a URL slug, a longer title) is masked and the next one tried."""
        words = title.split()
        work = flat
        for _ in range(_PLACEMENTS):
            al = fuzz.partial_ratio_alignment(title, work, processor=None)
            if al is None or al.score < _PREFILTER:
                return None
            span = _snap(toks, starts, al.dest_start, al.dest_end)
            if span is not None:
                lo, hi = span
                bounded = (lo == 0 or after[lo - 1]) and (hi == len(toks) - 1 or after[hi])
                # "corrective ..." is not "active ...": the edge words must agree
                edges = toks[lo].startswith(words[0][:3]) and toks[hi].endswith(words[-1][-3:])
                if bounded and edges:
                    window = " ".join(toks[lo : hi + 1])
                    return float(fuzz.ratio(title, window, processor=None)), window
            work = (
                work[: al.dest_start] + "\x00" * (al.dest_end - al.dest_start) + work[al.dest_end :]
            )
        return None


@dataclass(frozen=True, slots=True)
class Citation(AsDict):
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
