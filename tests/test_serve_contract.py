"""The OpenAPI document against the service's real answers (in process, FastAPI's TestClient).

For every route of the document, each status code it declares is provoked for real (a valid
request, malformed JSON, a body over the limit, an invalid field, no key, an emptied rate bucket,
a lab still loading, an internal error past the guard, an unknown job or paper, a query parameter
out of range) and the codes observed
must equal the codes declared; every error body must be the one documented error model. The
fuzzer over a live ``rag serve`` is ``test_serve_fuzz.py``.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import jsonschema_rs
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from rag.llm.base import Completion
from rag.llm.errors import UnusableReply
from rag.serve import app as app_module
from rag.serve import models as m
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from rag.serve.desk import Desk
from rag.serve.engine import Engine
from rag.serve.offer import ModelOffer
from tests.fakechat import FakeChatModel
from tests.serve_support import tiny_lab
from tests.test_serve import WordJudge, _sse

KEY = "contract-test-key-0123456789"
LIMITS = {"max_body_bytes": 1024, "max_upload_bytes": 2048}
OPEN = ServeSettings(allow_network=False, rate_limit_per_minute=0, **LIMITS)

#: A request each POST route accepts (a route missing here fails the test until it is added).
VALID_BODIES: dict[str, dict[str, Any]] = {
    "/search": {"query": "fastText"},
    "/ask": {"question": "How are sentences represented in fastText?"},
    "/chat": {"messages": [{"role": "user", "content": "What does pair2vec learn?"}]},
    "/ingest": {"arxiv_id": "2501.99999"},
}


class Boom(RuntimeError):
    """An internal error whose message holds what must never reach a client."""


SECRET_MESSAGE = f"failed reading /home/someone/private/file.txt with key {KEY}"


class _ExplodingState(app_module._State):
    """The app's state whose lab raises on every read once loaded: an internal error past the
    guard in every route that needs the lab."""

    @property
    def lab(self):
        if self._lab is None:
            return None
        raise Boom(SECRET_MESSAGE)

    @lab.setter
    def lab(self, value) -> None:
        self._lab = value

    def __init__(self) -> None:
        self._lab = None
        super().__init__()


def _routes(app) -> list[tuple[str, str]]:
    return sorted(
        (method, r.path)
        for r in app.fastapi.routes
        if isinstance(r, APIRoute) and r.include_in_schema
        for method in r.methods
    )


def _documented(app) -> dict[tuple[str, str], set[int]]:
    doc = app.fastapi.openapi()
    return {
        (method.upper(), path): {int(code) for code in op["responses"]}
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
    }


#: A served paper of :func:`tiny_lab` (the paper routes' valid id).
PAPER = "1607.01759"
#: An out-of-range query parameter per paper route that takes any (the 422 it declares).
BAD_QUERY = {
    "/papers/{arxiv_id}/related": {"k": 0},
    "/papers/{arxiv_id}/summary": {"sentences": 21},
}


def _url(path: str, job_id: str, arxiv_id: str = PAPER) -> str:
    return path.replace("{job_id}", job_id).replace("{arxiv_id}", arxiv_id)


def _call(
    c: TestClient, method: str, path: str, *, job_id: str = "nojob", arxiv_id: str = PAPER,
    body=None, **kw,
):  # fmt: skip
    url = _url(path, job_id, arxiv_id)
    if method == "GET":
        return c.get(url, **kw)
    return c.post(url, json=VALID_BODIES[path] if body is None else body, **kw)


@pytest.fixture()
def lab(tmp_cache, tmp_path):
    return tiny_lab(tmp_path / "served", judge=WordJudge())


def _check_error_body(r, route, code: int) -> None:
    assert r.headers["content-type"] == "application/json", (route, code)
    body = r.json()
    model = m.NotReady if route == ("GET", "/ready") and code == 503 else m.ErrorResponse
    assert set(body) == set(model.model_fields), (route, code, body)
    model.model_validate(body)
    assert body["error"] and body["detail"], (route, code, body)


def test_every_documented_status_is_produced_and_nothing_else(lab, monkeypatch):
    observed: dict[tuple[str, str], set[int]] = {}

    def seen(route, r) -> None:
        observed.setdefault(route, set()).add(r.status_code)
        if r.status_code >= 400:
            _check_error_body(r, route, r.status_code)

    app = create_app(lab, serve=OPEN, api_key="")
    routes = _routes(app)
    assert {p for meth, p in routes if meth == "POST"} == set(VALID_BODIES)
    with TestClient(app) as c:
        job_id = c.post("/ingest", json=VALID_BODIES["/ingest"]).json()["job_id"]
        for route in routes:
            method, path = route
            seen(route, _call(c, method, path, job_id=job_id))  # a valid request
            if "{job_id}" in path:
                seen(route, _call(c, method, path, job_id="f" * 16))  # unknown job
            if "{arxiv_id}" in path:
                seen(route, _call(c, method, path, arxiv_id="2501.99999"))  # unknown paper
            if path in BAD_QUERY:
                seen(route, _call(c, method, path, params=BAD_QUERY[path]))  # out of range
            if method == "POST":
                raw = {"content": b'{"query": ', "headers": {"content-type": "application/json"}}
                seen(route, c.post(path, **raw))  # malformed JSON
                seen(route, c.post(path, content=b"x" * 4096))  # over both limits
                seen(route, _call(c, method, path, body={}))  # a required field missing

    with TestClient(create_app(lab, serve=OPEN, api_key=KEY)) as c:
        for route in routes:
            seen(route, _call(c, *route))  # no key

    limited = ServeSettings(allow_network=False, rate_limit_per_minute=1, rate_burst=1)
    with TestClient(create_app(lab, serve=limited, api_key="")) as c:
        c.get("/papers")  # the one token of this client
        for route in routes:
            seen(route, _call(c, *route))

    go = threading.Event()

    def loader(status):
        status("index loading")
        go.wait(30)
        return lab

    with TestClient(create_app(serve=OPEN, api_key="", loader=loader)) as c:
        for route in routes:
            seen(route, _call(c, *route))  # still loading
        go.set()

    monkeypatch.setattr(app_module, "_State", _ExplodingState)
    with TestClient(create_app(lab, serve=OPEN, api_key=""), raise_server_exceptions=False) as c:
        for route in routes:
            r = _call(c, *route)
            seen(route, r)
            if r.status_code == 500:
                assert r.json() == {"error": "internal error", "detail": "Boom"}
                assert "/home/someone" not in r.text and KEY not in r.text

    # a chat model whose reply is unusable: the routes that run one answer their 502
    def unusable(*a, **kw):
        raise UnusableReply("smollm2-135m", "no summary sentence", "Q-A-R-A-T-A-T-")

    monkeypatch.setattr(app_module, "_State", _ExplodingState.__mro__[1])
    for cls, name in ((Engine, "ask"), (Engine, "rewrite"), (Desk, "summarize")):
        monkeypatch.setattr(cls, name, unusable)
    with TestClient(create_app(lab, serve=OPEN, api_key="")) as c:
        for route in routes:
            r = _call(c, *route)
            if r.status_code == 502:
                seen(route, r)
                assert "Q-A-R" not in r.text  # the model's output is never echoed

    documented = _documented(app)
    assert set(documented) == set(routes)
    for route in routes:
        assert observed[route] == documented[route], (route, observed[route], documented[route])


def test_every_streamed_event_is_one_the_document_declares_with_its_data_model(lab):
    app = create_app(lab, serve=OPEN, api_key="")
    doc = app.fastapi.openapi()
    assert "HTTPValidationError" not in json.dumps(doc)
    bodies = {
        "/ask": {"question": "How are sentences represented in fastText?", "stream": True},
        "/chat": {"messages": VALID_BODIES["/chat"]["messages"], "stream": True},
    }
    with TestClient(app) as c:
        for path, body in bodies.items():
            content = doc["paths"][path]["post"]["responses"]["200"]["content"]
            assert set(content) == {"application/json", "text/event-stream"}
            declared = {
                ev["properties"]["event"]["const"]: ev["properties"]["data"]["contentSchema"]
                for ev in content["text/event-stream"]["schema"]["oneOf"]
            }
            assert set(declared) == {"retrieval", "token", "citations", "done", "error"}
            r = c.post(path, json=body)
            assert r.headers["content-type"].startswith("text/event-stream")
            events = _sse(r.text)
            assert {k for k, _ in events} == {"retrieval", "token", "citations", "done"}
            for kind, data in events:
                model = getattr(m, declared[kind]["$ref"].rsplit("/", 1)[-1])
                assert set(data) == set(model.model_fields), (path, kind)
                model.model_validate(data)
            json_model = content["application/json"]["schema"]["$ref"]
            assert declared["done"]["$ref"] == json_model
    for path, ops in doc["paths"].items():
        for op in ops.values():
            for code, resp in op["responses"].items():
                if int(code) >= 400:
                    ref = resp["content"]["application/json"]["schema"]["$ref"]
                    assert ref.rsplit("/", 1)[-1] in ("ErrorResponse", "NotReady"), (path, code)


class CrashingModel:
    """A chat model that fails with a message holding a local path and the key."""

    name = "crashing-model"

    def complete(self, messages, **kw) -> Completion:
        raise Boom(SECRET_MESSAGE)


def test_an_internal_error_is_the_documented_500_without_a_traceback(tmp_cache, tmp_path):
    lab = tiny_lab(tmp_path / "served", chat_model=lambda name: CrashingModel())
    app = create_app(lab, serve=OPEN, api_key=KEY)
    q = {"question": "How is pair2vec trained?", "answerer": "smollm2-135m"}
    with TestClient(app, raise_server_exceptions=False, headers={"X-API-Key": KEY}) as c:
        r = c.post("/ask", json=q)
        assert r.status_code == 500 and r.json() == {"error": "internal error", "detail": "Boom"}
        assert "Traceback" not in r.text and "/home/someone" not in r.text and KEY not in r.text
        # Streaming: the status line is sent before the answerer runs, so the failure is an
        # event, scrubbed of the path and the key.
        s = c.post("/ask", json={**q, "stream": True})
        assert s.status_code == 200 and s.headers["content-type"].startswith("text/event-stream")
        events = _sse(s.text)
        assert [k for k, _ in events] == ["retrieval", "error"]
        err = events[1][1]
        assert err["error"] == "Boom" and "/home/someone" not in err["detail"]
        assert KEY not in s.text and "Traceback" not in s.text
        assert c.get("/ready").status_code == 200  # the service is still up


# -- what the document allows, the service takes ------------------------------------------------

#: The deployment these tests describe: no API key, both self-hosted endpoints stated (never
#: called: the lab's chat models are injected).
NO_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GROQ_API_KEY", "RAG_OPENAI_COMPATIBLE_API_KEY")
ENDPOINTS = {
    "OLLAMA_HOST": "http://127.0.0.1:9",
    "RAG_OPENAI_COMPATIBLE_BASE_URL": "http://127.0.0.1:9/v1",
}


#: The default body limit (1 MiB): room for the longest fields.
WIDE = ServeSettings(allow_network=False, rate_limit_per_minute=0)


@pytest.fixture()
def deployment(monkeypatch):
    for var in NO_KEYS:
        monkeypatch.delenv(var, raising=False)
    for var, value in ENDPOINTS.items():
        monkeypatch.setenv(var, value)


@pytest.fixture()
def chatty_lab(tmp_cache, tmp_path, deployment):
    """A lab whose every chat model answers at once, so every model name it is offered runs."""
    reply = "The model averages word vectors. It trains a linear classifier on them."
    return tiny_lab(tmp_path / "served", judge=WordJudge(),
                    chat_model=lambda name: FakeChatModel(reply, name=name))  # fmt: skip


def _body_validator(doc: dict[str, Any], path: str):
    """The request body's JSON Schema validator, with ECMA-262 regexes as in the fuzzer."""
    schema = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return jsonschema_rs.Draft202012Validator({**schema, "components": doc["components"]})


