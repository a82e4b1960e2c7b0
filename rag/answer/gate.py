"""Support before and after answering: the decline gate and the post-hoc attribution filter.

Both ask the injected claim judge what the support-based extractive answerer asks
(:mod:`rag.answer.support`): the gate, before any model call, whether some source span supports
the question's statement; the filter, after answering, whether the context supports each claim
of the answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace

from pydantic import BaseModel, ConfigDict

from rag.answer.base import Answer, Answerer, make_answer, settings_with
from rag.answer.claims import parse_answer
from rag.answer.context import Context
from rag.answer.prompts import REFUSAL
from rag.answer.questions import declarative_form
from rag.answer.support import judge_pairs, resolve_threshold, support_spans, threshold_field
from rag.text.sentences import split_sentences
from rag.verdicts import ClaimJudge


class GateSettings(BaseModel):
    """When :class:`GatedAnswerer` lets a question through to its answerer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threshold: float = threshold_field("the best span needs")


class GatedAnswerer:
    """Declines without calling the inner answerer when no source span supports the question.

    The gate is rule 2 of :class:`rag.answer.support_extractive.SupportExtractiveAnswerer` (same
    judge, same statement, same threshold), stated before any dev result: a model that never
    declines by itself is made to decline when retrieval brought nothing the judge finds
    supporting. A declined question costs no model call.

    Args:
        inner: the answerer asked when the gate passes.
        judge: the injected claim judge.
        settings: :class:`GateSettings`; its fields may also be given as keywords.
        name: answerer name (default: the inner answerer's name + "+gate").
    """

    def __init__(
        self,
        inner: Answerer,
        judge: ClaimJudge,
        settings: GateSettings | None = None,
        *,
        name: str = "",
        **overrides: object,
    ) -> None:
        self.settings = settings_with(GateSettings, settings, overrides)
        self.inner = inner
        self.judge = judge
        self.threshold = resolve_threshold(judge, self.settings.threshold)
        self.name = name or f"{inner.name}+gate"

    def answer(self, question: str, context: Context) -> Answer:
        """The refusal below the threshold, else the inner answer (with its support noted)."""
        t0 = time.perf_counter()
        statement = declarative_form(question)
        spans = support_spans(self.judge, statement, context)
        best = spans[0].score if spans else None
        trace = {"statement": statement, "threshold": self.threshold, "support": best}
        if best is None or best < self.threshold:
            trace["decision"] = "declined by the gate"
            return make_answer(
                REFUSAL,
                context,
                self.name,
                latency_s=time.perf_counter() - t0,
                prompt_version=f"gate+{getattr(self.inner, 'prompt_version', '')}",
                support=best,
                trace=trace,
            )
        a = self.inner.answer(question, context)
        trace["decision"] = "passed to the answerer"
        return replace(
            a,
            answerer=self.name,
            support=best,
            prompt_version=f"gate+{a.prompt_version}",
            trace={**a.trace, **trace},
        )


def attribution_filter(
    answers: Mapping[str, Answer],
    contexts: Mapping[str, Context],
    judge: ClaimJudge,
    *,
    name: str,
) -> dict[str, Answer]:
    """Post-hoc attribution filter: drop answer sentences whose claims the judge does not support.

    Every claim-bearing sentence of an answer is kept only when the judge labels all its claims
    supported against the whole context (the same check the faithfulness judge makes); an
    answer left without a claim becomes the refusal. Sentences without claims (a bare "Yes.")
    are kept. The dropped sentences are listed in the answer's trace.
    """
    out: dict[str, Answer] = {}
    for qid, a in answers.items():
        ctx = contexts[qid]
        premise = "\n\n".join(ctx.source_texts[n] for n in sorted(ctx.source_texts))
        raw = split_sentences(a.text, mode="answer")
        parsed = [parse_answer(r).sentences for r in raw]
        claims = [c for sents in parsed for s in sents for c in s.claims]
        verdicts = iter(judge_pairs(judge, [(c, premise) for c in claims]))
        kept, dropped = [], []
        for r, sents in zip(raw, parsed, strict=True):
            labels = [next(verdicts).supported for s in sents for _ in s.claims]
            ok = all(labels)
            (kept if ok else dropped).append(r)
        text = " ".join(kept) if kept else REFUSAL
        if not parse_answer(text).claims and not parse_answer(text).has_refusal and dropped:
            text = REFUSAL
        out[qid] = make_answer(
            text,
            ctx,
            name,
            **a.usage(),
            prompt_version=f"{a.prompt_version}+filter",
            support=a.support,
            trace={**a.trace, "filter_dropped": dropped},
        )
    return out


__all__ = ["GateSettings", "GatedAnswerer", "attribution_filter"]
