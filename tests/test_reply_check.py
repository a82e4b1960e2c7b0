"""A reply that fails its parser is never cached, a route answers its documented 502 without the
model's output, and an unreachable endpoint is a 502 naming it (a real closed port on
127.0.0.1, no mock)."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag.errors import RagError
from rag.llm.cache import CacheEntry, CompletionCache
from rag.llm.errors import RetriesExhausted, UnusableReply
from rag.llm.model import CachedChatModel, RawCompletion
from rag.llm.registry import get_model
from rag.papers.summarize import Sentence, llm_summary
from rag.serve.app import create_app, rag_error
from rag.serve.config import ServeSettings
from tests.llm.conftest import fast_settings
from tests.serve_support import tiny_lab

DEGENERATE = "This paper introduces a new cognitive graph Q-A-R-A-T-A-T-A-T-A-T"
GOOD = "The paper trains word vectors on subwords. It reports fast training."
SENTENCES = [Sentence(i, f"Sentence {i} of the method section.", "Method", "method", 1)
             for i in range(6)]  # fmt: skip


class ScriptedBackend:
    """A backend whose reply the test sets; counts the calls that reach it."""

    supports_json_mode = True

    def __init__(self, reply: str) -> None:
        self.reply, self.calls = reply, 0

    def call(self, model, messages, **kw) -> RawCompletion:
        self.calls += 1
        return RawCompletion(self.reply, 10, 10)


def _model(backend, cache) -> CachedChatModel:
    return CachedChatModel(get_model("smollm2-135m"), backend, fast_settings(), cache=cache,
                           meter=None)  # fmt: skip


def _summary(model) -> list[str]:
    vecs = np.eye(len(SENTENCES), 4, dtype=np.float32)
    return llm_summary(model, "A paper", SENTENCES, vecs, 3)[0]


def test_a_degenerate_summary_is_not_cached_and_a_repaired_model_is_asked_again(tmp_path):
    cache = CompletionCache(tmp_path / "llm")
    backend = ScriptedBackend(DEGENERATE)
    model = _model(backend, cache)
    for _ in range(2):
        with pytest.raises(UnusableReply, match="no summary sentence"):
            _summary(model)
    assert backend.calls == 2 and len(cache) == 0
    backend.reply = GOOD
    assert _summary(model) == [
        "The paper trains word vectors on subwords.",
        "It reports fast training.",
    ]
    assert len(cache) == 1 and backend.calls == 3
    assert _summary(model) and backend.calls == 3  # a good reply is cached


def test_a_cached_reply_its_parser_refuses_is_dropped_and_asked_again(tmp_path):
    cache = CompletionCache(tmp_path / "llm")
    backend = ScriptedBackend(GOOD)
    model = _model(backend, cache)
    _summary(model)  # caches the good reply under the summary's key
    (key,) = list(cache._cache.iterkeys())
    cache.set(key, CacheEntry(DEGENERATE, 1, 1, 0.0, 0.1))  # a bad reply older code stored
    assert _summary(model) and backend.calls == 2  # the bad hit was dropped and re-asked
    assert cache.get(key).text == GOOD


def test_the_summary_route_answers_502_without_the_models_output(tmp_cache, tmp_path):
    backend = ScriptedBackend(DEGENERATE)
    model = _model(backend, CompletionCache(tmp_path / "llm"))
    lab = tiny_lab(tmp_path / "served", chat_model=lambda name: model)
    serve = ServeSettings(allow_network=False, rate_limit_per_minute=0)
    with TestClient(create_app(lab, serve=serve, api_key="")) as c:
        for n in (1, 2):
            r = c.get("/papers/1607.01759/summary", params={"model": "smollm2-135m"})
            assert r.status_code == 502, r.text
            assert r.json()["error"] == "unusable model reply"
            assert "smollm2-135m" in r.json()["detail"] and "no summary sentence" in r.text
            assert "Q-A-R" not in r.text and "cognitive" not in r.text
            assert backend.calls == n  # not served from a cache


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_endpoint_is_a_502_naming_it(tmp_path):
    import openai

    from rag.llm.openai_chat import OpenAIChatBackend

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    client = openai.OpenAI(base_url=url, api_key="no-key", timeout=2.0, max_retries=0)
    spec = get_model("smollm2-135m")
    model = CachedChatModel(spec, OpenAIChatBackend(client, "ollama"), fast_settings(),
                            cache=None, meter=None)  # fmt: skip
    with pytest.raises(RetriesExhausted) as e:
        model.complete([{"role": "user", "content": "hi"}])
    assert url in str(e.value) and e.value.endpoint.rstrip("/") == url
    status, err, detail, _ = rag_error(e.value)
    assert status == 502 and err == "model endpoint unreachable" and url in detail


@pytest.mark.parametrize(
    "exc, status",
    [
        (RagError("disk full at /home/someone/x"), 500),
        (UnusableReply("m", "no answer", "SECRET"), 502),
    ],
)
def test_an_error_body_never_carries_what_it_must_not(exc, status):
    got, _, detail, _ = rag_error(exc)
    assert got == status and "/home/someone" not in detail and "SECRET" not in detail


def test_judge_output_that_is_not_json_is_not_cached(tmp_path):
    from rag.judge.llm_judge import LLMJudge
    from tests.test_judge import ANSWER, CONTEXT
    from tests.test_judge import GOOD as GOOD_JUDGE

    cache = CompletionCache(tmp_path / "llm")
    backend = ScriptedBackend("Sure! Both claims look fine to me.")
    judge = LLMJudge(_model(backend, cache))
    j = judge.judge_answer(ANSWER, CONTEXT)
    assert j.status == "judge_failure" and j.trace["raw"].startswith("Sure!")
    assert len(cache) == 0
    backend.reply = GOOD_JUDGE  # a repaired model is asked again, not served the bad reply
    assert LLMJudge(_model(backend, cache)).judge_answer(ANSWER, CONTEXT).status == "scored"
    assert len(cache) == 1 and backend.calls == 2


def test_an_empty_answer_is_returned_but_not_cached(tmp_path):
    from rag.answer.context import assemble_context
    from rag.answer.llm import LLMAnswerer
    from tests.test_answer_offline import TEXT1, hit

    cache = CompletionCache(tmp_path / "llm")
    backend = ScriptedBackend("  \n")
    answerer = LLMAnswerer(_model(backend, cache), max_tokens=24, name="local")
    ctx = assemble_context([hit("c1", 0.9, TEXT1)])
    assert answerer.answer("Does RoBERTa keep next sentence prediction?", ctx).text == ""
    assert len(cache) == 0
    backend.reply = "No: RoBERTa removes next sentence prediction [1]."
    got = answerer.answer("Does RoBERTa keep next sentence prediction?", ctx)
    assert got.text.startswith("No") and backend.calls == 2 and len(cache) == 1
