"""Rule-based query variants, LLM variants (robust parsing, visible fallback), HyDE text."""

from __future__ import annotations

import logging

import pytest

from rag.llm.base import ChatModel
from rag.retrieval.variants import (
    HYDE_PROMPT_VERSION,
    MULTI_QUERY_PROMPT_VERSION,
    LLMVariants,
    declarative_variant,
    hypothetical_passage,
    keyword_variant,
    parse_variant_lines,
    rule_variants,
)
from tests.fakechat import FakeChatModel


def test_fake_chat_model_satisfies_the_protocol():
    assert isinstance(FakeChatModel(""), ChatModel)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is the effect of chunk size on retrieval?", "effect chunk size retrieval"),
        ("How does BM25 handle document length?", "BM25 handle document length"),
        ("Which datasets did the authors evaluate on?", "datasets authors evaluate"),
        ("what", ""),
    ],
)
def test_keyword_variant(question, expected):
    assert keyword_variant(question) == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is dense passage retrieval?", "dense passage retrieval is"),
        ("What are the limitations of HyDE?", "the limitations of HyDE are"),
        ("How does ColBERT work?", "ColBERT works by"),
        ("How does HyDE improve recall?", "HyDE improve recall by"),
        ("How is the index compressed?", "the index is compressed by"),
        ("Why does reranking help?", "reranking help because"),
        ("Why is BM25 strong?", "BM25 is strong because"),
        ("Which dataset does DPR use?", "the dataset that DPR use"),
        ("Who proposed reciprocal rank fusion?", "reciprocal rank fusion was proposed by"),
        ("When was BERT released?", "BERT was released in"),
        ("Does fine-tuning improve recall?", "fine-tuning improve recall"),
        ("  Compare   BM25 and DPR?  ", "Compare BM25 and DPR"),
    ],
)
def test_declarative_variant(question, expected):
    assert declarative_variant(question) == expected


def test_rule_variants_dedupes_and_limits():
    q = "What is dense passage retrieval?"
    assert rule_variants(q, 2) == ["dense passage retrieval", "dense passage retrieval is"]
    assert rule_variants(q, 1) == ["dense passage retrieval"]
    assert rule_variants(q, 0) == []
    # no rule matches and no stopword to strip: both forms equal the query -> no variants
    assert rule_variants("BM25 tokenizer", 2) == []


def test_parse_variant_lines_is_robust():
    reply = (
        "Sure! Here are 3 alternative queries:\n"
        "1. dense retrieval with dual encoders\n"
        '2) "sparse versus dense retrievers"\n'
        "\n"
        "- What is dense passage retrieval?\n"  # echo of the question: dropped
        "* dense retrieval with dual encoders\n"  # duplicate: dropped
        "Query 4: passage retrieval using learned embeddings\n" + "word " * 60  # rambling: dropped
    )
    got = parse_variant_lines(reply, "What is dense passage retrieval?", 5)
    assert got == [
        "dense retrieval with dual encoders",
        "sparse versus dense retrievers",
        "passage retrieval using learned embeddings",
    ]
    assert parse_variant_lines(reply, "What is dense passage retrieval?", 2) == got[:2]


def test_llm_variants_uses_versioned_prompt_at_temperature_zero():
    llm = FakeChatModel("one rewrite\nanother rewrite\nthird rewrite")
    fn = LLMVariants(llm)
    assert fn("original question?", 2) == ["one rewrite", "another rewrite"]
    call = llm.calls[0]
    assert call["temperature"] == 0.0
    assert call["prompt_version"] == MULTI_QUERY_PROMPT_VERSION
    assert "original question?" in call["messages"][-1]["content"]
    assert "Write 2 different" in call["messages"][-1]["content"]
    assert fn.fallbacks == 0
    assert "scripted" in fn.name


def test_llm_variants_fall_back_visibly_on_malformed_output(caplog):
    llm = FakeChatModel("Here are some queries:\n\n   \n")
    fn = LLMVariants(llm)
    q = "What is dense passage retrieval?"
    with caplog.at_level(logging.WARNING, logger="rag.retrieval.variants"):
        got = fn(q, 2)
    assert got == rule_variants(q, 2)
    assert fn.fallbacks == 1
    assert "falling back to rule variants" in caplog.text


def test_hypothetical_passage_strips_and_versions():
    llm = FakeChatModel("  ColBERT scores late interactions between token embeddings.\n")
    text = hypothetical_passage(llm, "How does ColBERT work?")
    assert text == "ColBERT scores late interactions between token embeddings."
    assert llm.calls[0]["prompt_version"] == HYDE_PROMPT_VERSION
    assert "How does ColBERT work?" in llm.calls[0]["messages"][-1]["content"]
