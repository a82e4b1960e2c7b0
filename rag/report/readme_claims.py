"""Every checked number of the README's results table and where it comes from.

One :class:`~rag.report.readme_numbers.Claim` per short row, each number naming the committed file
and key it is read from (:mod:`rag.report.claim_sources`), and the numbers left unchecked with the
reason; the checking itself is :mod:`rag.report.readme_numbers`. The full table, every number with
its CI, is ``docs/results.md`` (:mod:`rag.report.results_claims`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rag import paths
from rag.report.claim_sources import (
    CHUNK,
    CONVERSATION,
    EMB_PAIRED,
    EMBEDDERS,
    FAITHFULNESS,
    GEMMA,
    GEMMA_ROW,
    INDEX,
    INGEST,
    MINILM,
    PAIRWISE,
    PAPERS,
    RELATED_PAIRED,
    RETRIEVAL,
    SWEEP,
    answerer,
    ci,
    js,
    pair,
)  # fmt: skip
from rag.report.readme_numbers import (
    LONE_NUMBER,
    Claim,
    Csv,
    Json,
    Problem,
    Product,
    claim_problems,
    results_rows,
)

#: Every checked number of the README's short rows: the same sources as :data:`RESULTS_CLAIMS`.
README_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "The corpus arrives intact",
        "{parsed:d}/{requested:d} papers parsed, {failed:d} failed, {pages:,d} pages "
        "| {n:d} papers",
        js(INGEST, parsed="papers.parsed", requested="papers.requested", failed="papers.failed")
        | js(INGEST, pages="pages", n="papers.requested"),
    ),
    Claim(
        "The parser keeps the evidence",
        "gold quotes found {found:d}/{n:d}; human QASPER paragraphs {q:.3f} "
        "({q_lo:.3f}–{q_hi:.1f}) | {paragraphs:d} paragraphs",
        js(INGEST, found="evidence_found.gold.found", n="evidence_found.gold.n")
        | ci(INGEST, "evidence_found.qasper.ci", "q")
        | js(INGEST, paragraphs="evidence_found.qasper.n"),
    ),
    Claim(
        "Chunking keeps evidence in one piece",
        "fixed {f:.3f} ({f_lo:.3f}–{f_hi:.3f}), sentence {s:.3f}, section {c:.3f} | {n:d} quotes",
        {
            f"{k}{end}": Json(CHUNK, f"strategies.{s}.evidence_intact.{field}")
            for k, s in (("f", "fixed"), ("s", "sentence"), ("c", "section"))
            for end, field in (("", "rate"), ("_lo", "ci_low"), ("_hi", "ci_high"))
        }
        | js(CHUNK, n="strategies.fixed.evidence_intact.n"),
    ),
    Claim(
        "The SciFact table is reproduced",
        "nDCG@10 BM25 {b:.3f} (BEIR 0.665), MiniLM {d:.3f} (MTEB 0.645), hybrid {h:.3f} "
        "({h_lo:.3f}–{h_hi:.3f}) | {n:d} queries",
        js(RETRIEVAL, b="scifact.bm25.ndcg@10.mean", d="scifact.dense.ndcg@10.mean")
        | ci(RETRIEVAL, "scifact.hybrid.ndcg@10", "h")
        | js(RETRIEVAL, n="scifact.hybrid.ndcg@10.n"),
    ),
    Claim(
        "Hybrid finds the corpus evidence best",
        "chunk nDCG@10 hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}), BM25 {b:.3f}, dense {d:.3f}, HyDE "
        "{y:.3f} | {n:d} questions",
        ci(RETRIEVAL, "corpus_gold.chunk.hybrid.ndcg@10", "h")
        | js(
            RETRIEVAL,
            b="corpus_gold.chunk.bm25.ndcg@10.mean",
            d="corpus_gold.chunk.dense.ndcg@10.mean",
        )
        | js(RETRIEVAL, y="corpus_gold.chunk.hyde.ndcg@10.mean", n="corpus_gold.chunk.hybrid.n"),
    ),
    Claim(
        "Which gaps are real",
        "hybrid > dense by {hd:.3f} (p = {hd_p:.3f}), > HyDE by {hy:.3f} (p = {hy_p:.3f}); BM25 vs "
        "hybrid not distinguishable | Holm over {pairs:d} pairs",
        pair("dense", "hybrid", "hd", flip=True)
        | pair("hybrid", "hyde", "hy")
        | {"pairs": Csv(PAIRWISE, "a", how="count")},
    ),
    Claim(
        "Search is fast on 2 cores",
        "p50 dense {d:.1f} ms incl. query encoding, BM25 {b:.2f} ms, hybrid {h:.1f} ms "
        "| {chunks:,d} chunks",
        js(INDEX, d="headline.dense p50 ms (1x)", b="headline.BM25 p50 ms (1x)", chunks="chunks")
        | js(RETRIEVAL, h="corpus_gold.chunk.hybrid.latency_ms.p50"),
    ),
    Claim(
        "The offline judge is checked",
        "offline-v2 balanced accuracy {ba:.3f} ({lo:.3f}–{hi:.3f}), CONTRADICT recall {k:d}/{kn:d} "
        "| {n:d} SciFact pairs",
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
        },  # fmt: skip
    ),
    Claim(
        "The extractive answerer stays faithful",
        "faithfulness {f:.2f} (judge-picked spans), F1 {f1:.3f}, declines {dec:d} of {u:d} "
        "unanswerable | {n:d} questions",
        js(FAITHFULNESS, f="answerers.extractive.faithfulness.mean", n="questions.n")
        | js(FAITHFULNESS, f1="answerers.extractive.answer_f1.mean")
        | {
            "dec": Product(
                Json(FAITHFULNESS, "answerers.extractive.negative_rejection"),
                Json(FAITHFULNESS, "answerers.extractive.negative_rejection_n"),
            )
        }
        | js(FAITHFULNESS, u="answerers.extractive.negative_rejection_n"),
    ),
    Claim(
        "The local LLM is not",
        "SmolLM2-135M faithfulness {l:.2f} ({l_lo:.2f}–{l_hi:.2f}); under a GBNF grammar {g:.2f}, "
        "citation recall {g_c:.2f} | {n:d} questions",
        answerer("local", "l")
        | js(FAITHFULNESS, g="answerers.local+gbnf.faithfulness.mean")
        | js(FAITHFULNESS, g_c="answerers.local+gbnf.citation_recall.mean", n="questions.n"),
    ),
    Claim(
        "Rewriting follow-ups",
        "hybrid nDCG@10: raw {r:.3f}, rule rewriter {u:.3f}, SmolLM2 rewriter {s:.3f}, original "
        "question {o:.3f} | {n:d} follow-ups",
        js(
            CONVERSATION,
            r="retrieval.follow-up (raw).ndcg@10.mean",
            u="retrieval.rewrite: rules.ndcg@10.mean",
        )
        | js(CONVERSATION, s="retrieval.rewrite: llm:smollm2-135m.ndcg@10.mean")
        | js(CONVERSATION, o="retrieval.original (upper bound).ndcg@10.mean", n="follow_ups.n"),
    ),
    Claim(
        "The paper desk holds up",
        "links by title: precision {pk:d}/{pn:d}, recall {rk:d}/{rn:d}; related work: fusion "
        "{f:.3f} vs text {t:.3f} (p = {d_p:.3f}) | {papers:d} papers",
        {
            name: Json(PAPERS, f"title_resolution.held_out.{key}")
            for name, key in (
                ("pk", "precision.k"),
                ("pn", "precision.n"),
                ("rk", "recall.k"),
                ("rn", "recall.n"),
            )
        }  # fmt: skip
        | js(PAPERS, f="related_work.methods.fusion.recall@10.mean")
        | js(
            PAPERS, t="related_work.methods.text.recall@10.mean", d_p=f"{RELATED_PAIRED}.p_adjusted"
        )
        | js(PAPERS, papers="related_work.queries"),
    ),
    Claim(
        "Chunking × embedder does not matter here",
        "every cell minus the base: {lo:+.3f} to {hi:+.3f} chunk nDCG@10, all Holm p = {p:d} "
        "| {cells:d} cells",
        {
            "lo": Csv(f"{SWEEP}/paired.csv", "diff", how="min"),
            "hi": Csv(f"{SWEEP}/paired.csv", "diff", how="max"),
            "p": Csv(f"{SWEEP}/paired.csv", "p_adjusted", how="min"),
            "cells": Csv(f"{SWEEP}/results.csv", "cell", how="distinct"),
        },
    ),
    Claim(
        "Only EmbeddingGemma beats MiniLM, and only dense",
        "dense {g:.3f} vs {m:.3f} (Holm p = {gd_p:.3f}); hybrid {gh:.3f} vs {mh:.3f} "
        "(p = {gy_p:.2f})",
        js(EMBEDDERS, m=f"{MINILM}.dense.ndcg@10.mean", mh=f"{MINILM}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, g=f"{GEMMA}.dense.ndcg@10.mean", gh=f"{GEMMA}.hybrid.ndcg@10.mean")
        | js(EMBEDDERS, gd_p=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=dense].p_holm")
        | js(EMBEDDERS, gy_p=f"{EMB_PAIRED}[{GEMMA_ROW},retriever=hybrid].p_holm"),
    ),
)

#: Numbers of the README's short rows that are not checked, by row, each with why.
README_UNCHECKED: dict[str, dict[str, str]] = {
    "The SciFact table is reproduced": {
        "BEIR 0.665": "BM25's nDCG@10 in the BEIR paper, a literature constant",
        "MTEB 0.645": "MiniLM's nDCG@10 on the MTEB leaderboard, a literature constant",
    },
}


def readme_problems(
    readme: Path | None = None,
    root: Path | None = None,
    claims: Sequence[Claim] | None = None,
    *,
    page: str = "README",
) -> list[Problem]:
    """Results numbers of ``readme`` (the README) that differ from their committed source
    (``claims``, default :data:`README_CLAIMS`); a problem names ``page``."""
    root = root or paths.project_root()
    rows = results_rows((readme or root / "README.md").read_text(encoding="utf-8"))
    return [p for c in claims or README_CLAIMS for p in claim_problems(c, rows, root, page)]


def uncovered_numbers(
    readme: Path | None = None,
    claims: Sequence[Claim] | None = None,
    unchecked: Mapping[str, Mapping[str, str]] | None = None,
    *,
    page: str = "README",
) -> list[Problem]:
    """Numbers of the results table that no claim checks and ``unchecked`` (default
    :data:`README_UNCHECKED`) does not explain (a number inside backticks, such as a notebook name,
    is no claim)."""
    text = (readme or paths.project_root() / "README.md").read_text(encoding="utf-8")
    unchecked = README_UNCHECKED if unchecked is None else unchecked
    out = []
    for row, rest in results_rows(text).items():
        covered: list[tuple[int, int]] = []
        for c in claims or README_CLAIMS:
            if c.row == row and (m := c.pattern().search(rest)):
                covered += [m.span(name) for name, _ in c.fields()]
        for snippet in unchecked.get(row, {}):
            covered += [m.span() for m in re.finditer(re.escape(snippet), rest)]
        masked = re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), rest)
        for m in LONE_NUMBER.finditer(masked):
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                out.append(Problem(f"{page} results row {row!r}", f"{m.group()} is not checked"))
    return out
