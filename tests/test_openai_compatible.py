"""The ``openai-compatible:`` provider against a real OpenAI-compatible server on 127.0.0.1.

The server is llama-cpp-python's own (``python -m llama_cpp.server``, its ``server`` extra)
serving the packaged SmolLM2 weights (the bf16 copy ``local:smollm2-135m`` runs), started once per
session. ``rag ask``, a notebook-05 answerer row and the service's ``/ask`` reach it over real HTTP
through the openai SDK; every answer is cached (a repeat sends no request: the server's access
log counts them) and metered (tokens counted, $0 "self-hosted"). Failures come from a scripted
local server (:class:`rag.llm.testing.FakeLLMServer`): HTTP 500, a hang past the timeout,
malformed or broken JSON, and a port where nothing listens become the named LLM errors and a
"failed: <reason>" row.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rag.answer.answerers import AnswerSettings, build_answerers
from rag.answer.context import assemble_context
from rag.answer.extractive import ExtractiveAnswerer
from rag.answer.run import answer_each
from rag.errors import ConfigError
from rag.llm.cache import CompletionCache
from rag.llm.errors import EndpointRefused, MalformedResponse, RetriesExhausted
from rag.llm.factory import make_chat_model, model_status
from rag.llm.local_weights import converted_gguf
from rag.llm.meter import CostMeter
from rag.llm.settings import ApiKeys, LLMSettings
from rag.llm.testing import FakeLLMServer
from tests.serve_support import free_port

STARTUP_S = 180
QUESTIONS = {
    "q1": "How are word vectors computed from character n-grams?",
    "q2": "What is a skipgram model?",
    "q3": "Which languages are the word vectors evaluated on?",
}


class LlamaServer:
    """``python -m llama_cpp.server`` in its own session, stopped by its pid."""

    def __init__(self, tmp: Path) -> None:
        self.alias = f"smollm2-test-{secrets.token_hex(4)}"  # a fresh model name: no cache hits
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = tmp / "llama-server.log"
        args = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(converted_gguf("bf16")),
            "--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", "2048", "--n_threads", "1",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as r:
                    if self.alias in r.read().decode():
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"llama_cpp.server not up in {STARTUP_S}s: {self.log.read_text()[-2000:]}"
        )

    def chat_requests(self) -> int:
        """Chat completions the server has answered (uvicorn's access log lines)."""
        return self.log.read_text(errors="replace").count(
            '"POST /v1/chat/completions HTTP/1.1" 200'
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = LlamaServer(tmp_path_factory.mktemp("llama-server"))
    yield s
    s.stop()


def _settings(url: str, **kw) -> LLMSettings:
    base = dict(
        openai_compatible_base_url=url, timeout_s=120.0, max_attempts=2, backoff_initial_s=0.01,
        backoff_max_s=0.02, backoff_jitter_s=0.0, concurrency=1,
    )  # fmt: skip
    return LLMSettings(**{**base, **kw})


def test_a_call_is_real_cached_and_metered(server, tmp_path):
    cache, meter = CompletionCache(tmp_path / "c"), CostMeter()
    name = f"openai-compatible:{server.alias}"
    model = make_chat_model(name, _settings(server.url), cache=cache, meter=meter, keys=ApiKeys())
    q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    before = server.chat_requests()
    first = model.complete(q, max_tokens=12)
    assert server.chat_requests() == before + 1
    assert first.text.strip() and first.input_tokens > 10 and 0 < first.output_tokens <= 12
    assert (first.provider, first.cost_usd, first.price) == (
        "openai-compatible",
        0.0,
        "$0 (self-hosted)",
    )
    again = model.complete(q, max_tokens=12)
    assert again.cached and again.text == first.text and server.chat_requests() == before + 1
    row = meter.to_dict()["by_model"][0]
    assert row["model"] == name and (row["fresh_calls"], row["cached_calls"]) == (1, 1)
    assert row["input_tokens"] == 2 * first.input_tokens and row["cost_usd"] == 0.0
    assert row["price"] == "$0 (self-hosted)"
    cache.close()


def test_rag_ask_through_the_server(server, tmp_path_factory, shared_dir, monkeypatch, capsys):
    from rag.cli import main

    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_BASE_URL", server.url)
    name = f"openai-compatible:{server.alias}"
    argv = ["ask", QUESTIONS["q1"], "--model", name, "-k", "2", "--json", "--profile", "smoke",
            "--index-dir", str(tmp_path_factory.mktemp("ask") / "served")]  # fmt: skip
    out = []
    for _ in range(2):
        before = server.chat_requests()
        capsys.readouterr()
        assert main(argv) == 0
        out.append((json.loads(capsys.readouterr().out), server.chat_requests() - before))
    (d, sent), (d2, sent2) = out
    assert d["answerer"] == name and d["answer"].strip() and len(d["citations"]) == 2
    assert d["tokens_in"] > 100 and d["tokens_out"] > 0 and d["cost_usd"] == 0.0
    assert (sent, sent2) == (1, 0)  # the second ask is served from the completion cache
    assert d2["answer"] == d["answer"]


def test_a_notebook_05_row_through_the_server(server, tmp_path, tmp_path_factory, shared_dir):
    from rag.serve.config import ServeSettings, profile_settings
    from rag.serve.engine import load_lab

    lab = load_lab(
        profile_settings("smoke"),
        ServeSettings(index_dir=str(tmp_path_factory.mktemp("row") / "served")),
    )
    retriever, _ = lab.retriever("hybrid", 2)
    contexts = {q: assemble_context(retriever.retrieve(t, 2)) for q, t in QUESTIONS.items()}
    name = f"openai-compatible:{server.alias}"
    s = _settings(server.url)
    status = model_status([name], s, ApiKeys())
    assert status == {name: "run"}
    runs = []
    for _ in range(2):
        cache, meter = CompletionCache(tmp_path / "c"), CostMeter()
        chat = make_chat_model(name, s, cache=cache, meter=meter, keys=ApiKeys())
        rows = build_answerers(["local"], AnswerSettings(local_max_tokens=48), chat)
        before = server.chat_requests()
        answers = answer_each({name: rows["local"]}, QUESTIONS, contexts, status, progress=False)
        runs.append((answers, server.chat_requests() - before, meter.to_dict()["total"]))
        cache.close()
    (answers, sent, total), (answers2, sent2, total2) = runs
    assert status[name] == "run" and set(answers[name]) == set(QUESTIONS)
    assert all(a.text.strip() and a.answerer == f"local[{name}]" for a in answers[name].values())
    assert (sent, sent2) == (3, 0)
    assert total["fresh_calls"] == 3 and total["input_tokens"] > 300 and total["cost_usd"] == 0.0
    assert total2["cached_calls"] == 3 and total2["fresh_calls"] == 0
    assert {q: a.text for q, a in answers2[name].items()} == {
        q: a.text for q, a in answers[name].items()
    }


def test_the_service_ask_through_the_server(server, tmp_cache, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from rag.serve.app import create_app
    from rag.serve.config import ServeSettings
    from tests.serve_support import tiny_lab

    monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_BASE_URL", server.url)
    name = f"openai-compatible:{server.alias}"
    lab = tiny_lab(tmp_path / "served")
    offline = ServeSettings(allow_network=False, rate_limit_per_minute=0)
    body = {"question": "How is pair2vec trained?", "answerer": name, "k": 2}
    with TestClient(create_app(lab, serve=offline, api_key="")) as client:
        before = server.chat_requests()
        r = client.post("/ask", json=body)
        assert r.status_code == 200, r.text
        d = r.json()
        assert d["answerer"] == name and d["answer"].strip() and d["tokens_in"] > 0
        assert d["cost_usd"] == 0.0 and server.chat_requests() == before + 1
        r2 = client.post("/ask", json=body)
        assert r2.json()["answer"] == d["answer"] and server.chat_requests() == before + 1
        bad = client.post("/ask", json={**body, "answerer": "openai-compatibel:x"})
        assert bad.status_code == 422 and "unknown provider 'openai-compatibel'" in bad.text


# -- failures -----------------------------------------------------------------------------------


def _failing_chat(url: str, **kw):
    s = _settings(url, timeout_s=0.5, cache_enabled=False, **kw)
    return make_chat_model("openai-compatible:m", s, cache=None, keys=ApiKeys())


Q = [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    ("behaviour", "error", "message"),
    [
        ("500", RetriesExhausted, "500"),
        ("hang", RetriesExhausted, "imed out"),
        ("malformed", MalformedResponse, "no choices"),
        ("bad_json", MalformedResponse, "unreadable response"),
        ("not_json", MalformedResponse, "no choices"),
    ],
)
def test_endpoint_failures_become_named_errors(behaviour, error, message):
    with FakeLLMServer("openai", hang_s=3.0) as fake:
        fake.script([behaviour] * 4)
        with pytest.raises(error, match=message):
            _failing_chat(f"{fake.url}/v1").complete(Q, max_tokens=4)


def test_a_server_that_is_down_is_a_failed_row():
    url = f"http://127.0.0.1:{free_port()}/v1"
    chat = _failing_chat(url)
    with pytest.raises(EndpointRefused, match="connection refused") as err:
        chat.complete(Q, max_tokens=4)
    assert isinstance(err.value, RetriesExhausted) and err.value.endpoint.rstrip("/") == url
    assert "not retried" in str(err.value) and url in str(err.value)
    hit = {"chunk_id": "p#0", "paper_id": "2401.00001", "page": 1, "section": "", "score": 1.0}
    from rag.types import Hit

    ctx = assemble_context([Hit(text="Dense retrieval encodes passages.", **hit)])
    status = {"extractive-bm25": "run (no model)", "openai-compatible:m": "run"}
    from rag.answer.llm import LLMAnswerer

    answers = answer_each(
        {"extractive-bm25": ExtractiveAnswerer(), "openai-compatible:m": LLMAnswerer(chat)},
        {"q": "What does dense retrieval encode?"},
        {"q": ctx},
        status,
        progress=False,
    )
    assert list(answers) == ["extractive-bm25"]
    assert status["openai-compatible:m"].startswith("failed: EndpointRefused: ")


def test_no_endpoint_is_not_run_with_the_variable_named(monkeypatch):
    monkeypatch.delenv("RAG_OPENAI_COMPATIBLE_BASE_URL", raising=False)
    status = model_status(["openai-compatible:m"], LLMSettings(), ApiKeys())
    assert status == {
        "openai-compatible:m": "not run: no endpoint: set RAG_OPENAI_COMPATIBLE_BASE_URL or "
        "LLMSettings.openai_compatible_base_url"
    }
    with pytest.raises(ConfigError, match="unknown provider"):
        model_status(["openai_compatible:m"], LLMSettings(), ApiKeys())
