"""Sentence / citation / claim splitting and refusal detection, on hand-written answers."""

from __future__ import annotations

import pytest

from rag.answer.claims import is_refusal, parse_answer, parse_citations, split_claims
from rag.errors import ConfigError
from rag.text.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "clean", "ids"),
    [
        ("DPR beats BM25 [1].", "DPR beats BM25.", (1,)),
        ("DPR beats BM25 [1, 3].", "DPR beats BM25.", (1, 3)),
        ("DPR beats BM25 [3][1].", "DPR beats BM25.", (1, 3)),
        ("DPR beats BM25 [1; 2] [2].", "DPR beats BM25.", (1, 2)),
        ("DPR beats BM25 [2-4].", "DPR beats BM25.", (2, 3, 4)),
        ("DPR beats BM25 [2\u20133].", "DPR beats BM25.", (2, 3)),
        ("The [CLS] token is pooled.", "The [CLS] token is pooled.", ()),
        ("A ratio of [0.5] is used.", "A ratio of [0.5] is used.", ()),
        ("Reversed range [4-2] is kept.", "Reversed range [4-2] is kept.", ()),
        ("Huge range [1-500] is kept.", "Huge range [1-500] is kept.", ()),
        ("No citations here.", "No citations here.", ()),
    ],
)
def test_parse_citations(text, clean, ids):
    assert parse_citations(text) == (clean, ids)


def test_split_sentences_keeps_abbreviations_decimals_and_trailing_citations():
    text = (
        "Recall rises to 0.85 at k=20 [1]. See Fig. 3, e.g. the curve. Smith et al. agree. [2] "
        "Is it robust? Yes!\n- A bullet item here\n2) Numbered item here"
    )
    assert split_sentences(text, mode="answer") == [
        "Recall rises to 0.85 at k=20 [1].",
        "See Fig. 3, e.g. the curve.",
        "Smith et al. agree. [2]",
        "Is it robust?",
        "Yes!",
        "A bullet item here",
        "Numbered item here",
    ]


def test_paper_mode_keeps_lines_together_and_a_bracket_number_opens_a_sentence():
    text = "Recall rises [3]. [12] A. Author wrote it.\n- not a bullet here"
    assert split_sentences(text) == split_sentences(text, mode="paper")
    assert split_sentences(text, mode="paper") == [
        "Recall rises [3].",
        "[12] A. Author wrote it.\n- not a bullet here",
    ]
    assert split_sentences(text, mode="answer") == [
        "Recall rises [3]. [12]",
        "A. Author wrote it.",
        "not a bullet here",
    ]
    with pytest.raises(ConfigError, match="'claims'"):
        split_sentences(text, mode="claims")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sentence", "claims"),
    [
        ("BM25 is fast, and it needs no training.", ["BM25 is fast", "it needs no training"]),
        ("The model is small; the index is exact.", ["The model is small", "the index is exact"]),
        ("DPR wins on NQ, but BM25 wins on SQuAD.", ["DPR wins on NQ", "BM25 wins on SQuAD"]),
        # A list stays one claim: splitting it would need the predicate copied.
        (
            "It is evaluated on NQ, TriviaQA, and WebQuestions.",
            ["It is evaluated on NQ, TriviaQA, and WebQuestions"],
        ),
        # The part after ", and" does not start a clause (lower-case, no subject word).
        (
            "Results are stable, and consistent across seeds.",
            ["Results are stable, and consistent across seeds"],
        ),
        # Too short on one side to be a claim of its own.
        ("It works; mostly.", ["It works; mostly"]),
        ("Is BM25 better than DPR?", []),
        ("Yes.", []),
        ("The sources do not mention the batch size.", []),
    ],
)
def test_split_claims(sentence, claims):
    assert split_claims(sentence) == claims


@pytest.mark.parametrize(
    "text",
    [
        "The sources do not contain the answer.",
        "The provided context does not mention the learning rate.",
        "I cannot find this in the sources.",
        "We were unable to determine the value.",
        "There is no information about the dataset size.",
        "The sources provide insufficient information to answer.",
        "The batch size is not specified in the provided sources.",
        "This question cannot be answered from the context.",
    ],
)
def test_refusals_detected(text):
    assert is_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "The model does not use dropout [1].",
        "BM25 cannot find paraphrases without lexical overlap.",
        "No fine-tuning is needed.",
    ],
)
def test_negative_statements_are_not_refusals(text):
    assert not is_refusal(text)


def test_parse_answer_statuses_and_units():
    answered = parse_answer(
        "DPR beats BM25 on NQ [1]. It uses two encoders, and the index is exact [2][3]. "
        "The sources do not say which GPU was used."
    )
    assert answered.status == "answered"
    assert answered.has_refusal
    assert answered.claims == ["DPR beats BM25 on NQ", "It uses two encoders", "the index is exact"]
    assert [s.citations for s in answered.claim_sentences] == [(1,), (2, 3)]

    refusal = parse_answer("I cannot find the answer in the sources.")
    assert refusal.status == "refusal" and refusal.claims == []

    empty = parse_answer("Yes.")
    assert empty.status == "no_claims"
    assert parse_answer("").status == "no_claims"
