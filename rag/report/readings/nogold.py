"""Readings for papers the gold does not cover: the skip note, and what is shown instead.

A section that grades against gold says so in one visible note (:func:`needs_gold`) built from
the slice's :class:`~rag.evaluation.own_questions.GoldCoverage`, so every notebook words the skip
the same way; the sections that need no gold (retriever agreement, judged answers to a user's own
questions) read their numbers here, and ``answer_*_without_gold`` give the index page's sentence.
A fixed method note that describes what the gold makes possible is printed by
:func:`section_note`, worded for whether the gold covers the slice.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rag.errors import ConfigError
from rag.evaluation.own_questions import GOLD_ANSWER_METRICS, NEEDS, GoldCoverage, Need
from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md, num

#: The first sentence of every skip note (the tests and the browser check look for it).
SKIP_NOTE = "No gold questions cover these papers: this section needs gold and is skipped."
#: The first sentence of the note in a section that still shows what needs no gold.
PARTIAL_NOTE = (
    "No gold questions cover these papers: what this section grades against gold is skipped."
)


def skip_text(
    coverage: GoldCoverage, need: Need = "questions", shows: str = "", *, partial: bool = False
) -> str:
    """The skip note as plain text: what the section grades against, how much of it the slice
    has (0), that it is recorded as skipped, and (``shows``) what the page shows instead;
    ``partial`` for a section that still shows what needs no gold."""
    return (
        f"**{PARTIAL_NOTE if partial else SKIP_NOTE}** It grades against {NEEDS[need]}, and "
        f"these {coverage.papers} papers "
        f"have {coverage.n(need)}; `metrics.json` records the section as skipped, not as 0."
        + (f" {shows}" if shows else "")
    )


def needs_gold(
    coverage: GoldCoverage, need: Need = "questions", shows: str = "", *, partial: bool = False
) -> Any:
    """The skip note of a gold section, as a visible block of the rendered page."""
    return md("> " + skip_text(coverage, need, shows, partial=partial))


#: Fixed notes of notebook sections whose wording depends on gold: ``(with gold, without)``. The
#: first is the note as every page with gold shows it; ``None`` shows nothing (with gold: the
#: section's own output says it; without: its skip note does).
SECTION_NOTES: dict[str, tuple[str | None, str | None]] = {
    "retrieval.qrels": (
        "Quotes that no chunk contains, unknown paper ids and questions left without a relevant "
        "chunk are listed by the report above, never silently dropped; unanswerable questions (no "
        "evidence) are excluded from retrieval metrics and counted. Relevance is binary.",
        None,
    ),
    "retrieval.pairwise": (
        "**Method.** Each pair is a paired test on the same questions (randomisation test on "
        "per-question nDCG@10, Holm-corrected across all pairs, with the 95 % CI of the "
        'difference). "A real difference" requires both a corrected p < 0.05 and a CI that '
        "excludes 0; anything else is not distinguishable on this many questions — the honest "
        "reading of a small gold set. Every pair is in `corpus_gold_pairwise.csv`.",
        "Paired tests between retrievers need per-question relevance labels: on these papers no "
        "pair is tested. SciFact's pairs (its own human qrels) are in `scifact_pairwise.csv`.",
    ),
    "retrieval.pool_recall": (
        "The reranker can only reorder what the first stage fetched: the share of questions with "
        "at least one relevant chunk among the `rerank_pool` hybrid candidates bounds everything "
        "downstream.",
        "The reranker can only reorder what the first stage fetched; how often the candidates hold "
        "a relevant chunk needs gold evidence, so this ceiling is skipped with the section.",
    ),
    "retrieval.breakdowns": (
        None,
        "Breakdowns by question kind and per-question wins and losses compare retrievers on gold "
        "relevance labels: skipped with the section.",
    ),
    "retrieval.category_proxy": (
        "The share of the top 5 whose paper's primary arXiv category matches the question's. It "
        "needs no labels — and rewards any on-topic paper, so it cannot see whether the "
        "*evidence* was found.",
        "The share of the top 5 whose paper's primary arXiv category matches the question's: a "
        "proxy that rewards any on-topic paper, so it cannot see whether the *evidence* was found.",
    ),
    "retrieval.latency": (
        "Per-query wall time of `retrieve` (query encoding, LLM calls and reranking included) on "
        "the gold questions, on SciFact, and in a second pass over 20 gold questions. The legend "
        "says whether the LLM calls of HyDE and multi-query were made fresh or came from the disk "
        "cache; the meter below counts them. HyDE's questions run in two pinned shards (one "
        "single-thread SmolLM2 per core, `rag/shard.py`), so its latency is one query on one core "
        "while the other core serves another: ~1.4x a query alone, for ~1.4x the questions per "
        "minute (`python -m rag.bench.hyde`).",
        "Per-query wall time of `retrieve` (query encoding, LLM calls and reranking included) on "
        "your own questions (no gold question covers these papers), on SciFact, and in a second "
        "pass over the first 20 of your questions. The legend says whether the LLM calls of HyDE "
        "and multi-query were made fresh or came from the disk cache; the meter below counts them. "
        "HyDE's questions run in two pinned shards (one single-thread SmolLM2 per core, "
        "`rag/shard.py`), so its latency is one query on one core while the other core serves "
        "another: ~1.4x a query alone, for ~1.4x the questions per minute "
        "(`python -m rag.bench.hyde`).",
    ),
    "faithfulness.tradeoff": (
        "The chosen threshold (printed in section 3 with its rule: held-out gold questions "
        "outside this slice, never a graded one; see the method note) comes from the held-out "
        "table below; the curve shows what other choices would have given. It comes from one run "
        "of the same answerer at threshold 0 (every question with a span is answered), gated "
        'after the fact; the extractive "No, …" answers below the gate are left out. Faithfulness '
        "stays near 1 along the curve because every answer is a verbatim span; what the threshold "
        "trades is answered rate and F1 against negative rejection (unanswerable questions "
        "declined), shown beside it.",
        "The chosen threshold is printed in section 3 with the rule that chose it; the curve shows "
        "what other choices would have given. It comes from one run of the same answerer at "
        "threshold 0 (every question with a span is answered), gated after the fact; the "
        'extractive "No, …" answers below the gate are left out. With gold, the threshold trades '
        "answered rate and F1 against negative rejection (unanswerable questions declined); both "
        "need gold answers and (un)answerable labels, so on these papers the curve shows only "
        "answered rate against judged faithfulness.",
    ),
    "faithfulness.baselines": (
        "Closed book is graded against the retrieved contexts it never saw (are its claims what "
        "the sources say?); the noisy rows are graded against their own, noisier contexts. "
        "`| noisy` adds random chunks of other papers to the retrieved ones; `| noisy-gold` also "
        "removes every chunk holding gold evidence, so the faithful response to an answerable "
        "question becomes a refusal.",
        "Closed book is graded against the retrieved contexts it never saw (are its claims what "
        "the sources say?); the noisy rows are graded against their own, noisier contexts. "
        "`| noisy` adds random chunks of other papers to the retrieved ones. The `| noisy-gold` "
        "rows, which also remove every chunk holding gold evidence, need gold evidence and are not "
        "run on these papers.",
    ),
    "faithfulness.traces": (
        "`traces.jsonl` (one line per question and answerer) holds the question, the gold answer, "
        "the context's chunks (id, paper, page), the prompt version, the answer and the answerer's "
        "decision, its claims with the judge's verdicts and reasons, each citation and whether its "
        "sources support the sentence, F1/EM, latency and tokens. Load it with pandas:",
        "`traces.jsonl` (one line per question and answerer) holds the question, the context's "
        "chunks (id, paper, page), the prompt version, the answer and the answerer's decision, its "
        "claims with the judge's verdicts and reasons, each citation and whether its sources "
        "support the sentence, latency and tokens; the gold answer and F1/EM are empty (no gold "
        "covers these papers). Load it with pandas:",
    ),
}


def section_note(name: str, coverage: GoldCoverage, need: Need = "questions") -> Any:
    """The fixed note of a section (:data:`SECTION_NOTES`), worded for whether ``coverage`` has
    ``need``: the note with gold, or its gold-free wording (``None``: nothing is shown)."""
    if name not in SECTION_NOTES:
        raise ConfigError(f"unknown section note {name!r}: use one of {', '.join(SECTION_NOTES)}")
    with_gold, without = SECTION_NOTES[name]
    text = with_gold if coverage.covers(need) else without
    return md(text) if text is not None else None


def coverage_reading(coverage: GoldCoverage) -> Any:
    """What the gold and QASPER files hold for this slice, and which sections that leaves."""
    c = coverage
    return md(
        f"**Gold on this slice.** {c.papers} papers; {c.questions} answerable gold questions, "
        f"{c.evidence} gold evidence quotes and {c.qasper} QASPER questions fall on them. "
        + (
            "Sections graded against gold are skipped below, each with a note; everything that "
            "needs no gold still runs."
            if not c.covers("questions")
            else "Every section can be graded."
        )
    )


def own_questions_reading(n: int, n_named: int, path: str) -> Any:
    """Where the questions come from when the gold has none on these papers."""
    return md(
        f"**Questions.** No gold question covers these papers, so the {n} questions come from "
        f"`{path}` (a user's own file: questions only, {n_named} naming the papers they are "
        "about). They carry no reference answer and no evidence: only metrics that need no gold "
        "are computed on them."
    )


def agreement_reading(table: pd.DataFrame, named: pd.DataFrame, k: int) -> Any:
    """How much the retrievers' top-k overlap, and how often they reach the named papers."""
    col = f"overlap@{k}"
    if table.empty:
        return md("**Reading.** One retriever only: nothing to compare.")
    t = table.sort_values(col)
    lo, hi = t.iloc[0], t.iloc[-1]

    def pair(r: pd.Series) -> str:
        ci = CI(r[col], r["ci_low"], r["ci_high"], int(r["n"]), "stored")
        return f"{r['a']} and {r['b']} {interval(ci, 2)}"

    text = (
        f"**Reading.** Without labels, agreement says where the choice of retriever matters, not "
        f"which is right. On {int(lo['n'])} questions the top-{k} chunks overlap least for "
        f"{pair(lo)} and most for {pair(hi)}."
    )
    named = named[named["n"] > 0]
    if len(named):
        nc = f"named_paper@{k}"
        parts = [f"{r['retriever']} {num(r[nc], 2)}" for _, r in named.iterrows()]
        text += (
            f" Share of the {int(named['n'].iloc[0])} questions that name their papers with a "
            f"chunk of one of them in the top {k}: {join(parts)} (the asker's own paper-level "
            "label, not evidence)."
        )
    return md(text)


