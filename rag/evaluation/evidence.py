"""Fuzzy evidence matching, and parse quality measured as "is the evidence in the parsed text?".

:func:`locate` finds a quote (a sentence or a whole paragraph) in a text although the two were
extracted differently: both sides are reduced to :func:`rag.text.normalize.match_key` (letters and
digits, casefolded), an exact substring search runs first (most quotes hit here, in microseconds),
and only then a fuzzy search with RapidFuzz's ``partial_ratio_alignment`` (best-aligned window,
normalised Indel similarity, 0-100). A cheap word-overlap filter skips texts that cannot reach the
threshold, so matching ~170 quotes against ~10k chunks stays fast.

Parse quality follows QASPER's idea (Dasigi et al., 2021, "A Dataset of Information-Seeking
Questions and Answers Anchored in Research Papers"): human annotators selected evidence
paragraphs from the paper text; a good parse contains them. :func:`evidence_found` reports the
found rate of those paragraphs and of the gold quotes (plus, for gold, whether the quote is on the
annotated page), with every miss and its best fuzzy score. :func:`evidence_intact` asks the same
question of chunks (is each quote inside one chunk?), and the chunk qrels of
:mod:`rag.evaluation.gold` use :func:`contains` too: one matcher for 01, 02, 04 and the qrels.
Evidence items come from the gold loaders (:func:`rag.evaluation.gold.evidence_items`,
:func:`rag.evaluation.gold.qasper_evidence_items`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

import pandas as pd
from rapidfuzz import fuzz
from rapidfuzz.distance import LCSseq

from rag.text.normalize import match_key, match_key_with_offsets
from rag.types import Chunk, ParsedPaper

logger = logging.getLogger(__name__)

#: Default similarity (0-100) above which a quote counts as present.
DEFAULT_THRESHOLD = 90.0
#: Kinds of blocks that make up "the parsed text" for evidence matching.
TEXT_KINDS = frozenset({"heading", "body", "caption", "footnote", "references"})
_MIN_FILTER_WORD = 4
_MIN_FILTER_WORDS = 5
_N_REGIONS = 3
# A quote at threshold T needs >= T/100 - this share of its words in the text; the lowest share
# among the 312 matching (quote, 1000-char window) pairs of the corpus is 0.71 at T = 90.
_OVERLAP_SLACK = 0.25


@dataclass(frozen=True, slots=True)
class Match:
    """Where a quote was found: ``text[start:end]`` and its similarity (0-100, 100 = exact)."""

    start: int
    end: int
    score: float


def _word_overlap(qkey: str, tkey: str) -> float:
    """Fraction of the quote's words (of 4+ characters) that occur in the text (1.0 if < 5)."""
    words = _words(qkey, _MIN_FILTER_WORD)
    if len(words) < _MIN_FILTER_WORDS:
        return 1.0  # too few words to judge by; short quotes are cheap to align anyway
    tset = _words(tkey, 1)
    return sum(w in tset for w in words) / len(words)


@lru_cache(maxsize=32768)
def _words(key: str, min_len: int) -> frozenset[str]:
    """The distinct words of a match key (cached: chunks are tested against many quotes)."""
    return frozenset(w for w in key.split() if len(w) >= min_len)


def _regions(qkey: str, tkey: str) -> list[tuple[int, int]]:
    """Candidate regions of ``tkey`` to align: all of it, or the windows sharing most words.

    Aligning a long quote against a whole paper costs O(len(text) * len(quote) / 64); ranking
    windows of twice the quote length by shared words first keeps that to a few small alignments.
    """
    n = len(qkey)
    if len(tkey) <= 3 * n + 200:
        return [(0, len(tkey))]
    words = set(qkey.split())
    step = max(n, 100)
    ranked = []
    for a in range(0, len(tkey), step):
        b = min(len(tkey), a + 2 * step)
        ranked.append((-len(words.intersection(tkey[a:b].split())), a, b))
        if b == len(tkey):
            break
    ranked.sort()
    return [(a, b) for _, a, b in ranked[:_N_REGIONS]]


