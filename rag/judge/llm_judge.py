"""The LLM faithfulness judge: claim extraction and verification in one structured call.

The judge sends the retrieved sources and the answer to an injected :class:`~rag.llm.base.ChatModel`
(a fixed model, temperature 0, versioned prompt, JSON mode) and expects
``{"claims": [{"claim", "verdict", "evidence"}]}`` — the extract-then-verify scheme of FActScore
(Min et al., 2023) and RAGAS faithfulness (Es et al., 2023) in a single call. Output that cannot
be read (not JSON, wrong shape, unknown verdict) or a failed call is recorded as a
``judge_failure`` with its reason and the raw text: never a silent 0. Refusals and claimless
answers are recognised by :mod:`rag.answer.claims` first and cost no call.

Two tools address the complaint that LLM-judged faithfulness changes between runs and judges:

* **Repeats.** ``LLMJudge(chat, repeat=r)`` sends ``seed=r``, which is part of the completion
  cache key, so repeat ``r`` is a distinct cached call: re-running repeat ``r`` costs nothing and
  reproduces it, while repeats 0..n-1 expose run-to-run variance
  (:func:`rag.evaluation.judge_validation.validate_repeats`).
* **Agreement.** :class:`AgreementJudge` asks two judges (of different model families) and
  accepts a verdict only when both make the same supported-or-not decision; a disagreement is a
  :class:`JudgeDisagreement` (a ``judge_failure``, never a guess) and is counted, so the
  disagreement rate can be reported.
"""

from __future__ import annotations

import json
import logging
import re

from pydantic import BaseModel, ConfigDict, Field

from rag.answer.claims import parse_answer
from rag.errors import JudgeError, LLMError
from rag.judge import AnswerJudgement, ClaimJudge, ClaimVerdict, Verdict, judge_claims
from rag.llm.base import ChatModel, Message
from rag.llm.model import complete_checked

logger = logging.getLogger(__name__)

#: Part of every completion-cache key; bump whenever the prompt text changes.
PROMPT_VERSION = "judge-v1"

SYSTEM_PROMPT = """You check whether an ANSWER is supported by numbered SOURCES.
1. Split the ANSWER into atomic factual claims: one fact each, self-contained (replace pronouns \
by what they refer to). Ignore citation markers like [1] and sentences saying the sources lack \
the answer.
2. Give each claim a verdict:
   "supported"   - the SOURCES state it or directly entail it;
   "unsupported" - the SOURCES address it but do not entail it, or contradict it;
   "not_found"   - the SOURCES say nothing about it.
3. Give the shortest evidence span quoted from the SOURCES ("" when not_found).
Reply with JSON only, no prose:
{"claims": [{"claim": "...", "verdict": "supported", "evidence": "..."}]}"""

_VERDICT_ALIASES = {
    "supported": "supported",
    "unsupported": "unsupported",
    "not_found": "not_found",
    "notfound": "not_found",
    "not found": "not_found",
    "not-found": "not_found",
}


