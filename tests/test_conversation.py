"""Conversational rewriting (rag.retrieval.rewrite) and the follow-up construction rule
(rag.evaluation.conversation), with expected values derived by hand from the stated rules."""

from __future__ import annotations

import pytest

from rag.evaluation.conversation import build_follow_ups, replace_entity, restored
from rag.evaluation.gold import GoldItem
from rag.llm.base import Completion
from rag.retrieval.rewrite import (
    LLMRewriter,
    has_reference,
    name_tokens,
    parse_rewrite,
    rewrite,
    rule_rewrite,
    skip_reason,
)


def test_name_tokens():
    assert name_tokens("In InferSent, how are CoVe and BM25 used with word2vec and GPT-2?") == [
        "InferSent", "CoVe", "BM25", "word2vec", "GPT-2",
    ]  # fmt: skip
    assert name_tokens("BERT is first; the QA and LSTM are generic") == []  # first word, generic


@pytest.mark.parametrize(
    "text, expected",
    [
        ("How is this model trained?", True),
        ("Does it beat BM25?", True),
        ("What do these methods share?", True),
        ("How does the former compare?", True),
        ("How is BERT trained?", False),
        ("Is the item in the list?", False),  # "it" only inside a word
    ],
)
def test_has_reference(text, expected):
    assert has_reference(text) is expected


def test_skip_rule():
    hist = [{"role": "user", "content": "What is InferSent?"}]
    assert skip_reason([], "How is it trained?", bypass=False) == "no history"
    assert skip_reason(hist, "How is it trained?", bypass=True) == "bypass_rewrite"
    assert skip_reason(hist, "How is BERT trained?", bypass=False) == "self-contained"
    assert skip_reason(hist, "How is it trained?", bypass=False) is None


def test_rule_rewrite_resolves_to_the_last_named_turn():
    hist = [
        {"role": "user", "content": "What does InferSent learn from NLI?"},
        {"role": "assistant", "content": "Sentence encoders like SkipThought [1]."},
        {"role": "user", "content": "and what data is used?"},  # no name: look further back
    ]
    assert rule_rewrite(hist, "Does this model beat its baselines?") == (
        "Does InferSent beat InferSent's baselines?"
    )
    no_names = [{"role": "user", "content": "what about sentence embeddings?"}]
    assert rule_rewrite(no_names, "How are they trained?") == (
        "How are they trained? (sentence embeddings)"
    )


def test_llm_rewriter_parses_and_falls_back():
    class Model:
        name = "m"

        def __init__(self, text):
            self.text = text

        def complete(self, messages, **kw):
            assert kw["prompt_version"] == "rewrite-v1" and kw["temperature"] == 0.0
            return Completion(self.text, "m", "test", 1, 1, 0.0, 0.0, False)

    hist = [{"role": "user", "content": "What is InferSent?"}]
    good = LLMRewriter(Model('Standalone question: "How is InferSent trained?"\nextra'))
    r = rewrite(hist, "How is it trained?", llm_rewriter=good)
    assert (r.query, r.rewritten, r.rewriter) == ("How is InferSent trained?", True, good.name)
    bad = LLMRewriter(Model("   \n"))
    assert rewrite(hist, "How is it trained?", llm_rewriter=bad).query == "How is it trained?"
    assert bad.fallbacks == 1
    assert parse_rewrite("Question: What is X?") == "What is X?"


def test_replace_entity():
    assert replace_entity("Does InferSent beat the InferSent's baseline?", "InferSent") == (
        "Does this model beat this model's baseline?"
    )
    assert replace_entity("The CoVe vectors and CoVe-based models", "CoVe") == (
        "This model vectors and CoVe-based models"
    )


def _item(qid, paper, question):
    return GoldItem(qid=qid, question=question, answerable=True, answer="a",
                    answer_type="extractive", kind="single-paper", papers=[paper],
                    evidence=[{"arxiv_id": paper, "page": 1, "quote": "q"}],
                    names_method=True)  # fmt: skip


def test_follow_up_construction_rule():
    items = [
        _item("a1", "p1", "How does InferSent encode sentences?"),
        _item("a2", "p1", "Which data trains the encoder?"),  # no shared name: no follow-up
        _item("a3", "p1", "Does InferSent beat SkipThought?"),
        _item("b1", "p2", "Is SkipThought better?"),  # other paper: names do not cross papers
    ]
    fus = build_follow_ups(items)
    assert [(f.qid, f.first_qid, f.entity, f.follow_up) for f in fus] == [
        ("a3", "a1", "InferSent", "Does this model beat SkipThought?")
    ]
    assert restored(fus, {"a3": "does infersent beat it"}) == {"a3": True}
    assert build_follow_ups(items, {"p2"}) == []
