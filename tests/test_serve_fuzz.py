"""Property-based fuzzing of a real ``rag serve`` against its own OpenAPI document (schemathesis).

The server runs on 127.0.0.1 over two small pinned papers with an API key and no rate limit (the
limit would be what is measured), with both self-hosted LLM endpoints stated and pointing at a
local scripted chat server (:class:`rag.llm.testing.FakeLLMServer`), and no API key of any
provider: the document then offers ``ollama:MODEL`` and ``openai-compatible:MODEL`` names beside
the packaged local model, and every call stays on this machine.

Every operation is fuzzed with every check ``schemathesis run --checks all`` runs (the library
default enables them all; a test below keeps it so): no server error, declared status codes,
content types, headers and response schemas; a request the document calls invalid is refused and
one it calls valid is not (the schema-valid-rejected check); an unsupported method is a 405 with
its ``Allow``; responses within :data:`MAX_RESPONSE_S`. Besides the document's examples and
boundary cases (the coverage phase) each operation gets :data:`MAX_EXAMPLES` generated requests.
A stateful run then follows the document's links, among them ``POST /ingest``'s 202 to
``GET /ingest/{job_id}`` with the job's id, so the job route answers real jobs, not only 404s.

Requests that run the in-process LLM (the packaged model as an answerer, rewriter or summariser;
the ``hyde`` retriever) are left out: each costs tens of seconds to minutes on a busy two-core
machine. The scripted endpoint models run the same service paths; the notebooks and the
service's own tests run the local model.

The document is built from the app at collection (schemathesis parametrizes tests then), in the
environment the server gets, and the test first checks it is exactly the one the live server
publishes; schemathesis's fixture-loaded schemas rely on a pytest node attribute that pytest 9
no longer has.
"""

from __future__ import annotations

import copy
import inspect
import os
import secrets
from unittest import mock

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, reject, settings
from hypothesis.stateful import Bundle
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.generation.stateful.state_machine import StepInput
from schemathesis.specs.openapi.stateful import transition

from rag.errors import ConfigError
from rag.llm.registry import IN_PROCESS, resolve_model
from rag.llm.settings import COMPATIBLE_KEY_ENV, ENDPOINT_ENV, KEY_ENV
from rag.llm.testing import FakeLLMServer
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from tests.serve_support import Server, serve_cache_dir

KEY = "fuzz-" + secrets.token_hex(12)
AUTH = {"X-API-Key": KEY}
#: Generated requests per operation (besides the document's examples and boundary cases).
MAX_EXAMPLES = 8
#: Stateful scenarios, and steps in each.
SCENARIOS, STEPS = 8, 3
#: Per-request timeout, and the response time every answer must keep (the first request of a
#: kind loads its model: the judge, the reranker).
REQUEST_TIMEOUT_S, MAX_RESPONSE_S = 120, 90
#: No provider key reaches the server: nothing may leave the machine.
NO_KEYS = {var: "" for var in (*KEY_ENV.values(), COMPATIBLE_KEY_ENV)}
#: Retrievers that call the in-process LLM.
SLOW_RETRIEVERS = ("hyde",)


def _endpoints(url: str) -> dict[str, str]:
    return {ENDPOINT_ENV["ollama"]: url, ENDPOINT_ENV["openai-compatible"]: url + "/v1"}


def _document() -> dict:
    """The document of an app in the server's environment (the endpoints' addresses do not
    change it: only which providers have one)."""
    env = {**NO_KEYS, **_endpoints("http://127.0.0.1:9")}
    with mock.patch.dict(os.environ, env):
        app = create_app(serve=ServeSettings(), api_key=KEY, loader=lambda status: None)
        return app.fastapi.openapi()


DOCUMENT = _document()
schema = schemathesis.openapi.from_dict(copy.deepcopy(DOCUMENT))  # it adds inferred links
schema.config.update(headers=AUTH, request_timeout=REQUEST_TIMEOUT_S)
schema.config.generation.update(max_examples=MAX_EXAMPLES, deterministic=True, database="none")
schema.config.checks.update(max_response_time=MAX_RESPONSE_S)