def _gold_free_line(name: str, a: dict[str, Any]) -> str:
    f = a["faithfulness"]
    cr = CI.from_dict(a["citation_recall"])
    return (
        f"{name}: faithfulness {interval(CI.from_dict(f), 2)} over {f['n_scored']} scored "
        f"answers, answered rate {f['answered_rate']:.2f}, citation support "
        f"{interval(cr, 2)}, cost ${a['cost_usd']:.4f}"
    )


def gold_needed_metrics() -> str:
    """The gold-graded answer metrics, named for a reader."""
    return join(
        [
            "token F1 and exact match (need a reference answer)",
            "yes/no accuracy (needs a gold yes/no)",
            "negative and false rejection (need gold-(un)answerable questions)",
            "the noisy-gold baseline and the worked examples (need gold evidence chunks)",
        ]
    )


def faithfulness_without_gold(per_answerer: dict[str, Any], judge_ba: float) -> Any:
    """Each answerer's gold-free numbers on the user's questions, and what needs gold."""
    lines = [f"- {_gold_free_line(n, a)}" for n, a in per_answerer.items()]
    return md(
        f"**Reading.** Judged by the offline judge (balanced accuracy {judge_ba:.2f} on human "
        "labels) against each answer's own sources, no gold needed:\n\n"
        + "\n".join(lines)
        + "\n\nCitation support is ALCE citation recall: the share of answer sentences whose "
        "cited sources support them. Not computed here, because they need gold: "
        + gold_needed_metrics()
        + f" ({len(GOLD_ANSWER_METRICS)} keys per answerer are recorded as skipped)."
    )


