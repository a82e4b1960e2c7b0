"""Gold questions and the relevance labels (qrels) built from them.

Two sources of labels, both turned into the plain qrels contract ``{qid: {doc_id: grade}}``:

* the corpus gold (``../shared/gold/dev.jsonl`` or any file of that shape): questions written to
  the QASPER protocol (Dasigi et al. 2021, "A Dataset of Information-Seeking Questions and
  Answers Anchored in Research Papers", NAACL) with verbatim evidence quotes. A **paper** is
  relevant when it is listed in ``papers`` or carries evidence; a **chunk** is relevant when it
  contains (fuzzily) one of the question's evidence quotes.
* the human QASPER questions on the corpus papers, whose evidence is whole paragraphs per annotator.

Unanswerable questions have no relevant documents: they are excluded from retrieval metrics and
counted, never scored 0. Evidence that cannot be placed — a paper id not in the corpus, a quote
found in no chunk — is listed in a report, never dropped silently.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from tqdm.auto import tqdm

from rag.errors import ConfigError, GoldError
from rag.evaluation.evidence import EvidenceItem, contains
from rag.ir import Qrels
from rag.jsonl import read_records
from rag.paths import display, resolve, shared_dir
from rag.types import Chunk

logger = logging.getLogger(__name__)

#: ``contains(quote, text, threshold) -> bool`` — fuzzy containment, see
#: :mod:`rag.evaluation.evidence`.
ContainsFn = Callable[[str, str, float], bool]


# --------------------------------------------------------------------------------------------
# Corpus gold (dev.jsonl shape)


class Evidence(BaseModel):
    """One verbatim evidence quote located in a paper (1-based page)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arxiv_id: str = Field(min_length=1, description="arXiv id of the paper holding the quote")
    page: int = Field(ge=1, description="1-based page of the quote in the PDF")
    quote: str = Field(min_length=1, description="verbatim text from that page")


class GoldItem(BaseModel):
    """One gold question; unknown fields are refused so a misspelt key cannot pass unnoticed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    qid: str = Field(min_length=1, description="unique question id")
    question: str = Field(min_length=1, description="the question as asked")
    answerable: bool = Field(description="whether the corpus holds the answer")
    answer: str = Field(description="reference answer ('' when unanswerable)")
    answer_type: Literal["extractive", "abstractive", "boolean", "none"]
    kind: Literal["single-paper", "multi-paper", "unanswerable"]
    papers: list[str] = Field(description="arXiv ids of the papers that answer it")
    evidence: list[Evidence] = Field(description="evidence quotes")
    names_method: bool = Field(description="whether the question names the method it asks about")

    @model_validator(mode="after")
    def _consistent(self) -> GoldItem:
        if self.answerable:
            if self.kind == "unanswerable":
                raise ValueError("answerable is true but kind is 'unanswerable'")
            if not self.evidence:
                raise ValueError("an answerable question needs at least one evidence quote")
        else:
            if self.kind != "unanswerable":
                raise ValueError(f"answerable is false but kind is {self.kind!r}")
            if self.evidence or self.papers:
                raise ValueError("an unanswerable question must carry no papers and no evidence")
        return self

    @property
    def relevant_papers(self) -> list[str]:
        """Papers listed in ``papers`` or carrying evidence, sorted."""
        return sorted(set(self.papers) | {e.arxiv_id for e in self.evidence})


def default_gold_path() -> Path:
    """The corpus gold shipped in the shared folder."""
    return shared_dir() / "gold" / "dev.jsonl"


def load_gold(path: str | Path | None = None) -> list[GoldItem]:
    """Load and validate a gold JSONL file (default: the shared ``gold/dev.jsonl``).

    Raises:
        GoldError: naming the line and field of the first invalid record, or a duplicate qid.
    """
    p = resolve(path) if path is not None else default_gold_path()
    items = read_records(p, GoldItem, GoldError, id_field="qid")
    if not items:
        raise GoldError(f"gold file {display(p)} holds no questions")
    logger.info("loaded %d gold questions from %s", len(items), display(p))
    return items


def gold_for_papers(items: Sequence[GoldItem], papers: Iterable[str]) -> list[GoldItem]:
    """The questions a corpus can answer: answerable ones whose relevant papers are all in
    ``papers`` (arXiv ids), plus every unanswerable one (they need no paper). Gold-file order."""
    selected = set(papers)
    return [g for g in items if not g.answerable or set(g.relevant_papers) <= selected]


def answer_slice(
    items: Sequence[GoldItem],
    n_answerable: int,
    *,
    include_unanswerable: bool = True,
    max_unanswerable: int = 0,
) -> list[GoldItem]:
    """The first ``n_answerable`` answerable questions (gold-file order), then, if asked, the
    unanswerable ones (the first ``max_unanswerable`` in gold-file order; 0: every one): notebook
    05's rule, fixed before looking at any answer."""
    if max_unanswerable < 0:
        raise ConfigError(f"max_unanswerable={max_unanswerable}: use 0 (all) or a positive cap")
    answerable = [g for g in items if g.answerable][:n_answerable]
    if not include_unanswerable:
        return answerable
    unanswerable = [g for g in items if not g.answerable]
    return answerable + unanswerable[: max_unanswerable or None]


