"""What a self-hosted model costs: $0 on this machine, "price unknown" elsewhere unless stated.

An Ollama or OpenAI-compatible endpoint on a loopback address is "$0 (self-hosted)", an in-process
model "$0 (local)"; an endpoint on another host costs what the user states
(``RAG_OPENAI_COMPATIBLE_PRICE`` / ``RAG_OLLAMA_PRICE`` or the settings), else "price unknown",
never $0. Each case is checked in the spec, the dry-run estimate and the meter of a real call.
The remote-host calls are real HTTP to the scripted server on 127.0.0.1: the client names the
remote host, and an httpx request hook routes the connection to 127.0.0.1 as a port forward
would, so no lookup or connection leaves this machine.
"""

from __future__ import annotations

import math
import socket

import httpx
import pytest

from rag.errors import ConfigError
from rag.llm.estimate import estimate_cost
from rag.llm.factory import make_chat_model
from rag.llm.meter import CostMeter
from rag.llm.registry import on_this_machine, resolve_model
from rag.llm.settings import ApiKeys, LLMSettings, prices_from_env
from rag.llm.testing import FakeLLMServer
from tests.llm.conftest import fast_settings

REMOTE = "http://gpu-box.lan:8000/v1"
Q = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000/v1", "http://127.3.4.5:1/v1", "http://localhost:11434/v1",
     "http://[::1]:8000/v1", "http://0.0.0.0:11434", "127.0.0.1:11434", "http://[::ffff:127.0.0.1]:9",
     "http://LOCALHOST.:8000", f"http://{socket.gethostname()}:8000/v1"],
)  # fmt: skip
def test_endpoints_on_this_machine(url):
    assert on_this_machine(url)


@pytest.mark.parametrize(
    "url",
    [REMOTE, "https://api.together.xyz/v1", "http://10.0.0.5:8000/v1", "http://[2001:db8::1]:80",
     "http://127.0.0.1.nip.io:8000", "http://localhost-gpu:8000", "not a url"],
)  # fmt: skip
def test_endpoints_elsewhere(url):
    assert not on_this_machine(url)


def _spec(name: str, **settings):
    return resolve_model(name, LLMSettings(**settings), endpoints={}, prices={})


def test_price_follows_where_the_endpoint_is():
    local = _spec("openai-compatible:m", openai_compatible_base_url="http://127.0.0.1:8000/v1")
    assert (local.price_label, local.cost(1000, 500), local.priced) == ("$0 (self-hosted)", 0, True)
    v6 = _spec("ollama:qwen2.5:7b", ollama_base_url="http://[::1]:11434/v1")
    assert v6.price_label == "$0 (self-hosted)"
    for name, kw in [
        ("openai-compatible:m", {"openai_compatible_base_url": REMOTE}),
        ("ollama:qwen2.5:7b", {"ollama_base_url": "http://gpu-box.lan:11434/v1"}),
        ("openai-compatible:m", {}),  # no endpoint at all: nothing says it is ours
    ]:
        spec = _spec(name, **kw)
        assert spec.price_label == "price unknown" and not spec.priced, name
    # in-process models are local whatever the endpoints say
    assert _spec("gguf:/m/x.gguf").price_label == "$0 (local)"
    assert _spec("local:smollm2-135m").price_label == "$0 (local)"


def test_ollama_default_host_is_this_machine(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert resolve_model("ollama:llama3.2", prices={}).price_label == "$0 (self-hosted)"
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box.lan:11434")
    assert resolve_model("ollama:llama3.2", prices={}).price_label == "price unknown"


def test_a_stated_price_is_used_and_named(monkeypatch):
    # 1000 in x $0.10/1M + 500 out x $0.40/1M = 0.0001 + 0.0002
    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_BASE_URL", REMOTE)
    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_PRICE", "0.10, 0.40")
    spec = resolve_model("openai-compatible:m")
    assert spec.cost(1000, 500) == pytest.approx(0.0003)
    assert spec.price_label == "user price (RAG_OPENAI_COMPATIBLE_PRICE)"
    # the settings' own price wins over the variable: 1000 x 1.0/1M + 500 x 2.0/1M
    own = resolve_model("openai-compatible:m", LLMSettings(openai_compatible_price=(1.0, 2.0)))
    assert own.cost(1000, 500) == pytest.approx(0.002)
    assert own.price_label == "user price (LLMSettings.openai_compatible_price)"


@pytest.mark.parametrize("bad", ["0.1", "a,b", "0.1,0.2,0.3", "-1,2", "inf,1"])
def test_a_malformed_price_is_an_error_naming_it(bad):
    with pytest.raises(ConfigError, match=r"RAG_OLLAMA_PRICE=.*IN,OUT"):
        prices_from_env({"RAG_OLLAMA_PRICE": bad})
    with pytest.raises(ValueError):
        LLMSettings(ollama_price=(-1.0, 2.0))


def test_estimate_rows(monkeypatch):
    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_BASE_URL", REMOTE)
    unknown, local = estimate_cost(["hello"], ["openai-compatible:m", "gguf:/m/x.gguf"])
    assert math.isnan(unknown.cost_usd) and unknown.price == "price unknown"
    assert (local.cost_usd, local.price) == (0.0, "$0 (local)")
    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_PRICE", "0.10,0.40")
    (priced,) = estimate_cost(["hello"], ["openai-compatible:m"], output_tokens=100)
    want = priced.input_tokens * 0.10 / 1e6 + 100 * 0.40 / 1e6
    assert priced.cost_usd == pytest.approx(want) and priced.price.startswith("user price")
    here = LLMSettings(openai_compatible_base_url="http://127.0.0.1:8000/v1")
    monkeypatch.delenv("RAG_OPENAI_COMPATIBLE_PRICE")
    (free,) = estimate_cost(["hello"], ["openai-compatible:m"], settings=here)
    assert (free.cost_usd, free.price) == (0.0, "$0 (self-hosted)")


@pytest.fixture()
def server():
    with FakeLLMServer("openai", usage=(1000, 500)) as s:
        yield s


def _via(server: FakeLLMServer) -> httpx.Client:
    """An httpx client that sends every request to ``server``, whatever host the URL names."""

    def forward(request: httpx.Request) -> None:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=server.port)

    return httpx.Client(event_hooks={"request": [forward]})


@pytest.mark.parametrize(
    ("base", "price", "label", "usd"),
    [
        ("loopback", None, "$0 (self-hosted)", 0.0),
        (REMOTE, None, "price unknown", 0.0),
        (REMOTE, (0.10, 0.40), "user price (LLMSettings.openai_compatible_price)", 0.0003),
    ],
)
def test_meter_rows_of_real_calls(server, base, price, label, usd):
    url = f"{server.url}/v1" if base == "loopback" else base
    settings = fast_settings(openai_compatible_base_url=url, openai_compatible_price=price)
    meter, name = CostMeter(), "openai-compatible:m"
    with _via(server) as client:
        model = make_chat_model(
            name, settings, meter=meter, keys=ApiKeys(), http_client=client, endpoints={}
        )
        c = model.complete(Q, max_tokens=8)
    assert server.requests == 1 and c.price == label
    (row,) = meter.to_dict()["by_model"]
    assert (row["model"], row["price"], row["input_tokens"]) == (name, label, 1000)
    assert row["cost_usd"] == pytest.approx(usd)
    assert meter.unpriced_models == ([name] if label == "price unknown" else [])
