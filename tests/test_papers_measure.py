"""The citation measurements: threshold choice, splitting counts, and the graph on real PDFs."""

from __future__ import annotations

import json

import pytest

from rag import paths
from rag.corpus.manifest import load_manifest
from rag.corpus.parse import ParseSettings, load_parsed
from rag.papers.graph import build_citations
from rag.papers.measure import (
    Probe,
    choose_threshold,
    default_outputs,
    splitting,
    title_resolution,
)
from rag.papers.references import numbered_count, paper_references, reference_blocks
from rag.papers.resolve import TITLE_THRESHOLD
from rag.types import Block, ParsedPaper


def _probes(citing: str = "p") -> list[Probe]:
    return [
        Probe(citing, frozenset({"a"}), "a", 95.0),  # right, kept up to 95
        Probe(citing, frozenset({"b"}), "b", 86.5),  # right, kept up to 86.5
        Probe(citing, frozenset(), "c", 80.0),  # wrong (the id is outside the corpus)
        Probe(citing, frozenset({"d"}), "", 0.0),  # missed at every threshold
    ]


def test_choose_threshold_takes_the_middle_of_the_best_f05_range():
    # t <= 80: P 2/3, R 2/3, F0.5 0.667; 80 < t <= 86.5: P 1, R 2/3, F0.5 0.909 (the best);
    # 86.5 < t <= 95: P 1, R 1/3, F0.5 0.714. Grid steps 0.5: best range [80.5, 86.5], middle 83.5.
    threshold, tied = choose_threshold(_probes())
    assert tied == [80.5, 86.5]
    assert threshold == 83.5


def test_title_resolution_tunes_on_one_half_and_reports_the_other():
    probes = _probes("p1") + _probes("p2")[:2] + [Probe("p2", frozenset({"e"}), "f", 90.0)]
    res = title_resolution(probes)
    assert res["threshold"] == 83.5  # from p1 alone (the tuning half: sorted ids, even positions)
    held = res["held_out"]
    # p2 at 83.5: predictions a (right), b (right), f at 90 (wrong) -> precision 2/3; positives
    # a, b, e -> recall 2/3
    assert held["precision"]["mean"] == pytest.approx(2 / 3)
    assert held["recall"]["mean"] == pytest.approx(2 / 3)
    assert (held["precision"]["k"], held["precision"]["n"]) == (2, 3)
    assert 0 < held["precision"]["exact_low"] < 2 / 3 < held["precision"]["exact_high"] < 1


def test_splitting_counts_found_against_the_largest_marker():
    lost = Block(9, "references", "References", "[1] A. 2019. T. [2] B. 2020. U. [4] D. 2021. W.")
    full = Block(9, "references", "References", "[1] A. T. [2] B. U. [3] C. V.")
    author_year = Block(9, "references", "References", "A. Author. 2019. A title. In ACL.")
    res = splitting(
        [
            ParsedPaper("lost", 10, [lost]),
            ParsedPaper("full", 10, [full]),
            ParsedPaper("ay", 10, [author_year]),
        ]
    )
    assert res["papers"] == 2  # the author-year list has no [N] truth
    assert res["overall"] == {"found": 6, "true": 7, "ratio": 6 / 7}
    assert res["exact_papers"] == 1
    assert res["per_paper_ratio"]["mean"] == pytest.approx((3 / 4 + 1) / 2)


def test_a_partial_corpus_never_overwrites_the_corpus_graph():
    assert default_outputs("data/manifest.jsonl", 0) == (
        "data/citations.jsonl",
        "outputs/bench/citations.json",
    )
    assert default_outputs("data/manifest.jsonl", 5) == (
        "outputs/papers/manifest-5/citations.jsonl",
        "outputs/papers/manifest-5/citations.json",
    )
    assert (
        default_outputs("../shared/mine.jsonl", 0)[0] == "outputs/papers/mine-all/citations.jsonl"
    )


def test_the_threshold_constant_is_the_one_chosen_on_data():
    bench = paths.project_root() / "outputs" / "bench" / "citations.json"
    chosen = json.loads(bench.read_text())["title_resolution"]["threshold"]
    assert chosen == TITLE_THRESHOLD


def test_real_pdfs_give_the_links_read_off_their_reference_lists(shared_dir, tmp_cache):
    """Three real papers: a numbered list (the Transformer), ACL author-year (BERT) and AAAI
    columns that MuPDF returns as one block each; expected links read off the PDFs by hand."""
    papers = load_manifest(shared_dir / "corpus" / "manifest.jsonl")
    wanted = {"1706.03762", "1810.04805", "2508.10530"}
    parsed = [
        load_parsed(shared_dir / "corpus" / "pdfs" / p.filename, p.sha256, ParseSettings())
        for p in papers
        if p.arxiv_id in wanted
    ]
    by_id = {pp.paper_id: pp for pp in parsed}
    transformer = by_id["1706.03762"]
    assert numbered_count(reference_blocks(transformer)) == 40
    assert len(paper_references(transformer)) == 40
    rows = build_citations(papers, parsed)
    inside = {(r.citing, r.cited, r.how) for r in rows if r.in_corpus}
    assert inside == {
        # [2] Bahdanau et al. and [24] Luong et al., both with their arXiv ids
        ("1706.03762", "1409.0473", "arxiv_id"),
        ("1706.03762", "1508.04025", "arxiv_id"),
        # BERT's list gives no arXiv ids for these; each title is in it
        ("1810.04805", "1710.10723", "title"),  # Clark & Gardner, multi-paragraph RC
        ("1810.04805", "1705.02364", "title"),  # Conneau et al., InferSent
        ("1810.04805", "1602.03483", "title"),  # Hill et al., sentences from unlabelled data
        ("1810.04805", "1708.00107", "title"),  # McCann et al., CoVe
        ("1810.04805", "1310.4546", "title"),  # Mikolov et al., word2vec phrases
        ("1810.04805", "1705.00108", "title"),  # Peters et al., semi-supervised tagging
        ("1810.04805", "1802.05365", "title"),  # Peters et al., ELMo
        ("1810.04805", "1611.01603", "title"),  # Seo et al., BiDAF
        ("1810.04805", "1706.03762", "title"),  # Vaswani et al., the Transformer
        ("2508.10530", "2203.02155", "title"),  # Ouyang et al., InstructGPT
    }
    outside = {r.cited for r in rows if r.citing == "1810.04805" and not r.in_corpus}
    assert "1808.04444" in outside  # Al-Rfou et al., "arXiv preprint arXiv:1808.04444"
