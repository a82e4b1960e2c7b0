"""Faithfulness judges: the records they return and the interface they share.

A *claim judge* labels one claim against a context (:class:`Verdict`); an *answer judge* turns a
whole answer into claims and verdicts (:class:`AnswerJudgement`). Refusals and claimless answers
are recognised by :mod:`rag.answer.claims` before any judge runs, so the answered rate does not
depend on the judge. Implementations: :mod:`rag.judge.offline` (no API) and
:mod:`rag.judge.llm_judge`. This module stays import-light (no torch) so metrics can use the
records without a model. The claim-level contract (:class:`Verdict`, :class:`ClaimJudge`) lives in
:mod:`rag.verdicts`, below the answer stage that also uses it, and is re-exported here.

Modules:

- ``artifact``: the stored judge and its content key
- ``candidates``: the judges read beside the default in notebook 05, by name
- ``contrast``: contradiction cues
- ``features``: alignment features
- ``fit``: features → classifiers by grouped CV
- ``llm_judge``: the LLM judge
- ``nli``: the entailment judge, the lab's own cross-encoder behind ``ClaimJudge``
- ``nli_data``: its training data: SciFact train's human pairs plus rule-made pairs
- ``nli_pin``: ``rag judge train``: data, training, thresholds, pinned
- ``nli_train``: train the entailment cross-encoder, resumable
- ``offline``: the offline judge (features + classifier)
- ``pin``: ``make judge``: fit and pin
- ``pinned``: fitted judges as JSON in ``data/judge/`` (``make judge``)
- ``settings``: judge settings, ``offline-v1``/``offline-v2``
- ``synth``: rule-made entailment pairs whose label is known by rule
- ``yesno``: a local instruct model's P("yes") as an opt-in judge score
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from rag.answer.claims import parse_answer
from rag.verdicts import VERDICT_LABELS, ClaimJudge, Verdict, VerdictLabel

JudgementStatus = Literal["scored", "refusal", "no_claims", "judge_failure"]


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    """A claim with its verdict."""

    claim: str
    verdict: Verdict


@dataclass(frozen=True, slots=True)
class AnswerJudgement:
    """A judge's reading of one answer; only ``scored`` judgements enter a faithfulness mean.

    ``judge_failure`` records a judge whose output could not be interpreted, with the reason in
    ``reason`` and the raw output in ``trace`` — never a silent 0.
    """

    status: JudgementStatus
    claims: tuple[ClaimVerdict, ...] = ()
    reason: str = ""
    judge: str = ""
    trace: dict = field(default_factory=dict)

    @property
    def n_supported(self) -> int:
        return sum(c.verdict.supported for c in self.claims)


@runtime_checkable
class AnswerJudge(Protocol):
    """Extracts an answer's claims and labels each against a context."""

    name: str

    def judge_answer(self, answer: str, context: str) -> AnswerJudgement: ...


def judge_claims(judge: ClaimJudge, answer: str, context: str) -> AnswerJudgement:
    """Judge an answer claim by claim with the deterministic splitter of
    :mod:`rag.answer.claims`."""
    parsed = parse_answer(answer)
    if parsed.status != "answered":
        return AnswerJudgement(status=parsed.status, reason=parsed.status, judge=judge.name)
    verdicts = tuple(ClaimVerdict(c, judge.verdict(c, context)) for c in parsed.claims)
    return AnswerJudgement(status="scored", claims=verdicts, judge=judge.name)


__all__ = [
    "VERDICT_LABELS",
    "AnswerJudge",
    "AnswerJudgement",
    "ClaimJudge",
    "ClaimVerdict",
    "Verdict",
    "VerdictLabel",
    "judge_claims",
]
