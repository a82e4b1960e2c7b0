"""The claim-judge contract: a :class:`Verdict` on one claim and the :class:`ClaimJudge` protocol.

It sits in the shared core so the answer stage (which asks a judge whether a source span supports
a statement) and the judges themselves (:mod:`rag.judge`) speak one typed interface without the
answer stage importing a judge. :mod:`rag.judge` re-exports both names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

VerdictLabel = Literal["supported", "unsupported", "not_found"]
VERDICT_LABELS: tuple[VerdictLabel, ...] = ("supported", "unsupported", "not_found")


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's decision on one claim.

    Attributes:
        label: ``supported`` (the context entails the claim), ``unsupported`` (the context speaks
            to it but does not entail it, or contradicts it) or ``not_found`` (nothing relevant).
        score: the judge's confidence that the claim is supported, in [0, 1].
        reason: one line a reader can check.
        trace: the evidence behind the label (best sentence, features, raw output).
    """

    label: VerdictLabel
    score: float
    reason: str
    trace: dict = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return self.label == "supported"


@runtime_checkable
class ClaimJudge(Protocol):
    """Labels one claim against a context.

    Attributes:
        name: the judge's display name.
        fingerprint: a content key of the judge: equal for two judges exactly when they give the
            same verdicts (same model, settings and fitted parameters), so results computed with
            one can be reused for the other.
    """

    name: str
    fingerprint: str

    def verdict(self, claim: str, context: str) -> Verdict: ...


__all__ = ["VERDICT_LABELS", "ClaimJudge", "Verdict", "VerdictLabel"]
