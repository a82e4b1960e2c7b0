"""Every checked number of the README's results table and where it comes from.

One :class:`~rag.report.readme_numbers.Claim` per row, each number naming the committed file and
key it is read from, and the numbers left unchecked with the reason; the checking itself is
:mod:`rag.report.readme_numbers`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rag import paths
from rag.report.readme_numbers import (
    _LONE_NUMBER,
    Claim,
    Csv,
    Json,
    Problem,
    Product,
    claim_problems,
    results_rows,
)

# --- the table's sources: the files notebooks 01-07 (and two benches) committed ------------------

_D = "outputs/default"
_I, _C, _X, _R, _F, _V, _P = (
    f"{_D}/{nb}/metrics.json"
    for nb in ("01_ingest", "02_chunk", "03_index", "04_retrieval", "05_faithfulness",
               "06_conversation", "07_papers")
)  # fmt: skip
_PAIRS = f"{_D}/04_retrieval/tables/corpus_gold_pairwise.csv"
_SUMMARIES = "outputs/bench/summaries.json"
_SWEEP = "outputs/sweeps/chunk_embedder"
_EMB, _EP, _GEM = "outputs/bench/embedders.json", "paired_vs_minilm", "embedder=embeddinggemma-300m"
_NOMIC = "embedders.nomic-embed-v1.5.corpus_gold_chunk"
_GEMMA = "embedders.embeddinggemma-300m.corpus_gold_chunk"
_E5, _MPNET = "embedders.e5-small.corpus_gold_chunk", "embedders.mpnet-base-v2.corpus_gold_chunk"
_MINILM = "embedders.minilm.corpus_gold_chunk"
_QJ, _QP = "outputs/bench/judge_qwen2.5-coder-1.5b.json", "paired_other_minus_offline"
_GJ = "outputs/bench/judge_offline_embeddinggemma-300m.json"
_RW = "related_work.paired_tests.recall@10[a=text,b=fusion]"


def _js(file: str, **path: str) -> dict[str, Json]:
    return {name: Json(file, p) for name, p in path.items()}


def _ci(file: str, path: str, name: str, *, listed: bool = False) -> dict[str, Json]:
    """``name``, ``name_lo``, ``name_hi`` of a ``{mean, ci_low, ci_high}`` block (``listed``:
    ``{mean, ci: [low, high]}``)."""
    lo, hi = ("ci.0", "ci.1") if listed else ("ci_low", "ci_high")
    return _js(
        file, **{name: f"{path}.mean", f"{name}_lo": f"{path}.{lo}", f"{name}_hi": f"{path}.{hi}"}
    )


def _pair(a: str, b: str, name: str, *, flip: bool = False) -> dict[str, Csv]:
    """A row of 04's paired table; ``flip``: the README states ``b`` minus ``a``."""
    w, s = (("a", a), ("b", b)), -1.0 if flip else 1.0
    lo, hi = ("ci_high", "ci_low") if flip else ("ci_low", "ci_high")
    return {
        name: Csv(_PAIRS, "diff", w, scale=s),
        f"{name}_lo": Csv(_PAIRS, lo, w, scale=s),
        f"{name}_hi": Csv(_PAIRS, hi, w, scale=s),
        f"{name}_p": Csv(_PAIRS, "p_adjusted", w),
    }


def _ans(row: str, name: str, *, listed: bool = True) -> dict[str, Json]:
    return _ci(_F, f"answerers.{row}.faithfulness", name, listed=listed)


