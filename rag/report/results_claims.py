"""Every checked number of ``docs/results.md``, the results table in full, and its check.

The README shows one short row per finding, over these claims' sources
(:mod:`rag.report.readme_claims`); this page keeps every number behind each. The files and keys
are named in :mod:`rag.report.claim_sources`.
"""

from __future__ import annotations

from pathlib import Path

from rag import paths
from rag.report.claim_sources import (
    CHUNK,
    CONVERSATION,
    E5,
    EMB_PAIRED,
    EMBEDDERS,
    FAITHFULNESS,
    GEMMA,
    GEMMA_JUDGE,
    GEMMA_ROW,
    INDEX,
    INGEST,
    JUDGE_PAIRED,
    MINILM,
    MPNET,
    NOMIC,
    PAIRWISE,
    PAPERS,
    QWEN_JUDGE,
    RELATED_PAIRED,
    RETRIEVAL,
    SUMMARIES,
    SWEEP,
    answerer,
    ci,
    js,
    pair,
)  # fmt: skip
from rag.report.readme_numbers import (
    Claim,
    Csv,
    Json,
    Problem,
    Product,
    table_problems,
    unchecked_numbers,
)

#: Every checked number of the full results table (``docs/results.md``).
RESULTS_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "The corpus arrives intact",
        "{parsed:d}/{requested:d} papers parsed, {failed:d} failed, {changed:d} changed sha256, "
        "{pages:,d} pages | {n:d} papers",
        js(INGEST, parsed="papers.parsed", requested="papers.requested", failed="papers.failed")
        | js(INGEST, changed="papers.changed", pages="pages", n="papers.requested"),
    ),
    Claim(
        "The parser keeps the evidence",
        "gold quotes found {found:d}/{n:d} ({lo:.1f}–{hi:.1f}); human QASPER paragraphs "
        "{q:.3f} ({q_lo:.3f}–{q_hi:.1f}) | {quotes:d} quotes, {paragraphs:d} paragraphs",
        js(INGEST, found="evidence_found.gold.found", n="evidence_found.gold.n")
        | js(INGEST, lo="evidence_found.gold.ci.ci_low", hi="evidence_found.gold.ci.ci_high")
        | ci(INGEST, "evidence_found.qasper.ci", "q")
        | js(INGEST, quotes="evidence_found.gold.n", paragraphs="evidence_found.qasper.n"),
    ),
    Claim(
        "Chunking keeps evidence in one piece",
        "fixed {f:.3f} ({f_lo:.3f}–{f_hi:.3f}), sentence {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), "
        "section {c:.3f} ({c_lo:.3f}–{c_hi:.1f}) | {n:d} quotes",
        {
            f"{k}{end}": Json(CHUNK, f"strategies.{s}.evidence_intact.{field}")
            for k, s in (("f", "fixed"), ("s", "sentence"), ("c", "section"))
            for end, field in (("", "rate"), ("_lo", "ci_low"), ("_hi", "ci_high"))
        }
        | js(CHUNK, n="strategies.fixed.evidence_intact.n"),
    ),
    Claim(
        "The SciFact table is reproduced",
        "nDCG@10 BM25 {b:.3f} ({b_lo:.3f}–{b_hi:.3f}; published 0.665), MiniLM dense {d:.3f} "
        "({d_lo:.3f}–{d_hi:.3f}; published 0.645), hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}) "
        "| {n:d} queries",
        ci(RETRIEVAL, "scifact.bm25.ndcg@10", "b")
        | ci(RETRIEVAL, "scifact.dense.ndcg@10", "d")
        | ci(RETRIEVAL, "scifact.hybrid.ndcg@10", "h")
        | js(RETRIEVAL, n="scifact.hybrid.ndcg@10.n"),
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
            for k, v in ci(RETRIEVAL, f"corpus_gold.chunk.{r}.ndcg@10", name).items()
        }  # fmt: skip
        | js(RETRIEVAL, n="corpus_gold.chunk.hybrid.n"),
    ),
    Claim(
        "Which gaps are real",
        "hybrid > dense by {hd:.3f} ({hd_lo:.3f}–{hd_hi:.3f}, p = {hd_p:.3f}); hybrid > HyDE by "
        "{hy:.3f} ({hy_lo:.3f}–{hy_hi:.3f}, p = {hy_p:.3f}); multi-query > HyDE by {my:.3f} "
        "({my_lo:.3f}–{my_hi:.3f}, p = {my_p:.3f}); BM25 vs hybrid not distinguishable "
        "| {n:d}, Holm over {pairs:d} pairs",
        pair("dense", "hybrid", "hd", flip=True)
        | pair("hybrid", "hyde", "hy")
        | pair("multi-query", "hyde", "my")
        | {
            "n": Csv(PAIRWISE, "n", (("a", "dense"), ("b", "hybrid"))),
            "pairs": Csv(PAIRWISE, "a", how="count"),
        },
    ),
    Claim(
        "Search is fast on 2 cores",
        "p50 dense {d:.1f} ms incl. query encoding, BM25 {b:.2f} ms, hybrid {h:.1f} ms; HyDE "
        "{y:,.0f} ms with a fresh LLM call | {q:d} queries, {chunks:,d} chunks",
        js(INDEX, d="headline.dense p50 ms (1x)", b="headline.BM25 p50 ms (1x)")
        | js(RETRIEVAL, h="corpus_gold.chunk.hybrid.latency_ms.p50")
        | js(RETRIEVAL, y="corpus_gold.chunk.hyde.latency_ms.p50")
        | js(INDEX, q="latency_queries", chunks="chunks"),
    ),
    Claim(
        "The offline judge is checked",
        "offline-v2 balanced accuracy {ba:.3f} ({lo:.3f}–{hi:.3f}), CONTRADICT recall "
        "{k:d}/{kn:d}; a 1.5B LLM judge is worse: Qwen2.5-Coder-1.5B {q:.3f} ({q_lo:.3f}–"
        "{q_hi:.3f}), {qk:d}/{qkn:d}, paired {qd:+.3f} ({qd_lo:.3f}–{qd_hi:.3f}); refitted on "
        "EmbeddingGemma it is not distinguishable: {g:.3f}, {gk:d}/{gkn:d}, paired {gd:+.3f} "
        "({gd_lo:.3f}–{gd_hi:.3f}) | {n:d} human-labelled SciFact dev pairs",
        {
            name: Json(FAITHFULNESS, f"faithfulness_judge.{key}")
            for name, key in (
                ("ba", "balanced_accuracy"),
                ("lo", "ci_low"),
                ("hi", "ci_high"),
                ("k", "contradict_k"),
                ("kn", "contradict_n"),
                ("n", "n"),
            )
        }  # fmt: skip
        | js(QWEN_JUDGE, q="other.balanced_accuracy", q_lo="other.ci_low", q_hi="other.ci_high")
        | js(QWEN_JUDGE, qk="other.contradict_k", qkn="other.contradict_n")
        | js(
            QWEN_JUDGE,
            qd=f"{JUDGE_PAIRED}.diff",
            qd_lo=f"{JUDGE_PAIRED}.ci_low",
            qd_hi=f"{JUDGE_PAIRED}.ci_high",
        )
        | js(
            GEMMA_JUDGE,
            g="other.balanced_accuracy",
            gk="other.contradict_k",
            gkn="other.contradict_n",
        )
        | js(
            GEMMA_JUDGE,
            gd=f"{JUDGE_PAIRED}.diff",
            gd_lo=f"{JUDGE_PAIRED}.ci_low",
            gd_hi=f"{JUDGE_PAIRED}.ci_high",
        ),
    ),
    Claim(
        "The extractive answerer stays faithful",
        "faithfulness {f:.2f} (optimistic: its spans are the judge's picks), answered {a:.0f} %, "
        "answer F1 {f1:.3f} ({f1_lo:.3f}–{f1_hi:.3f}), declines {dec:d} of {u:d} unanswerable "
        "| {scored:d} answered of {n:d}",
        js(FAITHFULNESS, f="answerers.extractive.faithfulness.mean", n="questions.n")
        | {"a": Json(FAITHFULNESS, "answerers.extractive.faithfulness.answered_rate", 100)}
        | ci(FAITHFULNESS, "answerers.extractive.answer_f1", "f1", listed=True)
        | {
            "dec": Product(
                Json(FAITHFULNESS, "answerers.extractive.negative_rejection"),
                Json(FAITHFULNESS, "answerers.extractive.negative_rejection_n"),
            )
        }
        | js(FAITHFULNESS, u="answerers.extractive.negative_rejection_n")
        | js(FAITHFULNESS, scored="answerers.extractive.faithfulness.n_scored"),
    ),
    Claim(
        "The local LLM is not",
        "SmolLM2-135M faithfulness {l:.2f} ({l_lo:.2f}–{l_hi:.2f}), citation recall {l_c:.3f}; "
        "under a GBNF grammar {g:.2f} ({g_lo:.2f}–{g_hi:.2f}), citation recall {g_c:.2f}; quote "
        "grammar {q:.2f} ({q_lo:.2f}–{q_hi:.2f}) but answers {q_a:.0f} %; closed-book {cb:.2f} "
        "({cb_lo:.2f}–{cb_hi:.2f}) | {n:d} questions ({a:d} answerable)",
        answerer("local", "l")
        | answerer("local+gbnf", "g")
        | answerer("local+quote", "q")
        | answerer("closed-book", "cb")
        | js(FAITHFULNESS, l_c="answerers.local.citation_recall.mean")
        | js(FAITHFULNESS, g_c="answerers.local+gbnf.citation_recall.mean")
        | {"q_a": Json(FAITHFULNESS, "answerers.local+quote.faithfulness.answered_rate", 100)}
        | js(FAITHFULNESS, n="questions.n", a="questions.answerable"),
    ),
    Claim(
        "Rewriting follow-ups",
        "hybrid nDCG@10: raw follow-up {r:.3f} ({r_lo:.3f}–{r_hi:.3f}), rule rewriter {u:.3f} "
        "({u_lo:.3f}–{u_hi:.3f}), SmolLM2 rewriter {s:.3f} ({s_lo:.3f}–{s_hi:.3f}), original "
        "question {o:.3f} ({o_lo:.3f}–{o_hi:.3f}) | {n:d} follow-ups",
        ci(CONVERSATION, "retrieval.follow-up (raw).ndcg@10", "r")
        | ci(CONVERSATION, "retrieval.rewrite: rules.ndcg@10", "u")
        | ci(CONVERSATION, "retrieval.rewrite: llm:smollm2-135m.ndcg@10", "s")
        | ci(CONVERSATION, "retrieval.original (upper bound).ndcg@10", "o")
        | js(CONVERSATION, n="follow_ups.n"),
    ),
    Claim(
        "The paper desk holds up",
        "citation links resolved by title alone: precision {pk:d}/{pn:d} ({p_lo:.3f}–{p_hi:.1f}), "
        "recall {rk:d}/{rn:d}; related work recall@10: fusion {f:.3f} ({f_lo:.3f}–{f_hi:.3f}) vs "
        "text {t:.3f}, {d:+.3f} ({d_lo:.3f}–{d_hi:.3f}, p = {d_p:.3f}); extractive summaries "
        "ROUGE-L {e:.3f} ({e_lo:.3f}–{e_hi:.3f}) vs lead {lead:.3f} | {links:d} in-corpus links, "
        "{papers:d} papers, {summaries:d} summaries (`summary_eval`; the report draws {drawn:d})",
        {
            name: Json(PAPERS, f"title_resolution.held_out.{key}")
            for name, key in (
                ("pk", "precision.k"),
                ("pn", "precision.n"),
                ("p_lo", "precision.exact_low"),
                ("p_hi", "precision.exact_high"),
                ("rk", "recall.k"),
                ("rn", "recall.n"),
            )
        }  # fmt: skip
        | ci(PAPERS, "related_work.methods.fusion.recall@10", "f")
        | js(
            PAPERS, t="related_work.methods.text.recall@10.mean", d_p=f"{RELATED_PAIRED}.p_adjusted"
        )
        | {
            "d": Json(PAPERS, f"{RELATED_PAIRED}.diff", -1),
            "d_lo": Json(PAPERS, f"{RELATED_PAIRED}.ci_high", -1),
        }
        | {"d_hi": Json(PAPERS, f"{RELATED_PAIRED}.ci_low", -1)}
        | ci(SUMMARIES, "metrics.extractive.rouge_l", "e")
        | js(SUMMARIES, lead="metrics.lead.rouge_l.mean", summaries="n_papers")
        | js(PAPERS, links="graph.edges_in_corpus", papers="related_work.queries")
        | js(PAPERS, drawn="summaries.n_papers"),
    ),
    Claim(
        "Chunking × embedder does not matter here",
        "every cell minus the base: {lo:+.3f} to {hi:+.3f} chunk nDCG@10, all Holm p = {p:d} "
        "| {n:d} questions × {cells:d} cells",
        {
            "lo": Csv(f"{SWEEP}/paired.csv", "diff", how="min"),
            "hi": Csv(f"{SWEEP}/paired.csv", "diff", how="max"),
            "p": Csv(f"{SWEEP}/paired.csv", "p_adjusted", how="min"),
            "n": Csv(f"{SWEEP}/paired.csv", "n", how="max"),
            "cells": Csv(f"{SWEEP}/results.csv", "cell", how="distinct"),
        },
    ),
    Claim(
        "Only EmbeddingGemma beats MiniLM, and only dense",
        "chunk nDCG@10 dense / hybrid against MiniLM's {m:.3f} / {mh:.3f}: embeddinggemma-300m "
        "{g:.3f} / {gh:.3f} (dense {gd:+.3f}, {gd_lo:.3f}–{gd_hi:.3f}, Holm p = {gd_p:.3f}; "
        "hybrid {gy:+.3f}, Holm p = {gy_p:.2f}), nomic-embed-v1.5 {d:.3f} / {h:.3f}, e5-small "
        "{e:.3f} / {eh:.3f}, mpnet-base-v2 {p:.3f} / {ph:.3f}; with Gemma, fusing BM25 adds "
        "nothing ({f:+.3f}, p = {f_p:.2f}) | {n:d} gold questions, opt-in",
        js(EMBEDDERS, m=f"{MINILM}.dense.ndcg@10.mean", mh=f"{MINILM}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, g=f"{GEMMA}.dense.ndcg@10.mean", gh=f"{GEMMA}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, d=f"{NOMIC}.dense.ndcg@10.mean", h=f"{NOMIC}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, e=f"{E5}.dense.ndcg@10.mean", eh=f"{E5}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, p=f"{MPNET}.dense.ndcg@10.mean", ph=f"{MPNET}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, n=f"{GEMMA}.dense.n")
        | js(EMBEDDERS, gd=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=dense].diff")
        | js(EMBEDDERS, gd_lo=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=dense].ci_low")
        | js(EMBEDDERS, gd_hi=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=dense].ci_high")
        | js(EMBEDDERS, gd_p=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=dense].p_holm")
        | js(EMBEDDERS, gy=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=hybrid].diff")
        | js(EMBEDDERS, gy_p=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=hybrid].p_holm")
        | js(
            EMBEDDERS,
            f=f"hybrid_vs_dense[{GEMMA_ROW}].diff",
            f_p=f"hybrid_vs_dense[{GEMMA_ROW}].p_holm",
        ),
    ),
)

#: Numbers of the full table that are not checked, by row, each with why (also in
#: ``tests/test_freshness.py``'s docstring).
RESULTS_UNCHECKED: dict[str, dict[str, str]] = {
    "The SciFact table is reproduced": {
        "published 0.665": "BM25's nDCG@10 in the BEIR paper, a literature constant",
        "published 0.645": "MiniLM's nDCG@10 on the MTEB leaderboard, a literature constant",
    },
}


def results_page_problems(root: Path | None = None) -> list[Problem]:
    """The full table of ``docs/results.md`` checked as the README's is: numbers that differ from
    their source (:data:`RESULTS_CLAIMS`), then numbers no claim checks."""
    root = root or paths.project_root()
    text = (root / "docs" / "results.md").read_text(encoding="utf-8")
    return [
        *table_problems(text, RESULTS_CLAIMS, root, "docs/results.md"),
        *unchecked_numbers(text, RESULTS_CLAIMS, RESULTS_UNCHECKED, "docs/results.md"),
    ]