USER = {"role": "user", "content": "What does pair2vec learn?"}
BOT = {"role": "assistant", "content": "Word pair embeddings."}
#: Bodies on the edge of what the document states; each one's verdict (the document's and the
#: service's) must agree. The comments say the rule each probes.
EDGE_BODIES: list[tuple[str, dict[str, Any]]] = [
    ("/search", {"query": "fastText", "k": 26.0}),  # 26.0 is an integer in JSON Schema
    ("/search", {"query": "fastText", "k": 2.5}),
    ("/search", {"query": "fastText", "k": True}),
    ("/search", {"query": "fastText", "k": "5"}),
    ("/search", {"query": "fastText", "per_paper_cap": 2.0}),
    ("/search", {"query": "\x1c"}),  # white space to str.strip, not to ECMA's \s
    ("/search", {"query": "\ufeff"}),  # the reverse
    ("/search", {"query": " \t "}),
    ("/search", {"query": " " * 1999 + "x"}),  # 2,000 characters as sent
    ("/search", {"query": " " * 2000 + "x"}),  # 2,001 as sent, 1 once stripped
    ("/search", {"query": "fastText", "retriever": "hyde"}),
    ("/ask", {"question": "fastText?", "k": 3.0, "answerer": "extractive"}),
    ("/ask", {"question": "fastText?", "answerer": "0"}),
    ("/ask", {"question": "fastText?", "answerer": "0" * 200}),
    ("/ask", {"question": "fastText?", "answerer": " extractive"}),
    ("/ask", {"question": "fastText?", "answerer": "smollm2-135m"}),
    ("/ask", {"question": "fastText?", "answerer": "local:smollm2-135m"}),
    ("/ask", {"question": "fastText?", "answerer": "local:nope"}),
    ("/ask", {"question": "fastText?", "answerer": "ollama:qwen2.5:7b"}),
    ("/ask", {"question": "fastText?", "answerer": "openai-compatible:org/model-1"}),
    ("/ask", {"question": "fastText?", "answerer": "ollama: qwen"}),
    ("/ask", {"question": "fastText?", "answerer": "openai:gpt-4o-mini"}),  # no key here
    ("/ask", {"question": "fastText?", "answerer": "gpt-4o-mini"}),
    ("/ask", {"question": "fastText?", "answerer": "gguf:/tmp/model.gguf"}),
    ("/chat", {"messages": [USER]}),
    ("/chat", {"messages": [USER, BOT]}),  # the last message must be the user's
    ("/chat", {"messages": [USER, BOT, USER]}),
    ("/chat", {"messages": [USER] * 21}),
    ("/chat", {"messages": [{"role": "user", "content": "\u3000"}]}),
    ("/chat", {"messages": [USER], "rewrite_model": "0"}),
    ("/chat", {"messages": [USER], "rewrite_model": "extractive"}),
    ("/chat", {"messages": [USER], "rewrite_model": "smollm2-135m"}),
    ("/chat", {"messages": [USER], "rewrite_model": "ollama:llama3"}),
    ("/chat", {"messages": [USER], "rewrite_model": None}),
    ("/ingest", {"arxiv_id": "2501.99999"}),
    ("/ingest", {"arxiv_id": " 2501.99999"}),  # the pattern has no room for spaces
    ("/ingest", {"arxiv_id": "2501.99999\n"}),
    ("/ingest", {"arxiv_id": "2501.99999v2"}),
]


