"""Answer quality beside faithfulness: token F1, yes/no accuracy and (false) rejection rates.

Faithfulness alone rewards saying nothing, so answers are also scored against the gold:

* **Token F1** (Rajpurkar et al., 2016, SQuAD; the QASPER answer-F1 of Dasigi et al., 2021):
  both texts are normalised (lower-case, punctuation removed, articles a/an/the removed,
  whitespace collapsed; citation markers ``[n]`` removed from the prediction first), then
  ``P = |common| / |pred|``, ``R = |common| / |ref|``, ``F1 = 2PR / (P + R)`` over token
  multisets. Defined on answerable questions whose reference is not a yes/no boolean-only case;
  a refused answer scores 0 there.
* **Exact match** (SQuAD EM): 1 when the normalised prediction equals the normalised reference,
  on the same questions as token F1.
* **Repeated lines**: whether an answer says the same sentence or line twice (the degenerate
  loop of a small model); a property of the text, defined on every non-refused answer.
* **Yes/no accuracy** on ``answer_type == "boolean"`` questions: the first normalised word of the
  prediction and of the reference, "yes" or "no"; a prediction that starts with neither is wrong.
* **Negative rejection** (Chen et al., 2024, "Benchmarking LLMs in RAG", RGB): on gold-unanswerable
  questions, the share the answerer declined. **False rejection**: on answerable ones, the share
  it wrongly declined. "Declined" is :attr:`rag.answer.base.Answer.refused`.

Every metric returns per-question values plus the mean; an undefined case (no question of the
kind, a reference without yes/no) is ``None`` with a reason, never a silent 0 in the mean.
"""

from __future__ import annotations

import logging
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rag.answer.claims import parse_citations
from rag.errors import EvaluationError
from rag.evaluation.gold import GoldItem
from rag.text.sentences import split_sentences

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


class AnswerLike(Protocol):
    """What the metrics read from an answer (:class:`rag.answer.base.Answer` has both)."""

    text: str
    refused: bool


@dataclass(frozen=True, slots=True)
class MetricResult:
    """Per-question values and their mean.

    Attributes:
        per_question: ``{qid: value}``; ``None`` where the metric is undefined for that question.
        value: mean of the defined values (``None`` when none is defined).
        n: number of defined values.
        n_undefined: questions of the metric's kind whose value is undefined.
        reason: why ``value`` is None, or notes on undefined questions.
    """

    name: str
    per_question: dict[str, float | None]
    value: float | None
    n: int
    n_undefined: int = 0
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop punctuation, drop articles, collapse whitespace."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """Token-level F1 of ``prediction`` against ``reference`` (module docstring).

    Citation markers are removed from the prediction first. As in SQuAD, if either side has no
    token after normalisation the score is 1.0 when both are empty and 0.0 otherwise.
    """
    clean, _ = parse_citations(prediction)
    pred = normalize_answer(clean).split()
    ref = normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pred), common / len(ref)
    return 2 * p * r / (p + r)


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the citation-free, normalised prediction equals the normalised reference."""
    clean, _ = parse_citations(prediction)
    return float(normalize_answer(clean) == normalize_answer(reference))


def has_repeated_line(text: str) -> bool:
    """Whether a line or sentence (normalised, at least 3 words) occurs twice in ``text``."""
    units = [normalize_answer(parse_citations(u)[0]) for u in split_sentences(text, mode="answer")]
    units = [u for u in units if len(u.split()) >= 3]
    return len(units) != len(set(units))


def yes_no(prediction: str) -> Literal["yes", "no"] | None:
    """``"yes"`` / ``"no"`` when the (citation-free, normalised) text starts with that word."""
    clean, _ = parse_citations(prediction)
    words = normalize_answer(clean).split()
    if words and words[0] in ("yes", "no"):
        return words[0]  # type: ignore[return-value]
    return None


def _mean(values: Mapping[str, float | None]) -> tuple[float | None, int]:
    defined = [v for v in values.values() if v is not None]
    return (sum(defined) / len(defined) if defined else None), len(defined)


