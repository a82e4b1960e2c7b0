"""Papers the gold does not cover: how much gold a slice has, and a user's own questions.

A report run on a user's own papers has no gold question about them, so every number graded
against gold (evidence found or intact, retrieval nDCG and recall, answer F1, negative rejection,
the conversation follow-ups) is undefined there. It is recorded as skipped, never as 0:
:func:`gold_coverage` counts, once per notebook, what the gold and QASPER files hold for the
slice, and :meth:`GoldCoverage.covers` is the one decision each gold section asks ("does this
slice have what I grade against?"). What needs no gold still runs: parsing, chunk statistics,
index costs, SciFact (its own qrels), retriever agreement (:mod:`rag.evaluation.agreement`) and
answers judged for faithfulness against their own sources.

Without gold there are no questions to answer either: :func:`load_questions` reads a user's own
questions file, JSONL with ``question`` and optionally ``papers`` (the arXiv ids it is about) and
``qid``. Such questions carry no reference answer and no evidence, so only gold-free metrics are
computed on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError, GoldError
from rag.evaluation.gold import GoldItem
from rag.jsonl import read_records
from rag.paths import display, resolve

#: The reason recorded in ``metrics.json`` for a section that needs gold the slice does not have.
NO_GOLD = "no gold questions for these papers"

#: What a gold section grades against, and how :class:`GoldCoverage` counts it.
Need = Literal["questions", "evidence", "qasper", "any_evidence"]
NEEDS: dict[str, str] = {
    "questions": "answerable gold questions whose papers are all in this slice",
    "evidence": "gold evidence quotes on the papers of this slice",
    "qasper": "human QASPER questions on the papers of this slice",
    "any_evidence": "gold evidence quotes or QASPER evidence paragraphs on these papers",
}


@dataclass(frozen=True)
class GoldCoverage:
    """What the gold and QASPER files hold for one slice of papers.

    Attributes:
        papers: papers in the slice.
        questions: answerable gold questions whose relevant papers are all in the slice (the
            questions retrieval, answers and follow-ups are graded on).
        unanswerable: unanswerable gold questions (they need no paper, so every slice "has"
            them; on their own they grade nothing but declining).
        evidence: gold evidence quotes that fall on a paper of the slice.
        qasper: QASPER questions on a paper of the slice.
    """

    papers: int
    questions: int
    unanswerable: int
    evidence: int
    qasper: int

    def n(self, need: Need) -> int:
        """How many items of the kind ``need`` the slice has."""
        if need not in NEEDS:
            raise GoldError(f"unknown gold need {need!r}: use one of {', '.join(NEEDS)}")
        if need == "any_evidence":
            return self.evidence + self.qasper
        return int(getattr(self, need))

    def covers(self, need: Need = "questions") -> bool:
        """Whether a section that grades against ``need`` has anything to grade here."""
        return self.n(need) > 0

    def skipped(self, need: Need = "questions") -> dict[str, Any]:
        """The ``metrics.json`` entry of a section skipped for want of ``need``."""
        return {"skipped": NO_GOLD, "needs": NEEDS[need], "papers": self.papers}

    def to_dict(self) -> dict[str, int]:
        """The counts, for ``metrics.json``."""
        return asdict(self)


def gold_coverage(
    gold: Sequence[GoldItem], papers: Iterable[str], qasper: Sequence[Any] = ()
) -> GoldCoverage:
    """Count what ``gold`` (the whole file) and ``qasper`` items hold for the ``papers`` slice."""
    selected = set(papers)
    return GoldCoverage(
        papers=len(selected),
        questions=sum(g.answerable and set(g.relevant_papers) <= selected for g in gold),
        unanswerable=sum(not g.answerable for g in gold),
        evidence=sum(e.arxiv_id in selected for g in gold for e in g.evidence),
        qasper=sum(q.arxiv_id in selected for q in qasper),
    )


#: Keys of an answerer's ``metrics.json`` block that compare with a gold answer or gold label,
#: and what each needs; on questions without gold they are recorded as skipped.
GOLD_ANSWER_METRICS: dict[str, str] = {
    "answer_f1": "a reference answer (token F1)",
    "exact_match": "a reference answer",
    "boolean_accuracy": "a gold yes/no answer",
    "boolean_n": "a gold yes/no answer",
    "boolean_answers": "a gold yes/no answer",
    "negative_rejection": "gold-unanswerable questions",
    "negative_rejection_n": "gold-unanswerable questions",
    "false_rejection": "gold-answerable questions",
}


def gold_free(block: dict[str, Any]) -> dict[str, Any]:
    """An answerer's ``metrics.json`` block with every gold-graded metric replaced by its skip
    record; faithfulness, citation support, answered rate, claims, tokens and cost stay."""
    return {
        k: {"skipped": NO_GOLD, "needs": GOLD_ANSWER_METRICS[k]} if k in GOLD_ANSWER_METRICS else v
        for k, v in block.items()
    }


class OwnQuestion(BaseModel):
    """One question of a user's own file: no reference answer, no evidence."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str = Field(min_length=1, description="the question as asked")
    papers: list[str] = Field(default_factory=list, description="arXiv ids it is about (optional)")
    qid: str | None = Field(default=None, min_length=1, description="id (default: own-<line>)")


def load_questions(path: str | Path) -> dict[str, OwnQuestion]:
    """``{qid: question}`` from a JSONL file of :class:`OwnQuestion` records, in file order.

    A record without ``qid`` is ``own-<n>`` (its 1-based position). Answers and evidence are not
    accepted here: a file that has them is gold and is passed as ``gold_path`` instead.

    Raises:
        GoldError: the file is missing or empty, a record is invalid (naming the line and field,
            e.g. an ``answer`` key), or two records share a qid.
    """
    p = resolve(path)
    if not p.is_file():
        raise GoldError(
            f"questions file {display(p)} not found (JSONL, one {{'question': ...}} a line)"
        )
    records = read_records(p, OwnQuestion, GoldError)
    if not records:
        raise GoldError(f"questions file {display(p)} holds no questions")
    out: dict[str, OwnQuestion] = {}
    for i, r in enumerate(records, start=1):
        qid = r.qid or f"own-{i}"
        if qid in out:
            raise GoldError(
                f"{display(p)} line {i}: qid {qid!r} is used twice; qids must be unique"
            )
        out[qid] = r
    return out


def questions_without_gold(
    coverage: GoldCoverage, path: str, *, required: bool = False
) -> dict[str, OwnQuestion]:
    """The user's own questions when no gold question covers the slice; ``{}`` when one does.

    ``path`` follows the project's path convention (:func:`rag.paths.resolve`). With no ``path``,
    ``{}``, unless ``required`` (notebook 05, which has nothing else to answer).

    Raises:
        ConfigError: ``required`` and no ``path`` on a slice the gold does not cover.
        GoldError: the file is missing or invalid (:func:`load_questions`).
    """
    if coverage.covers("questions"):
        return {}
    if not path:
        if required:
            raise ConfigError(
                f"no gold question covers these {coverage.papers} papers, so there is nothing to "
                "answer: set questions_path to a JSONL file of your own questions, one "
                '{"question": ..., "papers": [...]} a line (docs/your-papers.md)'
            )
        return {}
    return load_questions(resolve(path))


__all__ = [
    "GOLD_ANSWER_METRICS",
    "NEEDS",
    "NO_GOLD",
    "GoldCoverage",
    "OwnQuestion",
    "gold_coverage",
    "gold_free",
    "load_questions",
    "questions_without_gold",
]