#: Every checked number of the README's results table.
README_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "The corpus arrives intact",
        "{parsed:d}/{requested:d} papers parsed, {failed:d} failed, {changed:d} changed sha256, "
        "{pages:,d} pages | {n:d} papers",
        _js(_I, parsed="papers.parsed", requested="papers.requested", failed="papers.failed")
        | _js(_I, changed="papers.changed", pages="pages", n="papers.requested"),
    ),
    Claim(
        "The parser keeps the evidence",
        "gold quotes found {found:d}/{n:d} ({lo:.1f}–{hi:.1f}); human QASPER paragraphs "
        "{q:.3f} ({q_lo:.3f}–{q_hi:.1f}) | {quotes:d} quotes, {paragraphs:d} paragraphs",
        _js(_I, found="evidence_found.gold.found", n="evidence_found.gold.n")
        | _js(_I, lo="evidence_found.gold.ci.ci_low", hi="evidence_found.gold.ci.ci_high")
        | _ci(_I, "evidence_found.qasper.ci", "q")
        | _js(_I, quotes="evidence_found.gold.n", paragraphs="evidence_found.qasper.n"),
    ),
    Claim(
        "Chunking keeps evidence in one piece",
        "fixed {f:.3f} ({f_lo:.3f}–{f_hi:.3f}), sentence {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), "
        "section {c:.3f} ({c_lo:.3f}–{c_hi:.1f}) | {n:d} quotes",
        {
            f"{k}{end}": Json(_C, f"strategies.{s}.evidence_intact.{field}")
            for k, s in (("f", "fixed"), ("s", "sentence"), ("c", "section"))
            for end, field in (("", "rate"), ("_lo", "ci_low"), ("_hi", "ci_high"))
        }
        | _js(_C, n="strategies.fixed.evidence_intact.n"),
    ),
    Claim(
        "The SciFact table is reproduced",
        "nDCG@10 BM25 {b:.3f} ({b_lo:.3f}–{b_hi:.3f}; published 0.665), MiniLM dense {d:.3f} "
        "({d_lo:.3f}–{d_hi:.3f}; published 0.645), hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}) "
        "| {n:d} queries",
        _ci(_R, "scifact.bm25.ndcg@10", "b")
        | _ci(_R, "scifact.dense.ndcg@10", "d")
        | _ci(_R, "scifact.hybrid.ndcg@10", "h")
        | _js(_R, n="scifact.hybrid.ndcg@10.n"),
    ),
    Claim(
        "Hybrid finds the corpus evidence best",
        "chunk nDCG@10 hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}), BM25 {b:.3f} ({b_lo:.3f}–"
        "{b_hi:.3f}), multi-query {m:.3f} ({m_lo:.3f}–{m_hi:.3f}), dense {d:.3f} ({d_lo:.3f}–"
        "{d_hi:.3f}), HyDE {y:.3f} ({y_lo:.3f}–{y_hi:.3f}) | {n:d} gold questions",
        {
            k: v
            for name, r in (
                ("h", "hybrid"),
                ("b", "bm25"),
                ("m", "multi-query"),
                ("d", "dense"),
                ("y", "hyde"),
            )
            for k, v in _ci(_R, f"corpus_gold.chunk.{r}.ndcg@10", name).items()
        }  # fmt: skip
        | _js(_R, n="corpus_gold.chunk.hybrid.n"),
    ),
    Claim(
        "Which gaps are real",
        "hybrid > dense by {hd:.3f} ({hd_lo:.3f}–{hd_hi:.3f}, p = {hd_p:.3f}); hybrid > HyDE by "
        "{hy:.3f} ({hy_lo:.3f}–{hy_hi:.3f}, p = {hy_p:.3f}); multi-query > HyDE by {my:.3f} "
        "({my_lo:.3f}–{my_hi:.3f}, p = {my_p:.3f}); BM25 vs hybrid not distinguishable "
        "| {n:d}, Holm over {pairs:d} pairs",
        _pair("dense", "hybrid", "hd", flip=True)
        | _pair("hybrid", "hyde", "hy")
        | _pair("multi-query", "hyde", "my")
        | {
            "n": Csv(_PAIRS, "n", (("a", "dense"), ("b", "hybrid"))),
            "pairs": Csv(_PAIRS, "a", how="count"),
        },
    ),
    Claim(
        "Search is fast on 2 cores",
        "p50 dense {d:.1f} ms incl. query encoding, BM25 {b:.2f} ms, hybrid {h:.1f} ms; HyDE "
        "{y:,.0f} ms with a fresh LLM call | {q:d} queries, {chunks:,d} chunks",
        _js(_X, d="headline.dense p50 ms (1x)", b="headline.BM25 p50 ms (1x)")
        | _js(_R, h="corpus_gold.chunk.hybrid.latency_ms.p50")
        | _js(_R, y="corpus_gold.chunk.hyde.latency_ms.p50")
        | _js(_X, q="latency_queries", chunks="chunks"),
    ),
    Claim(
        "The offline judge is checked",
        "offline-v2 balanced accuracy {ba:.3f} ({lo:.3f}–{hi:.3f}), CONTRADICT recall "
        "{k:d}/{kn:d}; a 1.5B LLM judge is worse: Qwen2.5-Coder-1.5B {q:.3f} ({q_lo:.3f}–"
        "{q_hi:.3f}), {qk:d}/{qkn:d}, paired {qd:+.3f} ({qd_lo:.3f}–{qd_hi:.3f}); refitted on "
        "EmbeddingGemma it is not distinguishable: {g:.3f}, {gk:d}/{gkn:d}, paired {gd:+.3f} "
        "({gd_lo:.3f}–{gd_hi:.3f}) | {n:d} human-labelled SciFact dev pairs",
        {
            name: Json(_F, f"faithfulness_judge.{key}")
            for name, key in (
                ("ba", "balanced_accuracy"),
                ("lo", "ci_low"),
                ("hi", "ci_high"),
                ("k", "contradict_k"),
                ("kn", "contradict_n"),
                ("n", "n"),
            )
        }  # fmt: skip
        | _js(_QJ, q="other.balanced_accuracy", q_lo="other.ci_low", q_hi="other.ci_high")
        | _js(_QJ, qk="other.contradict_k", qkn="other.contradict_n")
        | _js(_QJ, qd=f"{_QP}.diff", qd_lo=f"{_QP}.ci_low", qd_hi=f"{_QP}.ci_high")
        | _js(_GJ, g="other.balanced_accuracy", gk="other.contradict_k", gkn="other.contradict_n")
        | _js(_GJ, gd=f"{_QP}.diff", gd_lo=f"{_QP}.ci_low", gd_hi=f"{_QP}.ci_high"),
    ),
    Claim(
        "The extractive answerer stays faithful",
        "faithfulness {f:.2f} (optimistic: its spans are the judge's picks), answered {a:.0f} %, "
        "answer F1 {f1:.3f} ({f1_lo:.3f}–{f1_hi:.3f}), declines {dec:d} of {u:d} unanswerable "
        "| {scored:d} answered of {n:d}",
        _js(_F, f="answerers.extractive.faithfulness.mean", n="questions.n")
        | {"a": Json(_F, "answerers.extractive.faithfulness.answered_rate", 100)}
        | _ci(_F, "answerers.extractive.answer_f1", "f1", listed=True)
        | {
            "dec": Product(
                Json(_F, "answerers.extractive.negative_rejection"),
                Json(_F, "answerers.extractive.negative_rejection_n"),
            )
        }
        | _js(_F, u="answerers.extractive.negative_rejection_n")
        | _js(_F, scored="answerers.extractive.faithfulness.n_scored"),
    ),
    Claim(
        "The local LLM is not",
        "SmolLM2-135M faithfulness {l:.2f} ({l_lo:.2f}–{l_hi:.2f}), citation recall {l_c:.3f}; "
        "under a GBNF grammar {g:.2f} ({g_lo:.2f}–{g_hi:.2f}), citation recall {g_c:.2f}; quote "
        "grammar {q:.2f} ({q_lo:.2f}–{q_hi:.2f}) but answers {q_a:.0f} %; closed-book {cb:.2f} "
        "({cb_lo:.2f}–{cb_hi:.2f}) | {n:d} questions ({a:d} answerable)",
        _ans("local", "l")
        | _ans("local+gbnf", "g")
        | _ans("local+quote", "q")
        | _ans("closed-book", "cb")
        | _js(_F, l_c="answerers.local.citation_recall.mean")
        | _js(_F, g_c="answerers.local+gbnf.citation_recall.mean")
        | {"q_a": Json(_F, "answerers.local+quote.faithfulness.answered_rate", 100)}
        | _js(_F, n="questions.n", a="questions.answerable"),
    ),
    Claim(
        "Rewriting follow-ups",
        "hybrid nDCG@10: raw follow-up {r:.3f} ({r_lo:.3f}–{r_hi:.3f}), rule rewriter {u:.3f} "
        "({u_lo:.3f}–{u_hi:.3f}), SmolLM2 rewriter {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), original "
        "question {o:.3f} ({o_lo:.3f}–{o_hi:.3f}) | {n:d} follow-ups",
        _ci(_V, "retrieval.follow-up (raw).ndcg@10", "r")
        | _ci(_V, "retrieval.rewrite: rules.ndcg@10", "u")
        | _ci(_V, "retrieval.rewrite: llm:smollm2-135m.ndcg@10", "s")
        | _ci(_V, "retrieval.original (upper bound).ndcg@10", "o")
        | _js(_V, n="follow_ups.n"),
    ),
    Claim(
        "The paper desk holds up",
        "citation links resolved by title alone: precision {pk:d}/{pn:d} ({p_lo:.3f}–{p_hi:.1f}), "
        "recall {rk:d}/{rn:d}; related work recall@10: fusion {f:.3f} ({f_lo:.3f}–{f_hi:.3f}) vs "
        "text {t:.3f}, {d:+.3f} ({d_lo:.3f}–{d_hi:.3f}, p = {d_p:.3f}); extractive summaries "
        "ROUGE-L {e:.3f} ({e_lo:.3f}–{e_hi:.3f}) vs lead {lead:.3f} | {links:d} in-corpus links, "
        "{papers:d} papers, {summaries:d} summaries (`summary_eval`; the report draws {drawn:d})",
        {
            name: Json(_P, f"title_resolution.held_out.{key}")
            for name, key in (
                ("pk", "precision.k"),
                ("pn", "precision.n"),
                ("p_lo", "precision.exact_low"),
                ("p_hi", "precision.exact_high"),
                ("rk", "recall.k"),
                ("rn", "recall.n"),
            )
        }  # fmt: skip
        | _ci(_P, "related_work.methods.fusion.recall@10", "f")
        | _js(_P, t="related_work.methods.text.recall@10.mean", d_p=f"{_RW}.p_adjusted")
        | {"d": Json(_P, f"{_RW}.diff", -1), "d_lo": Json(_P, f"{_RW}.ci_high", -1)}
        | {"d_hi": Json(_P, f"{_RW}.ci_low", -1)}
        | _ci(_SUMMARIES, "metrics.extractive.rouge_l", "e")
        | _js(_SUMMARIES, lead="metrics.lead.rouge_l.mean", summaries="n_papers")
        | _js(_P, links="graph.edges_in_corpus", papers="related_work.queries")
        | _js(_P, drawn="summaries.n_papers"),
    ),
    Claim(
        "Chunking × embedder does not matter here",
        "every cell minus the base: {lo:+.3f} to {hi:+.3f} chunk nDCG@10, all Holm p = {p:d} "
        "| {n:d} questions × {cells:d} cells",
        {
            "lo": Csv(f"{_SWEEP}/paired.csv", "diff", how="min"),
            "hi": Csv(f"{_SWEEP}/paired.csv", "diff", how="max"),
            "p": Csv(f"{_SWEEP}/paired.csv", "p_adjusted", how="min"),
            "n": Csv(f"{_SWEEP}/paired.csv", "n", how="max"),
            "cells": Csv(f"{_SWEEP}/results.csv", "cell", how="distinct"),
        },
    ),
    Claim(
        "Only EmbeddingGemma beats MiniLM, and only dense",
        "chunk nDCG@10 dense / hybrid against MiniLM's {m:.3f} / {mh:.3f}: embeddinggemma-300m "
        "{g:.3f} / {gh:.3f} (dense {gd:+.3f}, {gd_lo:.3f}–{gd_hi:.3f}, Holm p = {gd_p:.3f}; "
        "hybrid {gy:+.3f}, Holm p = {gy_p:.2f}), nomic-embed-v1.5 {d:.3f} / {h:.3f}, e5-small "
        "{e:.3f} / {eh:.3f}, mpnet-base-v2 {p:.3f} / {ph:.3f}; with Gemma, fusing BM25 adds "
        "nothing ({f:+.3f}, p = {f_p:.2f}) | {n:d} gold questions, opt-in",
        _js(_EMB, m=f"{_MINILM}.dense.ndcg@10.mean", mh=f"{_MINILM}.hybrid.ndcg@10.mean")
        | _js(_EMB, g=f"{_GEMMA}.dense.ndcg@10.mean", gh=f"{_GEMMA}.hybrid.ndcg@10.mean")
        | _js(_EMB, d=f"{_NOMIC}.dense.ndcg@10.mean", h=f"{_NOMIC}.hybrid.ndcg@10.mean")
        | _js(_EMB, e=f"{_E5}.dense.ndcg@10.mean", eh=f"{_E5}.hybrid.ndcg@10.mean")
        | _js(_EMB, p=f"{_MPNET}.dense.ndcg@10.mean", ph=f"{_MPNET}.hybrid.ndcg@10.mean")
        | _js(_EMB, n=f"{_GEMMA}.dense.n")
        | _js(_EMB, gd=f"{_EP}[{_GEM},retriever=dense].diff")
        | _js(_EMB, gd_lo=f"{_EP}[{_GEM},retriever=dense].ci_low")
        | _js(_EMB, gd_hi=f"{_EP}[{_GEM},retriever=dense].ci_high")
        | _js(_EMB, gd_p=f"{_EP}[{_GEM},retriever=dense].p_holm")
        | _js(_EMB, gy=f"{_EP}[{_GEM},retriever=hybrid].diff")
        | _js(_EMB, gy_p=f"{_EP}[{_GEM},retriever=hybrid].p_holm")
        | _js(_EMB, f=f"hybrid_vs_dense[{_GEM}].diff", f_p=f"hybrid_vs_dense[{_GEM}].p_holm"),
    ),
)

