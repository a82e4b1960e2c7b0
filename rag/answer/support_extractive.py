"""The support-based extractive answerer: the shortest source span the judge says supports the
question's statement, copied with its citation (and a Yes/No for a yes/no question)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag.answer.base import Answer, make_answer, settings_with
from rag.answer.context import Context
from rag.answer.prompts import REFUSAL
from rag.answer.questions import declarative_form, is_yes_no_question
from rag.answer.support import Span, resolve_threshold, support_spans, threshold_field
from rag.index.bm25 import Tokenizer, TokenizerSettings
from rag.text.coverage import term_coverage
from rag.verdicts import ClaimJudge

#: Version of the support-based extractive answerer's rules.
SUPPORT_EXTRACTIVE_VERSION = "support-extractive-v1"
#: A yes/no question whose best span covers this share of its terms is answered "No, <span>".
NO_COVERAGE = 0.5


class SupportExtractiveSettings(BaseModel):
    """When :class:`SupportExtractiveAnswerer` answers and how many spans it copies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = threshold_field("a span needs")
    max_spans: int = Field(1, ge=1, le=3, description="Spans copied, one per source sentence.")


def span_text(span: Span) -> str:
    """The span as an answer sentence body: its final punctuation removed."""
    return span.text.rstrip(" .!?;:,")


class SupportExtractiveAnswerer:
    """Copies the shortest source span the judge says supports the question's statement.

    Rules (:data:`SUPPORT_EXTRACTIVE_VERSION`), fixed before any dev result was seen:

    1. The statement is the question's :func:`~rag.answer.questions.declarative_form`; every
       source sentence and clause is scored by the injected judge, p(supported | span)
       (:func:`rag.answer.support.support_spans`).
    2. **Decline** only when no span reaches ``threshold`` (negative: the judge's own
       threshold, :func:`rag.answer.support.resolve_threshold`).
    3. Otherwise the answer is the best span with its citation, ``Span [n].``; ties go to the
       shorter span, so a clause beats its sentence when the judge scores it as high.
    4. **Yes/no questions** (:func:`~rag.answer.questions.is_yes_no_question`): "Yes, <span> [n]."
       when a span reaches the threshold; otherwise, when the best span still shares at least
       half the question's content terms (the sources speak to the statement but do not support
       it), "No, <span> [n]."; otherwise decline.

    Faithful by construction apart from the added Yes/No: every span is copied verbatim.

    Args:
        judge: the injected claim judge.
        settings: :class:`SupportExtractiveSettings`; its fields may also be given as keywords.
        name: answerer name.
    """

    def __init__(
        self,
        judge: ClaimJudge,
        settings: SupportExtractiveSettings | None = None,
        *,
        name: str = "extractive",
        **overrides: object,
    ) -> None:
        self.settings = settings_with(SupportExtractiveSettings, settings, overrides)
        self.judge = judge
        self.threshold = resolve_threshold(judge, self.settings.threshold)
        self.max_spans = self.settings.max_spans
        self.name = name
        self._tok = Tokenizer(TokenizerSettings(stemmer="english"))

    def _coverage(self, question: str, span: str) -> float:
        q = sorted(set(self._tok.query(question)))
        return term_coverage(q, set(self._tok.document(span)))

    def answer(self, question: str, context: Context) -> Answer:
        """The best supported span(s) with citations, a Yes/No, or the refusal."""
        t0 = time.perf_counter()
        statement = declarative_form(question)
        spans = support_spans(self.judge, statement, context)
        best = spans[0] if spans else None
        passed = [sp for sp in spans if sp.score >= self.threshold]
        yes_no = is_yes_no_question(question)
        trace: dict[str, Any] = {
            "statement": statement,
            "threshold": self.threshold,
            "yes_no_question": yes_no,
            "best_span": None
            if best is None
            else {"n": best.n, "text": best.text, "score": best.score, "label": best.label},
        }
        chosen: list[Span] = []
        prefix = ""
        if passed:
            seen: set[tuple[int, int]] = set()
            for sp in passed:  # at most one span per source sentence
                if (sp.n, sp.position) in seen:
                    continue
                seen.add((sp.n, sp.position))
                chosen.append(sp)
                if len(chosen) == self.max_spans:
                    break
            prefix = "Yes, " if yes_no else ""
        elif yes_no and best is not None and self._coverage(question, best.text) >= NO_COVERAGE:
            chosen, prefix = [best], "No, "
        if not chosen:
            text = REFUSAL
            trace["decision"] = "declined: no span reaches the threshold"
        else:
            parts = [f"{span_text(sp)} [{sp.n}]." for sp in chosen]
            text = prefix + " ".join(parts)
            trace["decision"] = (prefix.strip(" ,").lower() or "answered") + (
                "" if passed else ": sources speak to the statement but do not support it"
            )
        return make_answer(
            text,
            context,
            self.name,
            latency_s=time.perf_counter() - t0,
            prompt_version=SUPPORT_EXTRACTIVE_VERSION,
            support=best.score if best is not None else None,
            trace=trace,
        )


__all__ = [
    "SUPPORT_EXTRACTIVE_VERSION",
    "SupportExtractiveAnswerer",
    "SupportExtractiveSettings",
    "span_text",
]