def evidence_on_papers(items: Sequence[GoldItem], papers: Iterable[str]) -> list[GoldItem]:
    """Questions with their evidence cut to ``papers``; questions left with none are dropped
    (notebook 02 asks whether each quote on the corpus survives chunking)."""
    selected = set(papers)
    out = []
    for g in items:
        ev = [e for e in g.evidence if e.arxiv_id in selected]
        if ev:
            out.append(g.model_copy(update={"evidence": ev}))
    return out


def gold_summary(items: Sequence[GoldItem]) -> dict[str, int]:
    """Counts for the report: total, answerable, unanswerable, and per ``kind``."""
    kinds = Counter(i.kind for i in items)
    return {
        "total": len(items),
        "answerable": sum(i.answerable for i in items),
        "unanswerable": sum(not i.answerable for i in items),
        **{f"kind:{k}": v for k, v in sorted(kinds.items())},
    }


def gold_queries(items: Sequence[GoldItem]) -> dict[str, str]:
    """``{qid: question}`` for the answerable questions (the ones retrieval can be scored on).

    Unanswerable questions have no relevant document, so a retrieval metric is undefined for them;
    their number is logged and reported by :func:`gold_summary`.
    """
    queries = {i.qid: i.question for i in items if i.answerable}
    n_un = len(items) - len(queries)
    if n_un:
        logger.info("%d unanswerable questions excluded from retrieval queries", n_un)
    return queries


def paper_qrels(items: Sequence[GoldItem]) -> Qrels:
    """Paper-level qrels: grade 1 for every paper in ``papers`` or carrying evidence."""
    return {i.qid: {p: 1 for p in i.relevant_papers} for i in items if i.answerable}


def question_groups(items: Sequence[GoldItem], by: str) -> dict[str, str]:
    """``{qid: group label}`` for breakdowns, e.g. ``by="kind"`` or ``by="names_method"``."""
    if by not in GoldItem.model_fields:
        raise GoldError(f"cannot group by {by!r}; use one of {sorted(GoldItem.model_fields)}")
    return {i.qid: str(getattr(i, by)) for i in items}


def expected_categories(
    items: Sequence[GoldItem], paper_categories: Mapping[str, str]
) -> dict[str, str]:
    """The primary category a question is about: the most common one among its gold papers.

    Ties go to the alphabetically first category, for determinism. Questions whose papers are all
    unknown to ``paper_categories`` are left out (and logged).
    """
    out: dict[str, str] = {}
    for item in items:
        cats = Counter(paper_categories[p] for p in item.relevant_papers if p in paper_categories)
        if not cats:
            if item.answerable:
                logger.warning("no category known for the papers of %s", item.qid)
            continue
        best = max(cats.values())
        out[item.qid] = min(c for c, v in cats.items() if v == best)
    return out


# --------------------------------------------------------------------------------------------
# Chunk qrels from quotes


@dataclass
class QrelsReport:
    """What happened while placing evidence into chunks; everything not placed is listed here.

    Attributes:
        n_questions: questions with evidence that were processed.
        n_evidence: evidence passages (quotes or paragraphs) processed.
        n_found: passages found whole in at least one chunk.
        found_split: passages not found whole but whose halves were found (a chunk boundary cut
            them); the chunks holding a half are relevant. Entries ``(qid, paper_id, passage)``.
        not_found: passages found in no chunk of their paper, ``(qid, paper_id, passage)``.
        unknown_papers: ``{qid: [paper ids]}`` referred to by evidence but absent from the chunks.
        no_relevant_chunk: questions left with no relevant chunk at all (they drop out of the
            chunk-level metrics, counted here).
    """

    n_questions: int = 0
    n_evidence: int = 0
    n_found: int = 0
    found_split: list[tuple[str, str, str]] = field(default_factory=list)
    not_found: list[tuple[str, str, str]] = field(default_factory=list)
    unknown_papers: dict[str, list[str]] = field(default_factory=dict)
    no_relevant_chunk: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        """Counts for tables and ``metrics.json``."""
        return {
            "questions": self.n_questions,
            "evidence": self.n_evidence,
            "found_whole": self.n_found,
            "found_split": len(self.found_split),
            "not_found": len(self.not_found),
            "unknown_paper_refs": sum(len(v) for v in self.unknown_papers.values()),
            "questions_without_relevant_chunk": len(self.no_relevant_chunk),
        }