def test_a_body_the_document_allows_is_taken_and_one_it_does_not_is_refused(chatty_lab):
    app = create_app(chatty_lab, serve=WIDE, api_key="")
    doc = app.fastapi.openapi()
    with TestClient(app) as c:
        for path, body in EDGE_BODIES:
            allowed = _body_validator(doc, path).is_valid(body)
            r = c.post(path, json=body)
            assert r.status_code in ((200, 202) if allowed else (422,)), (path, body, r.text)
            if not allowed:
                field = r.json()["detail"].split(":")[0].split(".")[0]
                assert field in body or field == "messages", (body, r.text)


def test_every_integer_field_takes_a_whole_number_written_as_a_float(chatty_lab):
    app = create_app(chatty_lab, serve=WIDE, api_key="")
    doc = app.fastapi.openapi()
    schemas = doc["components"]["schemas"]
    tried = []
    with TestClient(app) as c:
        for path, body in VALID_BODIES.items():
            sch = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
            if "$ref" in sch:
                sch = schemas[sch["$ref"].rsplit("/", 1)[-1]]
            for name, prop in sch["properties"].items():
                ints = [b for b in prop.get("anyOf", [prop]) if b.get("type") == "integer"]
                if ints:
                    value = float(ints[0].get("minimum", 1))
                    r = c.post(path, json={**body, name: value})
                    assert r.status_code == 200, (path, name, r.text)
                    tried.append((path, name))
        for path, op in doc["paths"].items():
            if path.endswith("/summary"):
                continue  # a first summary parses the paper (~20 s); it reads its ints as /related
            for p in op.get("get", {}).get("parameters", []):
                if p["in"] == "query" and p["schema"].get("type") == "integer":
                    value = float(p["schema"].get("minimum", 1))
                    r = c.get(_url(path, "nojob"), params={p["name"]: value})
                    assert r.status_code == 200, (path, p["name"], r.text)
                    tried.append((path, p["name"]))
    assert {("/search", "k"), ("/search", "per_paper_cap"), ("/ask", "k"), ("/chat", "k"),
            ("/papers/{arxiv_id}/related", "k")} <= set(tried)  # fmt: skip


