"""Human QASPER questions on the corpus papers: loading, the one QASPER cleaner, chunk qrels.

QASPER (Dasigi et al. 2021, NAACL) questions were written by NLP practitioners from a paper's
title and abstract and answered by others from the full text, who selected evidence paragraphs.
Its text comes from S2ORC, not the PDF, so paragraphs are cleaned (:func:`clean_qasper`) before
they are matched against parsed or chunked text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from rag.errors import GoldError
from rag.evaluation.evidence import EvidenceItem, contains
from rag.evaluation.gold import ContainsFn, QrelsReport, build_chunk_qrels
from rag.ir import Qrels
from rag.jsonl import read_records
from rag.paths import shared_dir
from rag.types import Chunk


class QasperAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    answer: str
    type: str | None = None


class QasperItem(BaseModel):
    """A QASPER question on a corpus paper; ``evidence`` holds one paragraph list per annotator."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    qid: str = Field(min_length=1)
    arxiv_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answers: list[QasperAnswer]
    evidence: list[list[str]]

    @property
    def paragraphs(self) -> list[str]:
        """Every annotator's evidence paragraphs, de-duplicated, in first-seen order."""
        seen: dict[str, None] = {}
        for annotator in self.evidence:
            for para in annotator:
                if para.strip():
                    seen.setdefault(para, None)
        return list(seen)


def default_qasper_path() -> Path:
    return shared_dir() / "datasets" / "qasper" / "corpus_questions.jsonl"


def load_qasper(path: str | Path | None = None) -> list[QasperItem]:
    """Load the QASPER questions on the corpus papers (default: the shared copy).

    Raises:
        GoldError: naming the line and field of an invalid record or a duplicate qid.
    """
    p = Path(path) if path is not None else default_qasper_path()
    items = read_records(p, QasperItem, GoldError, id_field="qid")
    return items


#: QASPER's S2ORC text replaces citations, tables, figures, sections and formulas by placeholders,
#: keeps inline LaTeX and prefixes captions with "FLOAT SELECTED:"; none of that is in the PDF text.
_PLACEHOLDER = re.compile(
    r"\b(?:BIBREF|TABREF|FIGREF|SECREF|EQREF|INLINEFORM|DISPLAYFORM)\d+\b|\$[^$]*\$"
)
_FLOAT = re.compile(r"^\s*FLOAT SELECTED:\s*")


def clean_qasper(text: str) -> str:
    """Undo QASPER's S2ORC markup so a paragraph can be compared with PDF text.

    Strips the placeholders (``BIBREF12``, ``TABREF3``, ``$...$``) and the ``FLOAT SELECTED:``
    caption prefix, drops parentheses left empty and collapses whitespace.
    """
    cleaned = _PLACEHOLDER.sub(" ", _FLOAT.sub("", text))
    cleaned = re.sub(r"\(\s*[,;]?\s*\)", " ", cleaned)  # parentheses left empty
    cleaned = re.sub(r"\s+([,.;:)])", r"\1", cleaned)
    return re.sub(r"\s+", " ", cleaned).strip()


def qasper_evidence_items(items: Iterable[QasperItem]) -> list[EvidenceItem]:
    """Every (cleaned, de-duplicated) human QASPER evidence paragraph, as evidence items."""
    return [
        EvidenceItem("qasper", i.qid, i.arxiv_id, clean_qasper(para))
        for i in items
        for para in i.paragraphs
    ]


def qasper_queries(items: Sequence[QasperItem]) -> dict[str, str]:
    """``{qid: question}`` for the QASPER questions that carry evidence paragraphs."""
    return {i.qid: i.question for i in items if i.paragraphs}


def qasper_chunk_qrels(
    items: Sequence[QasperItem],
    chunks: Iterable[Chunk],
    contains_fn: ContainsFn = contains,
    threshold: float = 85.0,
) -> tuple[Qrels, QrelsReport]:
    """Chunk qrels from the human QASPER evidence paragraphs (any annotator's).

    A chunk is relevant when it contains the (cleaned) paragraph, when the chunk lies inside the
    paragraph, or — for a paragraph cut by a chunk boundary — when it contains half of it (reported
    under ``found_split``). Questions without evidence paragraphs are skipped.
    """
    evidence = {
        i.qid: [(i.arxiv_id, clean_qasper(p)) for p in i.paragraphs] for i in items if i.paragraphs
    }
    return build_chunk_qrels(
        evidence, chunks, contains_fn, threshold, chunk_inside=True, desc="qasper chunk qrels"
    )
