"""The extractive answerer's support threshold, chosen on held-out human questions.

:class:`rag.answer.support_extractive.SupportExtractiveAnswerer` answers when some source span
reaches a support threshold and declines otherwise. The judge's own threshold was chosen on SciFact
claim-vs-abstract pairs, a different decision from "does this context answer this question?".
Choosing the threshold on the answered slice's own results would be tuning on the test, so it is
chosen on human questions outside the slice (:data:`SOURCES`, :func:`held_out_questions`): the gold
file's own single-paper answerable questions that the slice does not contain (``gold``), or the
QASPER questions on the corpus papers (``qasper``; Dasigi et al., 2021). Each is asked twice with
the same retriever and context settings as the answerers:

- **answer**: the contexts retrieved from the whole corpus (its paper is there to answer it);
- **decline**: the contexts retrieved with every chunk of its own paper removed (the question
  asks about one paper's method or results, so no other paper should answer it).

The threshold maximises the balanced accuracy of that answer-or-decline decision (the mean of the
answered share on the first and the declined share on the second), over a fixed grid; ties go to
the higher (more cautious) threshold. What this cannot see: a retrieved context that misses the
paper's evidence still counts as "answer", and another paper may hold a general answer (what is
BERT?) to a question counted as "decline"; both are stated beside the number.

Calibrating judges ~200 contexts (its cost is in docs/performance.md), so the chosen threshold is
pinned in ``data/calibration/`` like the offline judges (:mod:`rag.answer.calibrate_pin`, ``make
calibrate``): :func:`support_threshold` given the :class:`PinLookup` for the inputs it would
calibrate on uses the pinned calibration when there is one and calibrates otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from rag.answer.context import Context, ContextSettings, build_contexts
from rag.answer.questions import declarative_form
from rag.answer.support import resolve_threshold, support_spans
from rag.errors import ConfigError
from rag.retrieval.retrievers import Retriever
from rag.types import Hit
from rag.verdicts import ClaimJudge

#: Thresholds tried (p(supported) of the best span).
GRID: tuple[float, ...] = tuple(round(float(t), 2) for t in np.arange(0.0, 0.96, 0.05))
#: Hits fetched before a question's own paper is removed (then cut to ``k``).
EXCLUDE_DEPTH = 50
#: Version of the scoring behind a calibration (this module's rules, the candidate spans of
#: :mod:`rag.answer.support`, the declarative form, the context assembly); bump it when any of
#: them changes a score, so a pinned calibration stops standing in for a new one.
CALIBRATION_VERSION = "held-out-threshold-v1"


@dataclass(frozen=True)
class Calibration:
    """The chosen threshold and the evidence it was chosen on.

    Attributes:
        threshold: the chosen support threshold.
        balanced_accuracy: its answer-or-decline balanced accuracy on the held-out questions.
        answered: share of "answer" contexts answered at the threshold.
        declined: share of "decline" contexts declined at the threshold.
        n: held-out questions (each asked twice).
        curve: one row per grid threshold: ``threshold, answered, declined, balanced_accuracy``.
        scores: ``{qid: (best support with its paper, best support without it)}``.
    """

    threshold: float
    balanced_accuracy: float
    answered: float
    declined: float
    n: int
    curve: list[dict[str, float]]
    scores: dict[str, tuple[float, float]]

    def to_metrics(self) -> dict[str, Any]:
        d = asdict(self)
        d["scores"] = {q: list(v) for q, v in self.scores.items()}
        return d


@dataclass(frozen=True)
class PinLookup:
    """What a pinned calibration offers one run (:func:`rag.answer.calibrate_pin.load`).

    Attributes:
        calibration: the pinned calibration, when it was chosen on exactly this run's inputs.
        note: where it comes from, or why the run calibrates (no pin, or the inputs that differ).
    """

    calibration: Calibration | None
    note: str


def without_paper(hits: Sequence[Hit], paper_id: str, k: int) -> list[Hit]:
    """The first ``k`` hits that do not come from ``paper_id``."""
    return [h for h in hits if h.paper_id != paper_id][:k]


def best_support(judge: ClaimJudge, question: str, context: Context) -> float:
    """p(supported) of the best span for the question's declarative form (-1: no span)."""
    spans = support_spans(judge, declarative_form(question), context)
    return spans[0].score if spans else -1.0


def choose_threshold(
    answer_scores: Sequence[float],
    decline_scores: Sequence[float],
    grid: Sequence[float] = GRID,
) -> tuple[float, list[dict[str, float]]]:
    """The grid threshold with the best balanced accuracy of answering (score >= t) on
    ``answer_scores`` and declining on ``decline_scores``; ties go to the higher threshold.

    Raises:
        ConfigError: an empty side or an empty grid.
    """
    if not answer_scores or not decline_scores or not grid:
        raise ConfigError(
            f"threshold calibration needs questions on both sides and a grid (got "
            f"{len(answer_scores)} answer, {len(decline_scores)} decline, {len(grid)} thresholds)"
        )
    pos, neg = np.asarray(answer_scores, float), np.asarray(decline_scores, float)
    curve = []
    for t in sorted(grid):
        answered, declined = float(np.mean(pos >= t)), float(np.mean(neg < t))
        curve.append(
            {
                "threshold": float(t),
                "answered": answered,
                "declined": declined,
                "balanced_accuracy": (answered + declined) / 2,
            }
        )
    best = max(curve, key=lambda r: (round(r["balanced_accuracy"], 9), r["threshold"]))
    return best["threshold"], curve


