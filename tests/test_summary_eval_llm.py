"""The LLM rows of ``python -m rag.papers.summary_eval --llm MODEL``: scored against the unseen
abstract, every sentence judged, paired with extractive on the same papers, failures counted
(never scored 0), and the extractive and lead rows unchanged by adding them."""

from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.papers import summarize as S
from rag.papers.summary_eval import (
    aggregate,
    llm_aggregate,
    llm_row,
    measure,
    paper_row,
    rouge_l,
)
from rag.types import Block, ParsedPaper
from tests.fakechat import FakeChatModel
from tests.fakeembed import BowEmbedder
from tests.test_papers_summarize import ABSTRACT, OverlapJudge, _paper

GOOD = "The paper splits inputs into windows of local attention blocks with a global memory."
BAD = "It wins the Turing award for quantum banana farming."


def _measurable(paper_id: str) -> ParsedPaper:
    """The test paper with an abstract long enough to be a reference (>= 30 words)."""
    blocks = _paper().blocks
    long = Block(1, "body", "Abstract", " ".join([ABSTRACT] * 3))
    return ParsedPaper(paper_id, 10, [*blocks[:3], long, *blocks[4:]])


def _inputs(paper_id: str) -> tuple:
    """What llm_row takes after the title, for the test paper with the test judge (n=3)."""
    pp = _measurable(paper_id)
    inputs = S.body_sentences(pp)
    emb = BowEmbedder()
    return inputs, S.sentence_vectors(inputs, emb), S.abstract_text(pp), emb, OverlapJudge(), 3


def test_an_llm_row_is_scored_and_judged_per_sentence(tmp_cache):
    chat = FakeChatModel(f"{GOOD} {BAD}")
    row = paper_row(_measurable("2401.00001"), BowEmbedder(), OverlapJudge(), n=3,
                    max_words=200, llms={"llm:scripted": chat}, title="Zebra")  # fmt: skip
    got = row["llm:scripted"]
    assert got["sentences"] == 2 and got["faithfulness"] == 0.5  # the banana claim is not found
    assert got["rouge_l"] == pytest.approx(rouge_l(f"{GOOD} {BAD}", " ".join([ABSTRACT] * 3)))
    assert got["words"] == len(f"{GOOD} {BAD}".split()) and got["cached"] is False
    assert "Paper: Zebra" in chat.calls[0]["messages"][1]["content"]
    # the extractive and lead rows are the same with or without an LLM row
    plain = paper_row(_measurable("2401.00001"), BowEmbedder(), OverlapJudge(), n=3, max_words=200)
    assert {k: v for k, v in row.items() if k != "llm:scripted"} == plain


def test_failures_are_counted_not_scored_and_the_pairing_uses_the_same_papers(tmp_cache):
    rows = [
        paper_row(
            _measurable(pid),
            BowEmbedder(),
            OverlapJudge(),
            n=3,
            max_words=200,
            llms={"llm:scripted": FakeChatModel(reply)},
        )  # fmt: skip
        for pid, reply in [("2401.00001", GOOD), ("2401.00002", GOOD), ("2401.00003", "  ")]
    ]
    assert "failed" in rows[2]["llm:scripted"]
    agg = aggregate(rows)
    llm = agg["llm:scripted"]
    assert llm["rouge_l"]["n"] == 2 and llm["faithfulness"]["mean"] == 1.0
    assert llm["papers"] == 3 and list(llm["failed"]) == ["2401.00003"]
    assert llm["seconds"]["n"] == 2  # fresh calls only
    vs = agg["llm:scripted_vs_extractive"]["rouge_l"]
    assert vs["n"] == 2 and vs["mean_b"] == pytest.approx(rows[0]["extractive"]["rouge_l"])
    assert agg["extractive"]["rouge_l"]["n"] == 3  # extractive keeps every paper
    # a second model is paired with the first on the papers both summarised
    for r, reply in zip(rows, [BAD, GOOD, GOOD], strict=True):
        r["llm:other"] = llm_row(FakeChatModel(reply), "", *_inputs(r["paper_id"]))
    two = aggregate(rows)["llm:other_vs_llm:scripted"]["faithfulness"]
    assert two["n"] == 2 and (two["mean_a"], two["mean_b"]) == (0.5, 1.0)
    with pytest.raises(ConfigError, match="no paper got a usable summary"):
        llm_aggregate(rows[2:], "llm:scripted")


def test_the_sample_is_drawn_and_named_and_the_other_rows_do_not_move(tmp_cache):
    plain = measure(max_papers=3)
    chat = FakeChatModel(lambda messages, version: GOOD)
    doc = measure(max_papers=3, llms={"scripted": chat}, llm_sample=1, seed=0)
    assert doc["settings"]["llm"]["sample"] == f"1 of {plain['n_papers']} at random, seed 0"
    assert sum("llm:scripted" in r for r in doc["papers"]) == 1 == len(chat.calls)
    assert doc["metrics"]["llm:scripted"]["rouge_l"]["n"] == 1
    for k in ("extractive", "lead", "extractive_vs_lead"):
        assert doc["metrics"][k] == plain["metrics"][k]
    with pytest.raises(ConfigError, match="llm_sample=-1"):
        measure(max_papers=3, llms={"scripted": chat}, llm_sample=-1)
