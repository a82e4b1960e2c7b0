"""Fuzzy evidence matching and the parse-quality report, on hand-made texts."""

from __future__ import annotations

import json

import pytest

from rag.errors import GoldError
from rag.evidence import (
    EvidenceItem,
    best_score,
    clean_qasper,
    contains,
    evidence_found,
    load_gold_evidence,
    load_qasper_evidence,
    locate,
    summarize_found,
)
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


def test_clean_qasper_strips_markup():
    raw = "FLOAT SELECTED: Table 1 reports $\\kappa =0.61$ as in BIBREF12 , see TABREF3."
    assert clean_qasper(raw) == "Table 1 reports   as in   , see  ."


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


def test_loaders(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        json.dumps({"qid": "a", "evidence": [{"arxiv_id": "1", "page": 3, "quote": "q1"}]})
        + "\n\n"
        + json.dumps({"qid": "b", "evidence": []})
        + "\n"
    )
    assert load_gold_evidence(gold) == [EvidenceItem("gold", "a", "1", "q1", 3)]
    qasper = tmp_path / "q.jsonl"
    row = {"qid": "x", "arxiv_id": "2", "evidence": [["p BIBREF1", "p2"], ["p BIBREF1"], []]}
    qasper.write_text(json.dumps(row) + "\n")
    assert [i.quote for i in load_qasper_evidence(qasper)] == ["p  ", "p2"]
    gold.write_text('{"qid": "a", "evidence": [{"page": 1}]}\n')
    with pytest.raises(GoldError, match="malformed"):
        load_gold_evidence(gold)
    gold.write_text("{not json\n")
    with pytest.raises(GoldError, match=":1"):
        load_gold_evidence(gold)
    with pytest.raises(GoldError, match="cannot read"):
        load_gold_evidence(tmp_path / "absent.jsonl")


def test_word_filter_rejects_long_quotes_with_few_shared_words():
    # 6 long words, only 3 in the text: 0.5 < 0.9 - 0.25, rejected before any alignment although
    # the characters alone would align well; with 5 of 6 shared (0.83) it goes on to align.
    text = "alpha bravo charlie delta echoes foxtrot"
    assert not contains("alpha bravo charlie deltx echox foxtrox", text)
    assert contains("alpha bravo charlie delta echoes foxtrox", text)
