"""Fuzzy evidence matching and the parse-quality report, on hand-made texts."""

from __future__ import annotations

import json

import pytest

from rag.errors import GoldError
from rag.evaluation.evidence import (
    EvidenceItem,
    best_score,
    contains,
    evidence_found,
    locate,
    summarize_found,
)
from rag.evaluation.gold import evidence_items, load_gold
from rag.evaluation.qasper import load_qasper, qasper_evidence_items
from rag.types import Block, ParsedPaper

TEXT = "Intro. We use a hashing function that maps n-grams to integers in 1 to K. Then more."


def test_exact_match_after_normalisation_gives_original_offsets():
    m = locate("we use a HASHING function", TEXT)
    assert m is not None and m.score == 100.0
    assert TEXT[m.start : m.end] == "We use a hashing function"


def test_ligature_and_line_break_differences_are_exact():
    text = "we use a hash\ufb01ng func-\ntion here"
    m = locate("hashfing function", text)
    assert (
        m is not None and m.score == 100.0 and text[m.start : m.end] == "hash\ufb01ng func-\ntion"
    )


def test_fuzzy_match_scores_coverage_of_the_quote():
    # One substituted letter in a 20-letter key ("hashing function" -> key "hashing function"):
    # quote key "hashinx function" (16 chars); LCS with the text window is 15 -> 15/16 = 93.75.
    m = locate("hashinx function", TEXT, threshold=90)
    assert m is not None and m.score == pytest.approx(100 * 15 / 16)
    assert TEXT[m.start : m.end] == "hashing function"
    assert locate("hashinx function", TEXT, threshold=95) is None


def test_insertions_in_the_text_cost_nothing():
    # The PDF carries a citation the quote does not (as QASPER strips them).
    text = "Models are trained (Smith et al., 2019) on the full corpus of papers."
    quote = "Models are trained on the full corpus of papers."
    m = locate(quote, text)
    assert m is not None and m.score == 100.0 and m.start == 0 and m.end == len(text) - 1


def test_unrelated_text_is_not_found():
    assert locate("transformers replace recurrence entirely", TEXT) is None
    assert not contains("transformers replace recurrence entirely", TEXT)
    assert contains("maps n grams to integers", TEXT)
    assert best_score("zzzz", TEXT) == 0.0


def test_quote_longer_than_text():
    assert contains("hashing function that maps", "hashing function that map", threshold=90)
    assert not contains("hashing function that maps n-grams", "hashing", threshold=90)


def test_empty_inputs_and_bad_threshold():
    assert locate("", TEXT) is None and locate("x", "") is None
    assert not contains("!!", TEXT)
    with pytest.raises(ValueError, match="threshold"):
        locate("x", TEXT, threshold=120)


def test_long_text_search_finds_the_right_window():
    filler = " ".join(f"word{i}" for i in range(3000))
    text = filler + " the needle sentence sits right here in the middle " + filler
    m = locate("the needle sentence sits right hera in the middle", text)
    assert m is not None and text[m.start : m.end].startswith("the needle sentence")


def _paper() -> ParsedPaper:
    blocks = [
        Block(1, "header_footer", "", "Running header"),
        Block(1, "body", "1 Intro", "Dense retrieval encodes queries and passages."),
        Block(2, "body", "2 Method", "We hash character n-grams into two million buckets."),
        Block(2, "references", "References", "[1] A. Author. Hashing tricks. 2009."),
    ]
    return ParsedPaper("p1", 2, blocks)


def test_evidence_found_report():
    items = [
        EvidenceItem("gold", "q1", "p1", "hash character n-grams into two million buckets", page=2),
        EvidenceItem("gold", "q2", "p1", "Dense retrieval encodes queries and passages.", page=2),
        EvidenceItem("gold", "q3", "p1", "Running header", page=1),
        EvidenceItem("qasper", "q4", "p1", "Hashing tricks"),
        EvidenceItem("qasper", "q5", "missing", "anything"),
    ]
    df = evidence_found({"p1": _paper()}, items)
    assert list(df["found"]) == [True, True, False, True, False]
    assert list(df["on_page"]) == [True, False, None, None, None]
    kinds = [k if isinstance(k, str) else None for k in df["kind"]]
    assert kinds == ["body", "body", None, "references", "paper not parsed"]
    s = summarize_found(df)
    assert s["gold"] == {"n": 3, "found": 2, "found_rate": 2 / 3, "on_page_rate": 0.5}
    assert s["qasper"] == {"n": 2, "found": 1, "found_rate": 0.5}
    assert s["all"]["found"] == 3 and s["all"]["n"] == 5


def test_failed_parse_counts_as_miss():
    bad = ParsedPaper("p1", 0, [], status="corrupt", error="x")
    df = evidence_found({"p1": bad}, [EvidenceItem("gold", "q", "p1", "x", page=1)])
    assert not df["found"][0] and df["kind"][0] == "parse corrupt"


def test_evidence_items_come_from_the_validated_gold_loaders(tmp_path):
    gold = tmp_path / "gold.jsonl"
    row = {
        "qid": "a", "question": "q?", "answerable": True, "answer": "x",
        "answer_type": "extractive", "kind": "single-paper", "papers": ["1"],
        "evidence": [{"arxiv_id": "1", "page": 3, "quote": "q1"}], "names_method": False,
    }  # fmt: skip
    gold.write_text(json.dumps(row) + "\n\n")
    assert evidence_items(load_gold(gold)) == [EvidenceItem("gold", "a", "1", "q1", 3)]
    qasper = tmp_path / "q.jsonl"
    q = {"qid": "x", "arxiv_id": "2", "question": "?", "answers": [],
         "evidence": [["p BIBREF1", "p2"], ["p BIBREF1"], []]}  # fmt: skip
    qasper.write_text(json.dumps(q) + "\n")
    # one cleaner (gold.clean_qasper), paragraphs de-duplicated across annotators
    assert [i.quote for i in qasper_evidence_items(load_qasper(qasper))] == ["p", "p2"]
    gold.write_text(json.dumps({**row, "evidence": [{"page": 1}]}) + "\n")
    with pytest.raises(GoldError, match=r"line 1 \(qid 'a'\): field 'evidence.0.arxiv_id'"):
        load_gold(gold)
    gold.write_text("{not json\n")
    with pytest.raises(GoldError, match="line 1: not valid JSON"):
        load_gold(gold)
    with pytest.raises(GoldError, match="cannot read"):
        load_gold(tmp_path / "absent.jsonl")
