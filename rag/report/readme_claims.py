"""The README's results table: one short row per finding, each number checked against its source.

Each row states a few numbers of its finding's full row in ``docs/results.md``
(:mod:`rag.report.results_claims`) and reads them from the same committed files: a README claim is
its full claim with a shorter text, so the two tables cannot name different sources. The checking
itself is :mod:`rag.report.readme_numbers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rag import paths
from rag.report.readme_numbers import Claim, Problem, table_problems, unchecked_numbers
from rag.report.results_claims import RESULTS_CLAIMS

#: The README's row text per finding (``{name}`` fields as in the full claim of that finding).
README_ROWS: dict[str, str] = {
    "The corpus arrives intact": (
        "{parsed:d}/{requested:d} papers parsed, {failed:d} failed, {pages:,d} pages | {n:d} papers"
    ),
    "The parser keeps the evidence": (
        "gold quotes found {found:d}/{n:d}; human QASPER paragraphs {q:.3f} "
        "({q_lo:.3f}–{q_hi:.1f}) | {paragraphs:d} paragraphs"
    ),
    "Chunking keeps evidence in one piece": (
        "fixed {f:.3f} ({f_lo:.3f}–{f_hi:.3f}), sentence {s:.3f}, section {c:.3f} | {n:d} quotes"
    ),
    "The SciFact table is reproduced": (
        "nDCG@10 BM25 {b:.3f} (BEIR 0.665), MiniLM {d:.3f} (MTEB 0.645), hybrid {h:.3f} "
        "({h_lo:.3f}–{h_hi:.3f}) | {n:d} queries"
    ),
    "Hybrid finds the corpus evidence best": (
        "chunk nDCG@10 hybrid {h:.3f} ({h_lo:.3f}–{h_hi:.3f}), BM25 {b:.3f}, dense {d:.3f}, "
        "HyDE {y:.3f} | {n:d} questions"
    ),
    "Which gaps are real": (
        "hybrid > dense by {hd:.3f} (p = {hd_p:.3f}), > HyDE by {hy:.3f} (p = {hy_p:.3f}); "
        "BM25 vs hybrid not distinguishable | Holm over {pairs:d} pairs"
    ),
    "Search is fast on 2 cores": (
        "p50 dense {d:.1f} ms incl. query encoding, BM25 {b:.2f} ms, hybrid {h:.1f} ms | "
        "{chunks:,d} chunks"
    ),
    "The offline judge is checked": (
        "offline-v2 balanced accuracy {ba:.3f} ({lo:.3f}–{hi:.3f}), CONTRADICT recall "
        "{k:d}/{kn:d} | {n:d} SciFact pairs"
    ),
    "The extractive answerer stays faithful": (
        "faithfulness {f:.2f} (judge-picked spans), F1 {f1:.3f}, declines {dec:d} of {u:d} "
        "unanswerable | {n:d} questions"
    ),
    "The local LLM is not": (
        "SmolLM2-135M faithfulness {l:.2f} ({l_lo:.2f}–{l_hi:.2f}); under a GBNF grammar "
        "{g:.2f}, citation recall {g_c:.2f} | {n:d} questions"
    ),
    "Rewriting follow-ups": (
        "hybrid nDCG@10: raw {r:.3f}, rule rewriter {u:.3f}, SmolLM2 rewriter {s:.3f}, "
        "original question {o:.3f} | {n:d} follow-ups"
    ),
    "The paper desk holds up": (
        "links by title: precision {pk:d}/{pn:d}, recall {rk:d}/{rn:d}; related work: fusion "
        "{f:.3f} vs text {t:.3f} (p = {d_p:.3f}) | {papers:d} papers"
    ),
    "Chunking × embedder does not matter here": (
        "every cell minus the base: {lo:+.3f} to {hi:+.3f} chunk nDCG@10, all Holm p = {p:d} | "
        "{cells:d} cells"
    ),
    "Only EmbeddingGemma beats MiniLM, and only dense": (
        "dense {g:.3f} vs {m:.3f} (Holm p = {gd_p:.3f}); hybrid {gh:.3f} vs {mh:.3f} (p = "
        "{gy_p:.2f})"
    ),
}

#: Every checked number of the README's results table.
README_CLAIMS: tuple[Claim, ...] = tuple(
    Claim(c.row, README_ROWS[c.row], c.values) for c in RESULTS_CLAIMS if c.row in README_ROWS
)
#: Numbers of the README's rows that are not checked, by row, each with why (also in
#: ``tests/test_freshness.py``'s docstring).
README_UNCHECKED: dict[str, dict[str, str]] = {
    "The SciFact table is reproduced": {
        "BEIR 0.665": "BM25's nDCG@10 in the BEIR paper, a literature constant",
        "MTEB 0.645": "MiniLM's nDCG@10 on the MTEB leaderboard, a literature constant",
    },
}


def readme_problems(
    readme: Path | None = None, root: Path | None = None, claims: Sequence[Claim] | None = None
) -> list[Problem]:
    """README results numbers that differ from their committed source (:data:`README_CLAIMS`)."""
    root = root or paths.project_root()
    text = (readme or root / "README.md").read_text(encoding="utf-8")
    return table_problems(text, claims or README_CLAIMS, root, "README")


def uncovered_numbers(
    readme: Path | None = None,
    claims: Sequence[Claim] | None = None,
    unchecked: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Problem]:
    """Numbers of the README's results table that no claim checks and :data:`README_UNCHECKED`
    does not explain."""
    text = (readme or paths.project_root() / "README.md").read_text(encoding="utf-8")
    unchecked = README_UNCHECKED if unchecked is None else unchecked
    return unchecked_numbers(text, claims or README_CLAIMS, unchecked, "README")