def test_every_model_name_the_document_lists_runs_and_the_summary_takes_them_too(chatty_lab):
    app = create_app(chatty_lab, serve=WIDE, api_key="")
    doc = app.fastapi.openapi()
    props = doc["components"]["schemas"]["ChatRequest"]["properties"]
    answerers = next(b["enum"] for b in props["answerer"]["anyOf"] if "enum" in b)
    rewriters = next(b["enum"] for b in props["rewrite_model"]["anyOf"] if "enum" in b)
    assert "extractive" in answerers and "smollm2-135m" in answerers
    assert set(rewriters) == set(answerers) - {"extractive"}
    patterns = {b["pattern"] for b in props["answerer"]["anyOf"] if "pattern" in b}
    assert patterns == {"^(?:ollama|openai-compatible):[!-~]+$"}  # no key: no API provider
    summary = doc["paths"]["/papers/{arxiv_id}/summary"]["get"]["parameters"]
    model = next(p["schema"] for p in summary if p["name"] == "model")
    assert model == {"anyOf": props["answerer"]["anyOf"]}  # the answerer's names
    with TestClient(app) as c:
        for name in [*answerers, "ollama:qwen2.5:7b"]:
            body = {"messages": [USER], "answerer": name, "rewrite_model": None}
            assert c.post("/chat", json=body).status_code == 200, name
            r = c.get(f"/papers/{PAPER}/summary", params={"model": name, "sentences": 2})
            assert r.status_code == 200, (name, r.text)
        for name in rewriters:
            r = c.post("/chat", json={"messages": [USER, BOT, USER], "rewrite_model": name})
            assert r.status_code == 200 and r.json()["rewriter"], (name, r.text)
        r = c.get(f"/papers/{PAPER}/summary", params={"model": "0"})
        assert r.status_code == 422 and r.json()["detail"].startswith("model: unknown model '0'")


