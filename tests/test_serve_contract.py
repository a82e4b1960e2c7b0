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
import threading
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from rag.llm.base import Completion
from rag.serve import app as app_module
from rag.serve import models as m
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
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