def _aligned(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> None:
    missing = [i.qid for i in items if i.qid not in answers]
    if missing:
        raise EvaluationError(
            f"{len(missing)} gold question(s) have no answer, e.g. {missing[:3]}; pass only the "
            "gold items that were answered"
        )


def answer_f1(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> MetricResult:
    """Token F1 per answerable, non-boolean question (a refusal scores 0.0).

    Boolean questions are scored by :func:`boolean_accuracy`; unanswerable ones by
    :func:`negative_rejection`; neither appears here.
    """
    return _against_gold_text("answer_f1", token_f1, answers, items)


def answer_em(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> MetricResult:
    """Exact match on the questions :func:`answer_f1` scores (a refusal scores 0.0)."""
    return _against_gold_text("exact_match", exact_match, answers, items)


def _against_gold_text(
    name: str,
    score: Callable[[str, str], float],
    answers: Mapping[str, AnswerLike],
    items: Sequence[GoldItem],
) -> MetricResult:
    """``score(answer, gold)`` per answerable, non-boolean question; a refusal scores 0.0."""
    _aligned(answers, items)
    per: dict[str, float | None] = {}
    for it in items:
        if not it.answerable or it.answer_type == "boolean":
            continue
        a = answers[it.qid]
        per[it.qid] = 0.0 if a.refused else score(a.text, it.answer)
    value, n = _mean(per)
    return MetricResult(
        name, per, value, n, reason="" if n else "no answerable non-boolean question"
    )


def repeated_lines(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> MetricResult:
    """Share of non-refused answers that repeat a line or sentence (lower is better)."""
    _aligned(answers, items)
    per: dict[str, float | None] = {
        it.qid: (
            None if answers[it.qid].refused else float(has_repeated_line(answers[it.qid].text))
        )
        for it in items
    }
    value, n = _mean(per)
    return MetricResult("repeated_lines", per, value, n, reason="" if n else "every answer refused")


def boolean_accuracy(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> MetricResult:
    """Yes/no accuracy on answerable ``boolean`` questions.

    A prediction without a leading yes/no (including a refusal) is wrong, and counted in
    ``extra["unparsed"]``; a reference without one is undefined (``None``) and counted.
    ``extra["predicted"]`` and ``extra["gold"]`` count the yes/no labels on the scored questions,
    so a reader sees when an accuracy is what a constant answer would score (``extra["constant"]``
    names that answer, else ``None``; ``extra["majority"]`` is the most frequent gold label's rate).
    """
    _aligned(answers, items)
    per: dict[str, float | None] = {}
    unparsed = 0
    predicted = {"yes": 0, "no": 0}
    gold = {"yes": 0, "no": 0}
    for it in items:
        if not it.answerable or it.answer_type != "boolean":
            continue
        ref = yes_no(it.answer)
        if ref is None:
            per[it.qid] = None
            continue
        pred = None if answers[it.qid].refused else yes_no(answers[it.qid].text)
        unparsed += pred is None
        gold[ref] += 1
        if pred is not None:
            predicted[pred] += 1
        per[it.qid] = float(pred == ref)
    value, n = _mean(per)
    n_undef = sum(v is None for v in per.values())
    reason = "" if n else "no boolean question with a yes/no reference"
    if n_undef:
        reason = f"{n_undef} boolean reference(s) start with neither yes nor no. " + reason
    scored = gold["yes"] + gold["no"]
    constant = next((lab for lab, c in predicted.items() if scored > 1 and c == scored), None)
    extra = {
        "unparsed": unparsed,
        "predicted": predicted,
        "gold": gold,
        "constant": constant,
        "majority": max(gold.values()) / scored if scored else None,
    }
    return MetricResult("boolean_accuracy", per, value, n, n_undef, reason.strip(), extra)


def negative_rejection(
    answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]
) -> MetricResult:
    """Share of gold-unanswerable questions the answerer declined (higher is better)."""
    _aligned(answers, items)
    per: dict[str, float | None] = {
        it.qid: float(answers[it.qid].refused) for it in items if not it.answerable
    }
    value, n = _mean(per)
    return MetricResult(
        "negative_rejection", per, value, n, reason="" if n else "no unanswerable question"
    )


def false_rejection(answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]) -> MetricResult:
    """Share of answerable questions the answerer wrongly declined (lower is better)."""
    _aligned(answers, items)
    per: dict[str, float | None] = {
        it.qid: float(answers[it.qid].refused) for it in items if it.answerable
    }
    value, n = _mean(per)
    return MetricResult(
        "false_rejection", per, value, n, reason="" if n else "no answerable question"
    )


def answer_quality(
    answers: Mapping[str, AnswerLike], items: Sequence[GoldItem]
) -> dict[str, MetricResult]:
    """All answer-quality metrics, keyed by name."""
    return {
        m.name: m
        for m in (
            answer_f1(answers, items),
            answer_em(answers, items),
            repeated_lines(answers, items),
            boolean_accuracy(answers, items),
            negative_rejection(answers, items),
            false_rejection(answers, items),
        )
    }