def _coverage(qkey: str, tkey: str, w0: int, w1: int) -> tuple[float, int, int] | None:
    """Coverage of ``qkey`` by ``tkey[w0:w1]`` widened by half the quote on each side.

    A side is widened once more when the matched span reaches it (the text holds more inserted
    characters than the first widening allowed for); unrelated text scores 60-70 this way.
    Characters of a quote aligned in a window, not the share of a question's terms a text holds
    (:func:`rag.text.coverage.term_coverage`).
    """
    n = len(qkey)
    lo, hi = max(0, w0 - n // 2), min(len(tkey), w1 + n // 2)
    for _ in range(2):
        window = tkey[lo:hi]
        lcs = LCSseq.similarity(qkey, window)
        equal = [op for op in LCSseq.opcodes(qkey, window) if op.tag == "equal"]
        if not equal:
            return None
        start, end = lo + equal[0].dest_start, lo + equal[-1].dest_end
        grow_lo = start == lo and lo > 0
        grow_hi = end == hi and hi < len(tkey)
        if not (grow_lo or grow_hi):
            break
        lo = max(0, lo - n // 2) if grow_lo else lo
        hi = min(len(tkey), hi + n // 2) if grow_hi else hi
    return 100.0 * lcs / n, start, end


def _score_key(qkey: str, tkey: str, threshold: float) -> tuple[float, int, int] | None:
    """Best (score, key_start, key_end) of ``qkey`` inside ``tkey`` if it reaches ``threshold``.

    The score is the quote's coverage: ``100 * LCS(quote, window) / len(quote)``, where the
    window is the best ``partial_ratio`` alignment widened (see :func:`_coverage`). Characters
    the PDF text has in addition (citation markers, inline math, footnote marks) cost nothing;
    quote characters missing from the text do.
    """
    if not qkey or not tkey:
        return None
    pos = tkey.find(qkey)
    if pos >= 0:
        return 100.0, pos, pos + len(qkey)
    n = len(qkey)
    best: tuple[float, int, int] | None = None
    for a, b in _regions(qkey, tkey):
        region = tkey[a:b]
        if len(region) <= n:
            w0, w1 = a, b
        else:
            al = fuzz.partial_ratio_alignment(qkey, region)
            w0, w1 = a + al.dest_start, a + al.dest_end
        found = _coverage(qkey, tkey, w0, w1)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    if best is None or best[0] < threshold:
        return None
    return best


def locate(quote: str, text: str, threshold: float = DEFAULT_THRESHOLD) -> Match | None:
    """Find ``quote`` in ``text`` (exact after normalisation, else fuzzy) or return None.

    Args:
        quote: the passage to look for.
        text: where to look (a chunk, a page, a whole paper).
        threshold: minimum similarity 0-100 (``partial_ratio`` on the match keys).

    Returns:
        The span of ``text`` that matches (character offsets into ``text``) and the score.
    """
    if not 0.0 <= threshold <= 100.0:
        raise ValueError(f"threshold must lie in [0, 100], got {threshold!r}")
    qkey = match_key(quote)
    tkey = match_key(text)
    if not qkey or not tkey:
        return None
    if qkey not in tkey and _word_overlap(qkey, tkey) < threshold / 100.0 - _OVERLAP_SLACK:
        return None
    found = _score_key(qkey, tkey, threshold)
    if found is None:
        return None
    score, ks, ke = found
    _, offsets = match_key_with_offsets(text)
    start = offsets[ks]
    end = offsets[ke - 1] + 1 if ke > ks else start
    return Match(start=start, end=end, score=float(score))


def contains(quote: str, text: str, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Whether ``text`` holds ``quote`` with score at least ``threshold`` (see :func:`locate`)."""
    qkey = match_key(quote)
    tkey = match_key(text)
    if not qkey or not tkey:
        return False
    if qkey in tkey:
        return True
    if _word_overlap(qkey, tkey) < threshold / 100.0 - _OVERLAP_SLACK:
        return False
    return _score_key(qkey, tkey, threshold) is not None


def best_score(quote: str, text: str) -> float:
    """The best similarity (0-100) of ``quote`` anywhere in ``text``, with no threshold."""
    found = _score_key(match_key(quote), match_key(text), 0.0)
    return float(found[0]) if found else 0.0


# --- evidence items and their loaders -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    """One passage that should be in a parsed paper.

    ``page`` is the annotated 1-based page (gold) or None (QASPER gives no pages).
    """

    source: str
    qid: str
    arxiv_id: str
    quote: str
    page: int | None = None


# --- parse quality ----------------------------------------------------------------------------


def _texts(paper: ParsedPaper) -> tuple[str, dict[int, str], list[tuple[int, int, str]]]:
    """Whole text, text per page and (start, end, kind) spans of a parsed paper's blocks."""
    parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    pages: dict[int, list[str]] = {}
    pos = 0
    for b in paper.blocks:
        if b.kind not in TEXT_KINDS:
            continue
        parts.append(b.text)
        spans.append((pos, pos + len(b.text), b.kind))
        pos += len(b.text) + 1
        pages.setdefault(b.page, []).append(b.text)
    return "\n".join(parts), {p: "\n".join(t) for p, t in pages.items()}, spans


def evidence_found(
    parsed_papers: dict[str, ParsedPaper],
    items: Iterable[EvidenceItem],
    threshold: float = DEFAULT_THRESHOLD,
) -> pd.DataFrame:
    """Look every evidence item up in its parsed paper.

    Returns one row per item: ``source, qid, arxiv_id, page, quote, found, score, kind,
    on_page`` where ``score`` is the best similarity (reported for misses too, so a notebook can
    show near misses), ``kind`` the block kind at the middle of the match, and ``on_page``
    whether the quote is also found on its annotated page (None when the item has no page or was
    not found).
    Items whose paper is missing or did not parse count as misses with score 0.
    """
    cache: dict[str, tuple[str, dict[int, str], list[tuple[int, int, str]]]] = {}
    rows = []
    for it in items:
        paper = parsed_papers.get(it.arxiv_id)
        row = {**asdict(it), "found": False, "score": 0.0, "kind": None, "on_page": None}
        if paper is None or not paper.ok:
            row["kind"] = "paper not parsed" if paper is None else f"parse {paper.status}"
            rows.append(row)
            continue
        if it.arxiv_id not in cache:
            cache[it.arxiv_id] = _texts(paper)
        full, pages, spans = cache[it.arxiv_id]
        m = locate(it.quote, full, threshold)
        if m is None:
            row["score"] = best_score(it.quote, full)
        else:
            row["found"] = True
            row["score"] = m.score
            middle = (m.start + m.end) // 2
            row["kind"] = next((k for s, e, k in spans if s <= middle <= e), None)
            if it.page is not None:
                row["on_page"] = contains(it.quote, pages.get(it.page, ""), threshold)
        rows.append(row)
    return pd.DataFrame(
        rows,
        columns=["source", "qid", "arxiv_id", "page", "quote", "found", "score", "kind", "on_page"],
    )


def summarize_found(df: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """Found rate per source (and overall): ``{source: {n, found, found_rate, on_page_rate}}``.

    ``on_page_rate`` is over found items with an annotated page; it is absent when none has one.
    """
    out: dict[str, dict[str, float | int]] = {}
    groups = [("all", df)] + [(str(s), g) for s, g in df.groupby("source", sort=True)]
    for name, g in groups:
        n = len(g)
        found = int(g["found"].sum())
        rec: dict[str, float | int] = {
            "n": n,
            "found": found,
            "found_rate": found / n if n else float("nan"),
        }
        paged = g[g["found"] & g["on_page"].notna()]
        if len(paged):
            rec["on_page_rate"] = float(paged["on_page"].astype(bool).mean())
        out[name] = rec
    return out


# --- evidence intact in one chunk ---------------------------------------------------------------


def evidence_intact(
    chunks: Sequence[Chunk], items: Iterable[EvidenceItem], threshold: float = DEFAULT_THRESHOLD
) -> pd.DataFrame:
    """For each evidence item, whether one single chunk of its paper :func:`contains` it intact.

    Returns one row per item: ``qid, arxiv_id, page, quote, intact, chunk_id`` (the first
    containing chunk, in chunk order, or None) and ``n_paper_chunks``.
    """
    by_paper: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_paper.setdefault(c.paper_id, []).append(c)
    rows = []
    for it in items:
        cands = by_paper.get(it.arxiv_id, [])
        hit = next((c for c in cands if contains(it.quote, c.text, threshold)), None)
        rows.append(
            {
                "qid": it.qid,
                "arxiv_id": it.arxiv_id,
                "page": it.page,
                "quote": it.quote,
                "intact": hit is not None,
                "chunk_id": hit.chunk_id if hit else None,
                "n_paper_chunks": len(cands),
            }
        )
    cols = ["qid", "arxiv_id", "page", "quote", "intact", "chunk_id", "n_paper_chunks"]
    return pd.DataFrame(rows, columns=cols)


def intact_rate(records: pd.DataFrame) -> float | None:
    """Share of items found intact in one chunk; None when there are none (undefined, not 0)."""
    return float(records["intact"].astype(bool).mean()) if len(records) else None
