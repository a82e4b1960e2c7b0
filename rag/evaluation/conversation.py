"""Follow-up questions built from the gold set, to measure what conversational rewriting recovers.

**The construction rule** (fixed before any measurement; notebook 06 prints it):

1. Take the answerable single-paper gold questions whose paper is in the corpus, in gold-file
   order, grouped by paper.
2. For each question *q* of a paper, look for its *entity*: the first name-like token of *q*
   (:func:`rag.retrieval.rewrite.name_tokens`: camel-case, acronym or letters-with-digits words
   such as "InferSent", "CoVe", "BM25") that also occurs as a whole word in an *earlier* question
   of the same paper. The earliest such question is the *first turn*. A question with no such
   token yields no follow-up.
3. The *follow-up* is *q* with every whole-word occurrence of the entity — with a preceding
   "the"/"a" and a trailing "'s" — replaced by "this model" ("This model" at the start,
   "this model's" for the possessive).
4. The conversation is the first turn as the user's message, then the follow-up. No assistant
   turn is included: it would depend on an answerer, and the rule should not.

The follow-up keeps the chunk qrels of *q*, and *q* itself is the upper bound (what a perfect
rewrite would retrieve with). A rewrite *restores the entity* when the entity occurs in it
(case-insensitive). The rule rewriter resolves "this model" to the first name of the last user
turn, which uses the same notion of a name as step 2 — so its restoration rate is an optimistic
figure for this construction, not for follow-ups in the wild.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag.evaluation.gold import GoldItem
from rag.evaluation.own_questions import GoldCoverage
from rag.evaluation.stats import bootstrap_ci
from rag.retrieval.rewrite import LLMRewriter, Rewrite, name_tokens, rewrite
from rag.types import AsDict

#: What replaces the entity in a follow-up.
REFERENCE = "this model"


@dataclass(frozen=True, slots=True)
class FollowUp(AsDict):
    """One constructed follow-up: the gold question ``qid`` asked after ``first_qid``."""

    qid: str
    paper: str
    first_qid: str
    first_turn: str
    original: str
    follow_up: str
    entity: str

    def history(self) -> list[dict[str, str]]:
        """The conversation before the follow-up (the first turn only; see rule 4)."""
        return [{"role": "user", "content": self.first_turn}]


def _occurs(token: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text) is not None


def replace_entity(question: str, entity: str) -> str:
    """Rule 3: every whole-word ``entity`` (with "the"/"a" before, "'s" after) → "this model"."""
    pattern = re.compile(
        rf"(?:\b(?:the|The|a|A|an|An)\s+)?(?<![\w-]){re.escape(entity)}(?![\w-])('s)?"
    )

    def sub(m: re.Match[str]) -> str:
        ref = REFERENCE + ("'s" if m.group(1) else "")
        return ref[0].upper() + ref[1:] if m.start() == 0 else ref

    return pattern.sub(sub, question)


def build_follow_ups(items: Sequence[GoldItem], papers: set[str] | None = None) -> list[FollowUp]:
    """Follow-ups by the module's construction rule, in gold-file order."""
    by_paper: dict[str, list[GoldItem]] = {}
    for g in items:
        if g.answerable and g.kind == "single-paper" and len(g.papers) == 1:
            if papers is None or g.papers[0] in papers:
                by_paper.setdefault(g.papers[0], []).append(g)
    out = []
    for paper, qs in by_paper.items():
        for j, q in enumerate(qs):
            for entity in name_tokens(q.question):
                first = next((p for p in qs[:j] if _occurs(entity, p.question)), None)
                if first is not None:
                    follow = replace_entity(q.question, entity)
                    out.append(FollowUp(q.qid, paper, first.qid, first.question, q.question,
                                        follow, entity))  # fmt: skip
                    break
    order = {g.qid: i for i, g in enumerate(items)}
    return sorted(out, key=lambda f: order[f.qid])


def rewrite_follow_ups(
    follow_ups: Sequence[FollowUp], llm_rewriter: LLMRewriter | None = None
) -> dict[str, Rewrite]:
    """Each follow-up rewritten by the rule rewriter (``llm_rewriter`` None) or the LLM one, with
    the service's own skip rule (:func:`rag.retrieval.rewrite.rewrite`)."""
    return {f.qid: rewrite(f.history(), f.follow_up, llm_rewriter=llm_rewriter) for f in follow_ups}


def conditions(
    follow_ups: Sequence[FollowUp], rewrites: Mapping[str, Mapping[str, Rewrite]]
) -> dict[str, dict[str, str]]:
    """Queries ``{condition: {qid: text}}``: the raw follow-up, each rewriter's rewrite, and the
    original standalone question (the upper bound)."""
    out = {"follow-up (raw)": {f.qid: f.follow_up for f in follow_ups}}
    for name, rw in rewrites.items():
        out[name] = {qid: r.query for qid, r in rw.items()}
    out["original (upper bound)"] = {f.qid: f.original for f in follow_ups}
    return out


def restored(follow_ups: Sequence[FollowUp], queries: Mapping[str, str]) -> dict[str, bool]:
    """Per follow-up: does the query contain the entity (case-insensitive)?"""
    return {f.qid: f.entity.lower() in queries[f.qid].lower() for f in follow_ups}


def restoration_table(
    follow_ups: Sequence[FollowUp],
    queries_by_condition: Mapping[str, Mapping[str, str]],
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per condition: follow-ups whose query holds the entity, share with a 95 % CI
    (percentile bootstrap over follow-ups)."""
    rows = []
    for name, queries in queries_by_condition.items():
        flags = [float(v) for v in restored(follow_ups, queries).values()]
        ci = bootstrap_ci(flags, seed=seed, method="percentile") if len(flags) > 1 else None
        share = sum(flags) / len(flags) if flags else float("nan")
        rows.append({"condition": name, "n": len(flags), "restored": int(sum(flags)),
                     "share": share, "ci_low": ci.low if ci else share,
                     "ci_high": ci.high if ci else share})  # fmt: skip
    return pd.DataFrame(rows).set_index("condition")


def follow_ups_skipped(coverage: GoldCoverage) -> dict[str, Any]:
    """The ``metrics.json`` record of a run with no follow-up: no gold on the papers (the
    follow-ups are gold questions), or gold on which the construction rule yields none."""
    if not coverage.covers("questions"):
        return coverage.skipped("questions")
    return {"skipped": "the construction rule yields no follow-up on these papers"}