class LLMJudgeSettings(BaseModel):
    """Settings of the LLM judge (the judge stage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(1024, ge=64, le=8192, description="Completion token budget.")
    max_context_chars: int = Field(
        24_000, ge=500, le=400_000, description="Sources longer than this are cut (and flagged)."
    )


def build_messages(answer: str, context: str, max_context_chars: int = 24_000) -> list[Message]:
    """The judge prompt for one (answer, sources) pair."""
    ctx = context if len(context) <= max_context_chars else context[:max_context_chars]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"SOURCES:\n{ctx}\n\nANSWER:\n{answer}"},
    ]


def parse_judge_output(text: str) -> list[ClaimVerdict]:
    """Read the judge's JSON into claim verdicts.

    Accepts a bare object or one wrapped in a Markdown code fence.

    Raises:
        JudgeError: the text is not JSON, not ``{"claims": [...]}``, or an item lacks a
            non-empty ``claim`` or has a verdict outside supported / unsupported / not_found.
    """
    body = text.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, flags=re.DOTALL)
    if fence:
        body = fence.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise JudgeError(
            f"judge output is not JSON ({e.msg} at char {e.pos}): {text[:120]!r}"
        ) from e
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise JudgeError(f'judge output lacks a "claims" list: {text[:120]!r}')
    out = []
    for i, item in enumerate(data["claims"]):
        if not isinstance(item, dict):
            raise JudgeError(f"judge claim {i} is not an object: {item!r}")
        claim = item.get("claim")
        if not isinstance(claim, str) or not claim.strip():
            raise JudgeError(f"judge claim {i} has no claim text: {item!r}")
        raw = item.get("verdict")
        label = _VERDICT_ALIASES.get(str(raw).strip().lower()) if isinstance(raw, str) else None
        if label is None:
            raise JudgeError(
                f"judge claim {i} has verdict {raw!r}; expected supported, unsupported or not_found"
            )
        evidence = item.get("evidence", "")
        evidence = evidence if isinstance(evidence, str) else json.dumps(evidence)
        reason = f"evidence: {evidence!r}" if evidence else "no evidence quoted"
        verdict = Verdict(
            label, 1.0 if label == "supported" else 0.0, reason, {"evidence": evidence}
        )
        out.append(ClaimVerdict(claim.strip(), verdict))
    return out


class JudgeDisagreement(JudgeError):
    """Two judges of an :class:`AgreementJudge` disagree on a claim."""


class LLMJudge:
    """Answer judge through an injected chat model (see the module docstring).

    Args:
        chat: the chat model (fixed model; the judge always asks for temperature 0).
        settings: judge settings.
        repeat: repeat index, sent as the call's seed (a distinct cache entry per repeat).
    """

    def __init__(
        self, chat: ChatModel, settings: LLMJudgeSettings | None = None, repeat: int = 0
    ) -> None:
        if repeat < 0:
            raise JudgeError(f"repeat index must be >= 0, got {repeat}")
        self.chat = chat
        self.settings = settings or LLMJudgeSettings()
        self.repeat = repeat
        self.name = f"llm:{chat.name}:{PROMPT_VERSION}" + (f"#r{repeat}" if repeat else "")
        #: the model, prompt version, repeat and settings fix the verdicts (temperature 0, cached)
        self.fingerprint = f"{self.name}:{self.settings.model_dump_json()}"

    def _call(self, answer: str, context: str) -> tuple[list[ClaimVerdict] | None, dict, str]:
        """(verdicts or None on failure, trace, failure reason)."""
        truncated = len(context) > self.settings.max_context_chars
        if truncated:
            logger.warning(
                "judge context of %d chars cut to %d", len(context), self.settings.max_context_chars
            )
        trace: dict = {
            "prompt_version": PROMPT_VERSION,
            "context_truncated": truncated,
            "repeat": self.repeat,
        }
        replies: list[str] = []

        def parse(text: str) -> list[ClaimVerdict]:
            replies.append(text)
            return parse_judge_output(text)

        try:  # the parser runs before the reply is cached: malformed output is never stored
            completion = complete_checked(
                self.chat,
                build_messages(answer, context, self.settings.max_context_chars),
                parse,
                temperature=0.0,
                max_tokens=self.settings.max_tokens,
                json_mode=True,
                prompt_version=PROMPT_VERSION,
                seed=self.repeat,
            )
        except LLMError as e:
            return None, trace, f"judge call failed: {type(e).__name__}: {e}"
        except JudgeError as e:
            trace["raw"] = replies[-1] if replies else ""
            return None, trace, f"malformed judge output: {e}"
        trace |= {"raw": completion.text, "model": completion.model, "cached": completion.cached}
        return parse_judge_output(completion.text), trace, ""

    def judge_answer(self, answer: str, context: str) -> AnswerJudgement:
        """Extract and verify the claims of one answer against its sources."""
        parsed = parse_answer(answer)
        if parsed.status != "answered":
            return AnswerJudgement(status=parsed.status, reason=parsed.status, judge=self.name)
        verdicts, trace, failure = self._call(answer, context)
        if verdicts is None:
            logger.warning("%s: %s", self.name, failure)
            return AnswerJudgement("judge_failure", reason=failure, judge=self.name, trace=trace)
        if not verdicts:
            return AnswerJudgement(
                "no_claims", reason="the judge extracted no claim", judge=self.name, trace=trace
            )
        return AnswerJudgement("scored", tuple(verdicts), judge=self.name, trace=trace)

    def verdict(self, claim: str, context: str) -> Verdict:
        """One claim's verdict (supported only if every claim the judge reads in it is).

        Raises:
            JudgeError: the call failed or its output could not be read (never a silent no).
        """
        verdicts, trace, failure = self._call(claim, context)
        if verdicts is None:
            raise JudgeError(f"{self.name} could not judge {claim[:80]!r}: {failure}")
        if not verdicts:
            raise JudgeError(f"{self.name} extracted no claim from {claim[:80]!r}")
        labels = [v.verdict.label for v in verdicts]
        label = (
            "supported"
            if all(lab == "supported" for lab in labels)
            else "not_found"
            if all(lab == "not_found" for lab in labels)
            else "unsupported"
        )
        reason = "; ".join(f"{v.claim}: {v.verdict.label}" for v in verdicts)
        return Verdict(label, float(label == "supported"), reason, trace)

    def entails(self, claim: str, premise: str) -> bool:
        """Entailment function for :mod:`rag.evaluation.citations`."""
        return self.verdict(claim, premise).supported


class AgreementJudge:
    """Accept a verdict only when two claim judges agree (see the module docstring).

    Agreement is on the decision faithfulness uses — supported or not. When both say not
    supported but differ between ``unsupported`` and ``not_found``, the verdict is ``unsupported``.

    Attributes:
        n_agree, n_disagree, n_failed: counts over every :meth:`verdict` call so far.
    """

    def __init__(self, first: ClaimJudge, second: ClaimJudge) -> None:
        if first.name == second.name:
            raise JudgeError(
                f"an agreement rule needs two different judges, got {first.name} twice"
            )
        self.first, self.second = first, second
        self.name = f"agree({first.name}|{second.name})"
        self.fingerprint = f"agree({first.fingerprint}|{second.fingerprint})"
        self.n_agree = self.n_disagree = self.n_failed = 0

    @property
    def disagreement_rate(self) -> float | None:
        """Disagreements over claims both judges could judge (None before any)."""
        n = self.n_agree + self.n_disagree
        return self.n_disagree / n if n else None

    def stats(self) -> dict:
        """Counts and the disagreement rate, ready for ``metrics.json``."""
        return {
            "n_agree": self.n_agree,
            "n_disagree": self.n_disagree,
            "n_failed": self.n_failed,
            "disagreement_rate": self.disagreement_rate,
        }

    def verdict(self, claim: str, context: str) -> Verdict:
        """The shared verdict.

        Raises:
            JudgeDisagreement: the judges make different supported-or-not decisions.
            JudgeError: either judge failed.
        """
        try:
            a = self.first.verdict(claim, context)
            b = self.second.verdict(claim, context)
        except JudgeError:
            self.n_failed += 1
            raise
        if a.supported != b.supported:
            self.n_disagree += 1
            raise JudgeDisagreement(
                f"{self.first.name} says {a.label}, {self.second.name} says {b.label} "
                f"on {claim[:80]!r}"
            )
        self.n_agree += 1
        label = a.label if a.label == b.label else "unsupported"
        reason = f"both agree: {a.label} / {b.label}"
        trace = {"first": {"label": a.label, "reason": a.reason}}
        trace["second"] = {"label": b.label, "reason": b.reason}
        return Verdict(label, (a.score + b.score) / 2, reason, trace)

    def judge_answer(self, answer: str, context: str) -> AnswerJudgement:
        """Claim by claim (deterministic splitter); a disagreement makes it a judge_failure."""
        try:
            return judge_claims(self, answer, context)
        except JudgeError as e:
            return AnswerJudgement("judge_failure", reason=str(e), judge=self.name)

    def entails(self, claim: str, premise: str) -> bool:
        """Entailment for citations: only an agreed ``supported`` counts."""
        try:
            return self.verdict(claim, premise).supported
        except JudgeError:
            return False