def _in_process(name: object) -> bool:
    try:
        return isinstance(name, str) and resolve_model(name).provider in IN_PROCESS
    except ConfigError:  # not a model name: the service refuses it, fast
        return False


def slow(case) -> bool:
    """Whether a case runs the in-process LLM (module docstring)."""
    body = case.body if isinstance(case.body, dict) else {}
    query = case.query if isinstance(case.query, dict) else {}
    names = (body.get("answerer"), body.get("rewrite_model"), query.get("model"))
    retriever = body.get("retriever")
    return any(_in_process(n) for n in names) or (
        isinstance(retriever, str) and retriever in SLOW_RETRIEVERS
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory, shared_dir):
    tmp = tmp_path_factory.mktemp("serve-fuzz")
    with FakeLLMServer(reply="fastText averages word vectors. It is fast.") as llm:
        env = {"RAG_API_KEY": KEY, **NO_KEYS, **_endpoints(llm.url)}
        server = Server(tmp, cache=serve_cache_dir(tmp_path_factory), env=env)
        try:
            server.wait_ready(headers=AUTH)
            yield server
        finally:
            server.stop()
            assert "Traceback" not in server.log.read_text(), server.log.read_text()[-3000:]


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_the_service_answers_as_its_openapi_document_says(case, live):
    if slow(case):
        return
    case.call_and_validate(base_url=live.url)


def test_the_service_keeps_its_links(live):
    followed: list[tuple[str, str, int]] = []
    ingest = schema["/ingest"]["POST"].as_strategy(generation_mode=GenerationMode.POSITIVE)

    class Workflow(schema.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"base_url": live.url, "headers": AUTH, "timeout": REQUEST_TIMEOUT_S}

        def step(self, input):
            if slow(input.case):
                reject()
            return super().step(input)

        def after_call(self, response, case):
            super().after_call(response, case)
            followed.append((case.method, case.path, response.status_code))

        # schemathesis starts scenarios only at operations whose inputs nothing else must
        # produce, and it reads the body's `arxiv_id` as the id of an "Arxiv" resource that no
        # operation produces: so POST /ingest, whose 202 feeds the link, is made a start here,
        # as schemathesis makes its own (the job's id then flows through the link)
        queue_a_job = transition(
            name="RANDOM -> POST /ingest", target=Bundle("catch_all"),
            input=ingest.map(StepInput.initial), precondition=lambda machine: True,
        )  # fmt: skip

    Workflow.run(
        settings=settings(
            max_examples=SCENARIOS, stateful_step_count=STEPS, deadline=None, derandomize=True,
            database=None, suppress_health_check=list(HealthCheck),
        )
    )  # fmt: skip
    assert ("POST", "/ingest", 202) in followed
    assert ("GET", "/ingest/{job_id}", 200) in followed, sorted(set(followed))


def test_the_fuzz_runs_every_check_schemathesis_has():
    load_all_checks()
    config = schema.config.checks
    names = [c.__name__ for c in CHECKS.get_all() if not inspect.isclass(c)]
    assert "positive_data_acceptance" in names and "response_schema_conformance" in names
    assert all(config.get_by_name(name=n).enabled for n in names), names
    assert config.max_response_time.enabled and config.max_response_time.limit == MAX_RESPONSE_S


def test_the_fuzzed_document_is_the_one_the_server_publishes(live):
    served = httpx.get(live.url + "/openapi.json", headers=AUTH, timeout=30)
    assert served.status_code == 200 and served.json() == DOCUMENT
    answerer = DOCUMENT["components"]["schemas"]["AskRequest"]["properties"]["answerer"]
    assert {"type": "string", "pattern": "^(?:ollama|openai-compatible):[!-~]+$",
            "maxLength": 200} in answerer["anyOf"]  # fmt: skip
