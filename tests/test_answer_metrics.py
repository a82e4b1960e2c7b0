"""Answer-quality metrics on hand-built cases; expected values derived by hand in comments."""

from __future__ import annotations

import pytest

from rag.answer.base import Answer
from rag.answer.prompts import REFUSAL
from rag.errors import EvaluationError
from rag.evaluation.answers import (
    answer_f1,
    answer_quality,
    boolean_accuracy,
    false_rejection,
    negative_rejection,
    normalize_answer,
    token_f1,
    yes_no,
)
from rag.evaluation.gold import Evidence, GoldItem

EV = [Evidence(arxiv_id="x", page=1, quote="q")]


def item(qid: str, answer: str, answer_type: str = "extractive") -> GoldItem:
    if answer_type == "none":
        return GoldItem(
            qid=qid, question="?", answerable=False, answer="", answer_type="none",
            kind="unanswerable", papers=[], evidence=[], names_method=False,
        )  # fmt: skip
    return GoldItem(
        qid=qid, question="?", answerable=True, answer=answer, answer_type=answer_type,
        kind="single-paper", papers=["x"], evidence=EV, names_method=False,
    )  # fmt: skip


def ans(text: str) -> Answer:
    return Answer(text=text, citations={}, answerer="t", refused=text == REFUSAL)


def test_normalisation_is_squad_style():
    assert normalize_answer("The  Cat, sat!  (an apple)") == "cat sat apple"


def test_token_f1_by_hand():
    # pred [cat, sat], ref [cat, sat, down]: P = 2/2, R = 2/3, F1 = 2 * (2/3) / (5/3) = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # citations are removed first: same value
    assert token_f1("The cat sat [1][2].", "a cat sat down") == pytest.approx(0.8)
    # multiset overlap: pred [3, 3, 6], ref [3, 6]: common 2, P = 2/3, R = 1, F1 = 0.8
    assert token_f1("3 3 6", "3 6") == pytest.approx(0.8)
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("", "cat") == 0.0 and token_f1("the", "a") == 1.0


def test_yes_no_parsing():
    assert yes_no("Yes; it beats the baseline [2].") == "yes"
    assert yes_no("No. RoBERTa drops NSP [1]") == "no"
    assert yes_no("[3] Yes, it does.") == "yes"
    assert yes_no("Nobody knows.") is None
    assert yes_no(REFUSAL) is None


GOLD = [
    item("e1", "a cat sat down"),
    item("e2", "hashing into buckets"),
    item("b1", "Yes; it is better.", "boolean"),
    item("b2", "No; it is worse.", "boolean"),
    item("b3", "It depends.", "boolean"),
    item("u1", "", "none"),
    item("u2", "", "none"),
]
ANSWERS = {
    "e1": ans("the cat sat [1]."),
    "e2": ans(REFUSAL),
    "b1": ans("Yes [1]."),
    "b2": ans("Maybe it is worse."),
    "b3": ans("Yes."),
    "u1": ans(REFUSAL),
    "u2": ans("Cats sit down [2]."),
}


def test_answer_f1_scores_answerable_non_boolean_and_refusal_as_zero():
    r = answer_f1(ANSWERS, GOLD)
    assert r.per_question == pytest.approx({"e1": 0.8, "e2": 0.0})
    assert r.value == pytest.approx(0.4) and r.n == 2


def test_boolean_accuracy_counts_unparsed_and_undefined_references():
    r = boolean_accuracy(ANSWERS, GOLD)
    # b1 correct; b2 predicts nothing parseable -> wrong; b3's reference is not yes/no -> None
    assert r.per_question == {"b1": 1.0, "b2": 0.0, "b3": None}
    assert (r.value, r.n, r.n_undefined, r.extra["unparsed"]) == (0.5, 2, 1, 1)
    assert "neither yes nor no" in r.reason


def test_negative_and_false_rejection():
    neg = negative_rejection(ANSWERS, GOLD)
    assert neg.per_question == {"u1": 1.0, "u2": 0.0} and neg.value == 0.5 and neg.n == 2
    # answerable: e1, e2, b1, b2, b3; only e2 declined -> 1/5
    fr = false_rejection(ANSWERS, GOLD)
    assert fr.value == pytest.approx(0.2) and fr.n == 5 and fr.per_question["e2"] == 1.0


def test_undefined_cases_are_explicit():
    only_answerable = [g for g in GOLD if g.answerable]
    r = negative_rejection(ANSWERS, only_answerable)
    assert r.value is None and r.n == 0 and r.reason == "no unanswerable question"
    assert set(answer_quality(ANSWERS, GOLD)) == {
        "answer_f1", "exact_match", "repeated_lines", "boolean_accuracy", "negative_rejection",
        "false_rejection",
    }  # fmt: skip


def test_missing_answer_is_an_error():
    with pytest.raises(EvaluationError, match="e1"):
        false_rejection({}, GOLD[:1])


def test_boolean_accuracy_says_when_the_answers_are_a_constant():
    gold = [item("a", "No.", "boolean"), item("b", "No, it does not.", "boolean"),
            item("c", "Yes.", "boolean")]  # fmt: skip
    const = boolean_accuracy({"a": ans("No."), "b": ans("No [1]."), "c": ans("No.")}, gold)
    assert const.value == pytest.approx(2 / 3)
    assert const.extra["constant"] == "no" and const.extra["majority"] == pytest.approx(2 / 3)
    assert const.extra["predicted"] == {"yes": 0, "no": 3}
    assert const.extra["gold"] == {"yes": 1, "no": 2}
    mixed = boolean_accuracy({"a": ans("No."), "b": ans("Yes."), "c": ans("Yes.")}, gold)
    assert mixed.extra["constant"] is None and mixed.value == pytest.approx(2 / 3)
    # a refusal is not an answer: two "No" and a refusal is not called constant
    partial = boolean_accuracy({"a": ans("No."), "b": ans("No."), "c": ans(REFUSAL)}, gold)
    assert partial.extra["constant"] is None and partial.extra["unparsed"] == 1