def test_a_name_refused_says_why(chatty_lab):
    app = create_app(chatty_lab, serve=WIDE, api_key="")
    why = {
        "openai:gpt-4o-mini": "is not available here: no key: set OPENAI_API_KEY",
        "gguf:/tmp/model.gguf": "gguf: models are served only as the profile's local_model",
        "local:nope": "unknown local model 'nope'",
        "openai-compatibel:x": "unknown provider 'openai-compatibel'",
        "ollama: x": "a model id here is printable ASCII without spaces",
    }
    with TestClient(app) as c:
        for name, reason in why.items():
            r = c.post("/ask", json={"question": "fastText?", "answerer": name})
            assert r.status_code == 422 and r.json()["detail"].startswith("answerer: "), r.text
            assert reason in r.json()["detail"] and "/tmp/" not in r.text, r.text
        r = c.post("/chat", json={"messages": [USER], "rewrite_model": "extractive"})
        assert r.json()["detail"].startswith("rewrite_model: extractive is an answerer")


def test_the_offer_follows_the_deployment(tmp_cache, tmp_path, deployment, monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-test-not-a-real-key-0000")
    lab = tiny_lab(tmp_path / "served", chat_model=lambda name: FakeChatModel("x", name=name))
    lab.settings = lab.settings.model_copy(update={"llm_model": "gguf:/nowhere/model.gguf"})
    offer = ModelOffer.here(lab.settings)
    assert offer.open_providers == ("groq", "openai-compatible")  # the stated endpoint only
    assert "llama-3.1-8b-instant" in offer.names and "gpt-4o" not in offer.names
    assert offer.reasons["ollama"] == "no endpoint stated: set OLLAMA_HOST"
    assert "hyde" not in offer.retrievers and "hybrid" in offer.retrievers
    app = create_app(lab, serve=WIDE, api_key="")
    retriever = app.fastapi.openapi()["components"]["schemas"]["SearchRequest"]["properties"][
        "retriever"
    ]
    assert retriever["enum"] == list(offer.retrievers)
    with TestClient(app) as c:
        r = c.post("/search", json={"query": "fastText", "retriever": "hyde"})
        assert r.status_code == 422 and r.json()["detail"] == (
            "retriever: 'hyde' is not available here: its LLM 'gguf:model.gguf' does not run here"
        )


def test_the_blank_pattern_is_str_strip_in_every_regex_dialect():
    space = [chr(c) for c in range(0x3001) if chr(c).isspace()]
    assert not any(re.search(m.NOT_BLANK, ch) for ch in space)
    assert all(re.search(m.NOT_BLANK, chr(c)) for c in range(0x10000) if not chr(c).isspace())
    ecma = jsonschema_rs.validator_for({"type": "string", "pattern": m.NOT_BLANK})
    assert not any(ecma.is_valid(ch) for ch in space)
    assert all(ecma.is_valid(ch) for ch in ("x", "\ufeff", "\x00", "\u200b", "é"))


def test_an_ingest_job_is_linked_from_its_202(chatty_lab):
    app = create_app(chatty_lab, serve=WIDE, api_key="")
    link = app.fastapi.openapi()["paths"]["/ingest"]["post"]["responses"]["202"]["links"]
    (target,) = link.values()
    assert target["operationRef"] == "#/paths/~1ingest~1{job_id}/get"
    assert target["parameters"] == {"job_id": "$response.body#/job_id"}
    with TestClient(app) as c:
        job = c.post("/ingest", json=VALID_BODIES["/ingest"]).json()
        r = c.get(f"/ingest/{job['job_id']}")
        assert r.status_code == 200 and r.json()["job_id"] == job["job_id"]