def headline_without_gold(per_answerer: dict[str, Any]) -> dict[str, str]:
    """Index headline on own questions: faithfulness beside answered rate and citation support."""
    out = {}
    for n, a in per_answerer.items():
        f, cr = a["faithfulness"], a["citation_recall"]["mean"]
        fa = "–" if f["mean"] is None else f"{f['mean']:.2f}"
        out[n] = f"faithfulness {fa} · answered {f['answered_rate']:.2f} · citation support " + (
            "–" if cr is None else f"{cr:.2f}"
        )
    return out


def no_follow_ups(coverage: GoldCoverage) -> Any:
    """Why notebook 06 has nothing to measure: no gold, or a rule that yields no follow-up."""
    if not coverage.covers("questions"):
        return needs_gold(
            coverage,
            shows="The follow-ups are gold questions with a name replaced, and they keep that "
            "question's gold chunks as relevance labels, so sections 2–5 have nothing to run on.",
        )
    return md(
        "> **The construction rule yields no follow-up on these papers:** sections 2–5 are "
        "skipped and recorded as skipped."
    )


def answer_no_follow_ups(coverage: GoldCoverage) -> str:
    """The index page's sentence for notebook 06 without follow-ups."""
    if not coverage.covers("questions"):
        return (
            "No gold question covers these papers, and the follow-ups are built from gold "
            "questions: the rewrite comparison is skipped."
        )
    return "The construction rule yields no follow-up on these papers: nothing to measure."


