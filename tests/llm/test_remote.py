"""The openai, groq and anthropic SDKs against real local servers on 127.0.0.1."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from rag.errors import ConfigError, LLMError, ProviderUnavailable
from rag.llm.errors import EndpointRefused, MalformedResponse, RequestRejected, RetriesExhausted
from rag.llm.factory import available_models, make_chat_model
from rag.llm.settings import ApiKeys
from rag.llm.testing import FakeLLMServer

from .conftest import fast_settings

HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]

# (model, which server, cost of 1000 in + 500 out at the registry's list prices)
CASES = [
    ("gpt-4o-mini", "oai", 1000 * 0.15e-6 + 500 * 0.60e-6),
    ("llama-3.3-70b-versatile", "oai", 1000 * 0.59e-6 + 500 * 0.79e-6),
    ("claude-sonnet-4", "anth", 1000 * 3e-6 + 500 * 15e-6),
]


@pytest.fixture()
def servers(oai_server, anth_server):
    return {"oai": oai_server, "anth": anth_server}


@pytest.mark.parametrize(("name", "srv", "cost"), CASES)
def test_usage_cost_then_cache_hit_without_request(
    name, srv, cost, servers, settings, keys, cache, meter
):
    server = servers[srv]
    model = make_chat_model(name, settings, cache=cache, meter=meter, keys=keys)
    first = model.complete(HI, max_tokens=32)
    assert first.text == server.reply
    assert (first.input_tokens, first.output_tokens) == (1000, 500)
    assert first.cost_usd == pytest.approx(cost)
    assert not first.cached and server.requests == 1

    second = model.complete(HI, max_tokens=32)
    assert server.requests == 1  # served from disk: zero requests reached the server
    assert second.cached and second.text == first.text
    assert (second.input_tokens, second.output_tokens, second.cost_usd) == (
        1000,
        500,
        first.cost_usd,
    )

    model.complete(HI, max_tokens=32, prompt_version="v2")  # a new prompt version is a new call
    assert server.requests == 2
    totals = meter.to_dict()["total"]
    assert (totals["fresh_calls"], totals["cached_calls"]) == (2, 1)
    assert totals["cost_usd"] == pytest.approx(2 * cost)


def test_request_carries_parameters(oai_server, anth_server, settings, keys):
    oa = make_chat_model("gpt-4o-mini", settings, cache=None, meter=None, keys=keys)
    oa.complete(HI, max_tokens=9, stop=["\n"], seed=7, json_mode=True)
    body = oai_server.bodies[-1]
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0.0
    assert (body["max_tokens"], body["stop"], body["seed"]) == (9, ["\n"], 7)
    assert body["response_format"] == {"type": "json_object"}

    an = make_chat_model("claude-3-5-haiku", settings, cache=None, meter=None, keys=keys)
    out = an.complete(HI, max_tokens=9, stop=["END"], json_mode=True)
    body = anth_server.bodies[-1]
    assert body["model"] == "claude-3-5-haiku-20241022" and body["system"] == "Be brief."
    assert body["stop_sequences"] == ["END"] and body["temperature"] == 0.0
    assert body["messages"] == [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "{"},  # JSON prefill
    ]
    assert out.text == "{" + anth_server.reply


@pytest.mark.parametrize(("name", "srv", "cost"), CASES)
def test_retries_429_and_500_then_succeed(name, srv, cost, servers, settings, keys, caplog):
    server = servers[srv]
    server.script(["429", "500"])
    model = make_chat_model(name, settings, cache=None, meter=None, keys=keys)
    with caplog.at_level(logging.WARNING, logger="rag.llm"):
        out = model.complete(HI)
    assert out.text == server.reply and server.requests == 3
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 2 and "HTTP 429" in retries[0] and "HTTP 500" in retries[1]


def test_retries_exhausted_is_named(oai_server, settings, keys):
    oai_server.script(["503"] * 5)
    model = make_chat_model("gpt-4o-mini", settings, cache=None, meter=None, keys=keys)
    with pytest.raises(RetriesExhausted, match=r"HTTP 503 .* on all 3 attempts; the provider"):
        model.complete(HI)
    assert oai_server.requests == 3


def test_hang_times_out_and_gives_up(anth_server, keys):
    anth_server.script(["hang"] * 2)
    s = fast_settings(anthropic_base_url=anth_server.url, timeout_s=0.3, max_attempts=2)
    model = make_chat_model("claude-3-5-haiku", s, cache=None, meter=None, keys=keys)
    with pytest.raises(RetriesExhausted, match=r"Timeout.*2 attempts.*timeout_s"):
        model.complete(HI)
    assert anth_server.requests == 2


def test_server_down_is_a_clear_error(keys):
    down = FakeLLMServer().start()
    url = down.url
    down.stop()
    model = make_chat_model(
        "llama-3.1-8b-instant", fast_settings(groq_base_url=url), cache=None, meter=None, keys=keys
    )
    with pytest.raises(EndpointRefused, match=r"connection refused.*check the groq base URL"):
        model.complete(HI)


def test_a_server_that_drops_connections_is_retried_then_a_clear_error(keys):
    """A listener that closes every connection unanswered: a transient connection error, retried
    on every attempt (unlike a refused connection), then named with the advice to check it."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def drop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was closed: the test is over
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    settings = fast_settings(groq_base_url=url)
    model = make_chat_model("llama-3.1-8b-instant", settings, cache=None, meter=None, keys=keys)
    try:
        with pytest.raises(RetriesExhausted, match=r"APIConnectionError.*check the network") as e:
            model.complete(HI)
    finally:
        listener.close()
    assert not isinstance(e.value, EndpointRefused)
    assert len(accepted) == settings.max_attempts


