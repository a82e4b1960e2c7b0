"""Prompt-prefix reuse of the local llama.cpp model: less prompt evaluated, the same answers."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from rag.answer.context import assemble_context  # noqa: E402
from rag.answer.generate import REFUSAL, build_messages  # noqa: E402
from rag.answer.grammar import answer_grammar  # noqa: E402
from rag.llm.local import LocalBackend  # noqa: E402
from tests.test_answer_offline import TEXT1, TEXT2, hit  # noqa: E402

QUESTIONS = ("Does RoBERTa keep next sentence prediction?", "Which n-gram lengths are extracted?")


@pytest.fixture(scope="module")
def backends():
    return LocalBackend("llama_cpp", reuse_prefix=True), LocalBackend(
        "llama_cpp", reuse_prefix=False
    )


def _calls():
    """Row-major like notebook 05: every question plain, then every question under the grammar."""
    c = assemble_context([hit("c1", 0.9, TEXT1), hit("c2", 0.8, TEXT2)])
    g = answer_grammar([1, 2], refusal=REFUSAL)
    plain = [dict(messages=build_messages(q, c), max_tokens=24) for q in QUESTIONS]
    gram = [
        dict(messages=build_messages(q, c), max_tokens=24, grammar=g, repeat_penalty=1.2)
        for q in QUESTIONS
    ]
    return plain + gram


def test_a_repeated_prompt_is_not_evaluated_again_and_answers_do_not_change(backends):
    reuse, full = backends
    got = [reuse.generate(**kw) for kw in _calls()]
    ref = [full.generate(**kw) for kw in _calls()]
    assert [t for t, _ in got] == [t for t, _ in ref]
    # without reuse every prompt is evaluated in full
    assert all(tm.evaluated_tokens == tm.prompt_tokens for _, tm in ref)
    # the first prompt is evaluated in full; the second shares all but the question with it
    assert got[0][1].evaluated_tokens == got[0][1].prompt_tokens
    assert got[1][1].evaluated_tokens < got[1][1].prompt_tokens // 2
    # the grammar rows repeat the plain rows' prompts: only the last token(s) are evaluated again
    for _, again in got[2:]:
        assert again.evaluated_tokens < 5, again
