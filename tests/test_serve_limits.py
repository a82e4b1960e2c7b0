"""The body limit and the schema agree: the largest ``/chat`` body the document allows (20
messages of 4,000 characters, each escaped to 12 bytes of JSON) is under the default limit and is
taken, not refused with a 413."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from rag.serve import models as m
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from tests.serve_support import tiny_lab

#: One code point outside the BMP: ``json.dumps`` writes it as a 12-byte surrogate-pair escape.
WIDE_CHAR = "\U0001f600"


def _largest_chat_body() -> bytes:
    n = m.MAX_MESSAGES
    longest = m.ChatMessage.model_json_schema()["properties"]["content"]["maxLength"]
    messages = [{"role": "assistant" if i < n - 1 else "user", "content": WIDE_CHAR * longest}
                for i in range(n)]  # fmt: skip
    body = {
        "messages": messages,
        "k": m.MAX_K,
        "retriever": "multi-query",
        "answerer": "extractive",
        "bypass_rewrite": True,
        "rewrite_model": None,
    }
    return json.dumps(body).encode()


def test_the_largest_chat_body_the_schema_allows_fits_the_default_limit(tmp_cache, tmp_path):
    body = _largest_chat_body()
    m.ChatRequest.model_validate_json(body)  # the document allows it
    assert len(body) <= ServeSettings().max_body_bytes, len(body)
    lab = tiny_lab(tmp_path / "served")
    serve = ServeSettings(allow_network=False, rate_limit_per_minute=0)
    with TestClient(create_app(lab, serve=serve, api_key="")) as c:
        r = c.post("/chat", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text[:300]


class SlowToLoad:
    """A chat-model factory whose first load takes ``seconds`` (a local model reading weights)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.loads = seconds, 0

    def __call__(self, name: str):
        import time

        from tests.fakechat import FakeChatModel

        self.loads += 1
        time.sleep(self.seconds)
        return FakeChatModel("It trains word vectors on subwords. It is fast.", name=name)


def test_a_slow_first_load_is_a_503_with_retry_after_then_served(tmp_cache, tmp_path):
    factory = SlowToLoad(1.5)
    from tests.test_serve import WordJudge

    lab = tiny_lab(tmp_path / "served", chat_model=factory, judge=WordJudge(), load_timeout_s=0.2)
    serve = ServeSettings(allow_network=False, rate_limit_per_minute=0)
    url, params = "/papers/1607.01759/summary", {"model": "smollm2-135m"}
    with TestClient(create_app(lab, serve=serve, api_key="")) as c:
        # a 503 "still loading" is the answer before the 1.5 s load ends (a request that waited
        # for the load would be a 200)
        r = c.get(url, params=params)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "still loading" and int(r.headers["Retry-After"]) > 0
        assert "smollm2-135m" in r.json()["detail"]
        from tests.polling import wait_until

        # the load goes on in the background; the same request is then served
        r = wait_until(
            lambda: (x := c.get(url, params=params)).status_code == 200 and x,
            what="the summary once the model has loaded",
            timeout_s=60,
        )
        assert r.status_code == 200, r.text
    assert factory.loads == 1


def test_a_long_model_call_is_a_503_then_answered_from_the_cache(tmp_cache, tmp_path):
    """A summary by a slow local model: the request waits model_call_timeout_s, gets a 503 with
    Retry-After, the work goes on and caches its completion, and the same request is answered."""
    import time

    from rag.llm.cache import CompletionCache
    from tests.test_reply_check import GOOD, ScriptedBackend, _model
    from tests.test_serve import WordJudge

    class Slow(ScriptedBackend):
        def call(self, model, messages, **kw):
            time.sleep(4.0)
            return super().call(model, messages, **kw)

    backend = Slow(GOOD)
    chat = _model(backend, CompletionCache(tmp_path / "llm"))
    lab = tiny_lab(tmp_path / "served", chat_model=lambda name: chat, judge=WordJudge())
    serve = ServeSettings(allow_network=False, rate_limit_per_minute=0, model_call_timeout_s=2.0)
    url, params = "/papers/1607.01759/summary", {"model": "smollm2-135m"}
    with TestClient(create_app(lab, serve=serve, api_key="")) as c:
        r = c.get(url, params=params)
        assert r.status_code == 503 and r.json()["error"] == "still running", r.text
        assert int(r.headers["Retry-After"]) > 0
        deadline = time.monotonic() + 120  # the first load of the summariser's encoder included
        while r.status_code == 503 and time.monotonic() < deadline:
            time.sleep(1.0)  # a client honouring Retry-After, sped up
            r = c.get(url, params=params)
        assert r.status_code == 200, r.text
    assert backend.calls == 1  # the retries were answered from the cache, not by the model