def _halves(text: str) -> tuple[str, str] | None:
    """Split a passage at the word boundary nearest its middle (None when too short to split)."""
    words = text.split()
    if len(words) < 6:
        return None
    mid = len(words) // 2
    return " ".join(words[:mid]), " ".join(words[mid:])


def _chunks_by_paper(chunks: Iterable[Chunk]) -> dict[str, list[Chunk]]:
    by_paper: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        by_paper[c.paper_id].append(c)
    return by_paper


def _place(
    passage: str,
    candidates: Sequence[Chunk],
    contains_fn: ContainsFn,
    threshold: float,
    *,
    chunk_inside: bool,
) -> tuple[set[str], str]:
    """Chunks holding ``passage``; returns (chunk ids, how: "whole" | "split" | "none")."""
    hits = {c.chunk_id for c in candidates if contains_fn(passage, c.text, threshold)}
    if chunk_inside:
        hits |= {c.chunk_id for c in candidates if contains_fn(c.text, passage, threshold)}
    if hits:
        return hits, "whole"
    halves = _halves(passage)
    if halves is not None:
        for half in halves:
            hits |= {c.chunk_id for c in candidates if contains_fn(half, c.text, threshold)}
        if hits:
            return hits, "split"
    return set(), "none"


def build_chunk_qrels(
    evidence: Mapping[str, Sequence[tuple[str, str]]],
    chunks: Iterable[Chunk],
    contains_fn: ContainsFn,
    threshold: float,
    *,
    chunk_inside: bool,
    desc: str,
) -> tuple[Qrels, QrelsReport]:
    by_paper = _chunks_by_paper(chunks)
    report = QrelsReport()
    qrels: dict[str, dict[str, int]] = {}
    for qid in tqdm(sorted(evidence), desc=desc, leave=False):
        report.n_questions += 1
        rel: dict[str, int] = {}
        unknown: set[str] = set()
        for paper_id, passage in evidence[qid]:
            report.n_evidence += 1
            candidates = by_paper.get(paper_id)
            if not candidates:
                unknown.add(paper_id)
                report.not_found.append((qid, paper_id, passage))
                continue
            hits, how = _place(
                passage, candidates, contains_fn, threshold, chunk_inside=chunk_inside
            )
            if how == "whole":
                report.n_found += 1
            elif how == "split":
                report.found_split.append((qid, paper_id, passage))
            else:
                report.not_found.append((qid, paper_id, passage))
            for cid in hits:
                rel[cid] = 1
        if unknown:
            report.unknown_papers[qid] = sorted(unknown)
        if rel:
            qrels[qid] = dict(sorted(rel.items()))
        else:
            report.no_relevant_chunk.append(qid)
    if report.unknown_papers or report.not_found or report.found_split:
        logger.warning("%s: %s", desc, report.summary())
    return qrels, report


def chunk_qrels(
    items: Sequence[GoldItem],
    chunks: Iterable[Chunk],
    contains_fn: ContainsFn = contains,
    threshold: float = 90.0,
) -> tuple[Qrels, QrelsReport]:
    """Chunk-level qrels: a chunk is relevant when it contains (fuzzily) an evidence quote.

    Each quote is searched only among the chunks of its own paper. A quote no chunk holds whole
    (a chunk boundary cut it) is searched again as its two halves, split at the middle word; the
    chunks holding a half — i.e. at least half of the quote, contiguous — are relevant and the quote
    is listed under ``found_split``. Quotes whose paper has no chunks (an id outside the corpus, or
    a paper that failed to parse) or that no chunk contains are listed in the report.

    Args:
        items: gold questions (unanswerable ones are skipped: they have no evidence).
        chunks: every chunk of the corpus.
        contains_fn: ``contains(quote, text, threshold) -> bool``; the project's one matcher,
            :func:`rag.evaluation.evidence.contains`, unless a test hands in an exact one.
        threshold: similarity threshold handed to ``contains_fn``.
    """
    evidence = {i.qid: [(e.arxiv_id, e.quote) for e in i.evidence] for i in items if i.evidence}
    return build_chunk_qrels(
        evidence, chunks, contains_fn, threshold, chunk_inside=False, desc="gold chunk qrels"
    )


def evidence_items(items: Iterable[GoldItem]) -> list[EvidenceItem]:
    """Every evidence quote of the gold questions, as items for :mod:`rag.evaluation.evidence`."""
    return [
        EvidenceItem("gold", i.qid, e.arxiv_id, e.quote, e.page) for i in items for e in i.evidence
    ]