#: Numbers of the table that are not checked, by row, each with why (also in
#: ``tests/test_freshness.py``'s docstring).
UNCHECKED: dict[str, dict[str, str]] = {
    "The SciFact table is reproduced": {
        "published 0.665": "BM25's nDCG@10 in the BEIR paper, a literature constant",
        "published 0.645": "MiniLM's nDCG@10 on the MTEB leaderboard, a literature constant",
    },
}


def readme_problems(
    readme: Path | None = None, root: Path | None = None, claims: Sequence[Claim] | None = None
) -> list[Problem]:
    """README results numbers that differ from their committed source
    (:data:`README_CLAIMS`)."""
    root = root or paths.project_root()
    rows = results_rows((readme or root / "README.md").read_text(encoding="utf-8"))
    return [p for c in claims or README_CLAIMS for p in claim_problems(c, rows, root)]


def uncovered_numbers(
    readme: Path | None = None,
    claims: Sequence[Claim] | None = None,
    unchecked: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Problem]:
    """Numbers of the results table that no claim checks and :data:`UNCHECKED` does not explain
    (a number inside backticks, such as a notebook name, is no claim)."""
    text = (readme or paths.project_root() / "README.md").read_text(encoding="utf-8")
    unchecked = UNCHECKED if unchecked is None else unchecked
    out = []
    for row, rest in results_rows(text).items():
        covered: list[tuple[int, int]] = []
        for c in claims or README_CLAIMS:
            if c.row == row and (m := c.pattern().search(rest)):
                covered += [m.span(name) for name, _ in c.fields()]
        for snippet in unchecked.get(row, {}):
            covered += [m.span() for m in re.finditer(re.escape(snippet), rest)]
        masked = re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), rest)
        for m in _LONE_NUMBER.finditer(masked):
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                out.append(Problem(f"README results row {row!r}", f"{m.group()} is not checked"))
    return out