@pytest.mark.parametrize("what", ["malformed", "not_json", "bad_json"])
@pytest.mark.parametrize(("name", "srv"), [("gpt-4o", "oai"), ("claude-3-5-haiku", "anth")])
def test_malformed_response_not_retried(what, name, srv, servers, settings, keys, cache):
    servers[srv].script([what])
    model = make_chat_model(name, settings, cache=cache, meter=None, keys=keys)
    with pytest.raises(MalformedResponse, match=name.split("-")[0]):
        model.complete(HI)
    assert servers[srv].requests == 1
    assert len(cache) == 0  # a failure is never cached


def test_bad_key_rejected_naming_variable(oai_server, settings, keys):
    oai_server.script(["401"])
    model = make_chat_model("gpt-4o-mini", settings, cache=None, meter=None, keys=keys)
    with pytest.raises(RequestRejected, match="HTTP 401.*check OPENAI_API_KEY"):
        model.complete(HI)
    assert oai_server.requests == 1


def test_unknown_model_and_missing_key(settings, keys):
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'; known models: .*smollm2-135m"):
        make_chat_model("gpt-9", settings, keys=keys)
    only_openai = ApiKeys(openai=keys.openai)
    with pytest.raises(ProviderUnavailable, match="no key: set GROQ_API_KEY"):
        make_chat_model("llama-3.1-8b-instant", settings, keys=only_openai)
    rows = {n: (ok, why) for n, ok, why in available_models(settings, only_openai)}
    assert rows["gpt-4o"] == (True, "ok")
    assert rows["claude-sonnet-4"] == (False, "no key: set ANTHROPIC_API_KEY")
    assert rows["llama-3.3-70b-versatile"][0] is False


def test_bad_messages_are_config_errors(settings, keys):
    model = make_chat_model("gpt-4o-mini", settings, cache=None, meter=None, keys=keys)
    with pytest.raises(ConfigError, match="messages is empty"):
        model.complete([])
    with pytest.raises(ConfigError, match="message 0 .*role must be"):
        model.complete([{"role": "robot", "content": "x"}])
    with pytest.raises(ConfigError, match="max_tokens=0"):
        model.complete(HI, max_tokens=0)


def test_concurrency_is_bounded_and_order_kept(keys, cache):
    # the server echoes each prompt, so every answer names the prompt it belongs to
    with FakeLLMServer("openai", delay_s=0.15, echo=True) as server:
        s = fast_settings(openai_base_url=f"{server.url}/v1", concurrency=2)
        model = make_chat_model("gpt-4o-mini", s, cache=cache, meter=None, keys=keys)
        prompts = [f"q{i}" for i in range(6)]
        batch = [[{"role": "user", "content": p}] for p in prompts]
        out = model.complete_many(batch, progress=False)
        assert server.requests == 6 and server.max_in_flight == 2
        assert sorted(b["messages"][0]["content"] for b in server.bodies) == prompts
        assert [c.text for c in out] == prompts, "answers come back in the order of the prompts"
        assert all(not c.cached for c in out)
        again = model.complete_many(batch, progress=False)
        assert server.requests == 6 and all(c.cached for c in again)
        assert [c.text for c in again] == prompts


def test_failure_mid_batch_raises_after_the_others_finish(keys, cache):
    # one request in the middle of the batch is rejected (401 is not retried): the batch raises,
    # the other five still complete and are cached, and a re-run asks only for the failed one
    with FakeLLMServer("openai", delay_s=0.05, echo=True) as server:
        s = fast_settings(openai_base_url=f"{server.url}/v1", concurrency=2)
        model = make_chat_model("gpt-4o-mini", s, cache=cache, meter=None, keys=keys)
        prompts = [f"q{i}" for i in range(6)]
        batch = [[{"role": "user", "content": p}] for p in prompts]
        server.script(["ok", "ok", "401"])
        with pytest.raises(RequestRejected, match="HTTP 401"):
            model.complete_many(batch, progress=False)
        assert server.requests == 6, "in-flight and queued calls ran to the end"
        assert len(cache) == 5, "the five answered prompts were cached, the failure was not"
        out = model.complete_many(batch, progress=False)
        assert server.requests == 7, "only the failed prompt is asked again"
        failed = server.bodies[-1]["messages"][0]["content"]
        assert [c.text for c in out] == prompts
        assert [c.cached for c in out] == [p != failed for p in prompts]


def test_no_key_in_logs_or_cache(servers, settings, keys, cache, meter, caplog, tmp_path):
    secrets_ = [
        keys.openai.get_secret_value(),
        keys.anthropic.get_secret_value(),
        keys.groq.get_secret_value(),
    ]
    with caplog.at_level(logging.DEBUG):
        for name, srv, _ in CASES:
            servers[srv].script(["429"])
            m = make_chat_model(name, settings, cache=cache, meter=meter, keys=keys)
            m.complete(HI)
            m.complete(HI)
            servers[srv].script(["401"])
            with pytest.raises(LLMError) as err:
                m.complete(HI, prompt_version="other")
            assert not any(k in str(err.value) for k in secrets_)
        text = caplog.text + "".join(repr(r.args) for r in caplog.records)
    sent = servers["oai"].credentials + servers["anth"].credentials
    assert any(secrets_[0] in c for c in sent)  # the key really went over the wire...
    assert any(secrets_[1] in c for c in sent)
    assert len(caplog.records) > 5
    for k in secrets_:
        assert k not in text  # ...but never into a log line
        assert k not in repr(keys) and k not in repr(settings)
    blob = b"".join(p.read_bytes() for p in cache.directory.rglob("*") if p.is_file())
    assert len(blob) > 0
    for k in secrets_:
        assert k.encode() not in blob