def answer_chunk_without_gold(sizes: pd.DataFrame, indexed: str) -> str:
    """The index page's sentence for notebook 02 when no gold quote falls on the papers."""
    counts = join([f"`{s}` {int(r['chunks']):,}" for s, r in sizes.iterrows()])
    return (
        f"Chunks per strategy: {counts}; notebooks 03–05 index `{indexed}`. No gold quote falls "
        "on these papers, so whether evidence survives chunking is not measured."
    )


def answer_retrieval_without_gold(scifact: dict[str, Any], table: pd.DataFrame, k: int) -> str:
    """The index page's sentence for notebook 04 without gold: SciFact and agreement."""
    sf = [
        f"{n} {num(v['ndcg@10']['mean'])}"
        for n, v in scifact.items()
        if isinstance(v, dict) and "ndcg@10" in v
    ]
    col = f"overlap@{k}"
    agree = (
        f"; on the user's questions, top-{k} overlap ranges {num(table[col].min(), 2)}–"
        f"{num(table[col].max(), 2)} across retriever pairs"
        if len(table)
        else ""
    )
    return (
        f"SciFact nDCG@10 (its own human qrels): {join(sf)}{agree}. No gold question covers "
        "these papers, so retrieval on them is not graded."
    )


def answer_faithfulness_without_gold(
    per_answerer: dict[str, Any], judge_ba: float, judge_ci: tuple[float, float], n: int
) -> str:
    """The index page's sentence for notebook 05 on a user's own questions."""
    parts = [_gold_free_line(name, a) for name, a in per_answerer.items()]
    return (
        f"On {n} questions without gold, judged by an offline judge that agrees with humans at "
        f"balanced accuracy {interval(CI(judge_ba, *judge_ci, 0, 'stored'))}: "
        + "; ".join(parts)
        + ". Answer F1 and negative rejection need gold and are not measured."
    )


__all__ = [
    "PARTIAL_NOTE",
    "SECTION_NOTES",
    "SKIP_NOTE",
    "agreement_reading",
    "answer_no_follow_ups",
    "answer_chunk_without_gold",
    "answer_faithfulness_without_gold",
    "answer_retrieval_without_gold",
    "coverage_reading",
    "faithfulness_without_gold",
    "gold_needed_metrics",
    "headline_without_gold",
    "needs_gold",
    "no_follow_ups",
    "own_questions_reading",
    "section_note",
    "skip_text",
]
