"""Prompt-prefix reuse of the local llama.cpp model: less prompt evaluated, the same answers."""

from __future__ import annotations

import pytest

from rag.answer.context import assemble_context
from rag.answer.grammar import answer_grammar
from rag.answer.prompts import REFUSAL, build_messages
from rag.llm.local import LocalBackend
from tests.test_answer_offline import TEXT1, TEXT2, hit

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


def test_a_cached_state_keeps_the_kv_cache_not_the_logits_and_restores_the_same(backends):
    """lean_states: no 100 MB copy of Llama.scores per cached prompt, the same continuation."""
    from llama_cpp import Llama

    reuse, _ = backends
    call = _calls()[0]
    reuse.generate(**call)
    model = reuse._models[0]
    lean = model.save_state()
    own = Llama.save_state(model)  # llama-cpp-python's own, which also copies the scores
    assert lean.scores.size == 0 and own.scores.nbytes > 50e6
    assert lean.llama_state == own.llama_state and lean.n_tokens == own.n_tokens
    follow = dict(call, messages=[*call["messages"][:-1], {"role": "user", "content": "Say more."}])
    texts, ram_cache = [], model.cache
    model.cache = None  # continue from the restored state itself, not from a cached one
    try:
        for restore in (lambda: model.load_state(lean), lambda: Llama.load_state(model, own)):
            restore()
            texts.append(reuse.generate(**follow)[0])
    finally:
        model.cache = ram_cache
    assert texts[0] == texts[1] and texts[0]


def test_two_shards_loading_at_once_leave_stdout_and_stderr_open(tmp_path):
    """llama-cpp-python silences a load by redirecting fds 1/2; concurrent loads must not race."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        from rag.llm.local import LocalBackend
        from rag.shard import sharded_map
        b = LocalBackend("llama_cpp", workers=2)
        sharded_map(lambda i: b._load(i), [0, 1], 2, progress=False)
        assert all(m is not None for m in b._models)
        print("stdout still open", flush=True)
        import sys; print("stderr still open", file=sys.stderr, flush=True)
        """
    )
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "stdout still open" in out.stdout and "stderr still open" in out.stderr