def held_out_threshold(
    judge: ClaimJudge,
    retriever: Retriever,
    questions: Mapping[str, tuple[str, str]],
    *,
    k: int,
    settings: ContextSettings,
    titles: Mapping[str, str] | None = None,
    grid: Sequence[float] = GRID,
) -> Calibration:
    """Choose the support threshold on ``questions`` = ``{qid: (question, paper_id)}``.

    Each question is retrieved once at depth :data:`EXCLUDE_DEPTH`; its top ``k`` make the
    "answer" context and its top ``k`` from other papers the "decline" context, both assembled
    with ``settings`` (the answerers' own).

    Raises:
        ConfigError: no questions.
    """
    if not questions:
        raise ConfigError("no held-out questions to choose the support threshold on")
    depth = max(EXCLUDE_DEPTH, k)
    with_paper, others = {}, {}
    for qid, (question, paper_id) in questions.items():
        hits = retriever.retrieve(question, depth)
        with_paper[qid] = hits[:k]
        others[qid] = without_paper(hits, paper_id, k)
    pos_ctx = build_contexts(with_paper, settings, titles=titles)
    neg_ctx = build_contexts(others, settings, titles=titles)
    scores = {
        qid: (
            best_support(judge, q, pos_ctx[qid]),
            best_support(judge, q, neg_ctx[qid]),
        )
        for qid, (q, _) in questions.items()
    }
    t, curve = choose_threshold(
        [a for a, _ in scores.values()], [b for _, b in scores.values()], grid
    )
    row = next(r for r in curve if r["threshold"] == t)
    return Calibration(
        threshold=t,
        balanced_accuracy=row["balanced_accuracy"],
        answered=row["answered"],
        declined=row["declined"],
        n=len(questions),
        curve=curve,
        scores=scores,
    )


#: How the support threshold is chosen when no fixed value is given.
RULES = ("held-out", "judge")

#: Where the held-out questions of the ``held-out`` rule come from.
SOURCES = {
    "gold": "single-paper answerable questions of the gold file outside the answered slice",
    "qasper": "human QASPER questions on the corpus papers",
}


def held_out_questions(
    source: str,
    *,
    gold: Sequence[Any] = (),
    in_slice: Iterable[str] = (),
    qasper: Sequence[Any] = (),
    papers: Iterable[str] = (),
) -> dict[str, tuple[str, str]]:
    """``{qid: (question, paper_id)}`` for the ``held-out`` rule.

    ``gold``: the answerable gold items (:class:`rag.evaluation.gold.GoldItem`) with exactly one
    relevant paper and a qid not in ``in_slice`` (so no held-out question is ever graded);
    ``qasper``: the QASPER items whose paper is in ``papers``.

    Raises:
        ConfigError: an unknown source.
    """
    if source not in SOURCES:
        raise ConfigError(f"held-out source {source!r}: use one of {', '.join(SOURCES)}")
    if source == "qasper":
        keep = set(papers)
        return {i.qid: (i.question, i.arxiv_id) for i in qasper if i.arxiv_id in keep}
    graded = set(in_slice)
    return {
        g.qid: (g.question, g.relevant_papers[0])
        for g in gold
        if g.answerable and len(g.relevant_papers) == 1 and g.qid not in graded
    }


def support_threshold(
    rule: str,
    value: float,
    judge: ClaimJudge,
    retriever: Retriever,
    questions: Mapping[str, tuple[str, str]],
    *,
    k: int,
    settings: ContextSettings,
    titles: Mapping[str, str] | None = None,
    source: str = "qasper",
    pinned: PinLookup | None = None,
) -> tuple[float, Calibration | None, str]:
    """``(threshold, calibration or None, how it was chosen)``.

    ``value`` in [0, 1] is used as given; a negative ``value`` asks ``rule``: ``held-out``
    (:func:`held_out_threshold` on ``questions``, which came from ``source``, a key of
    :data:`SOURCES`) or ``judge`` (the judge's own threshold, chosen by cross-validation on
    SciFact train).

    ``pinned`` (:func:`rag.answer.calibrate_pin.load` for this call's inputs): ``held-out`` takes
    its calibration instead of calibrating when it has one; ``how`` ends with its note (pinned, or
    why not).

    Raises:
        ConfigError: an unknown rule, a value above 1, or ``held-out`` with no questions.
    """
    if rule not in RULES:
        raise ConfigError(f"support threshold rule {rule!r}: use one of {', '.join(RULES)}")
    if value >= 0 or rule == "judge":
        t = resolve_threshold(judge, value)
        how = "fixed value" if value >= 0 else "the judge's own threshold (CV on SciFact train)"
        return t, None, how
    if source not in SOURCES:
        raise ConfigError(f"held-out source {source!r}: use one of {', '.join(SOURCES)}")
    cal = (pinned.calibration if pinned else None) or held_out_threshold(
        judge, retriever, questions, k=k, settings=settings, titles=titles
    )
    how = (
        f"held-out: best answer-or-decline balanced accuracy on {cal.n} {SOURCES[source]}, "
        "asked with and without their paper (never a graded question)"
    )
    return cal.threshold, cal, f"{how}; {pinned.note}" if pinned else how


__all__ = [
    "CALIBRATION_VERSION",
    "EXCLUDE_DEPTH",
    "GRID",
    "RULES",
    "SOURCES",
    "Calibration",
    "PinLookup",
    "best_support",
    "choose_threshold",
    "held_out_questions",
    "held_out_threshold",
    "support_threshold",
]
