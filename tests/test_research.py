"""``rag research``: the tool-calling loop against a real scripted chat server on 127.0.0.1, and
the offline plan (search, related, ask) on the smoke profile's real index.

The loop runs over the two-paper test lab (``tests/serve_support.py``) with ``openai-compatible:``
pointed at :class:`ScriptedToolServer`, which answers with the tool calls a test scripts and
records every request, so a test reads what the loop sent back to the model.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest

from rag.errors import ConfigError
from rag.llm.settings import LLMSettings
from rag.llm.testing import FakeLLMServer
from rag.serve.desk import Desk, ToolInputError
from rag.serve.research import MAX_STEPS, research, tool_schemas
from tests.serve_support import TITLES, tiny_lab
from tests.test_cli import rag, smoke

FASTTEXT_CLS = "1607.01759"  # served by the test lab
SBERT_QUESTION = "How does Sentence-BERT derive sentence embeddings?"
SBERT = "1908.10084"
QUERY = "fastText linear classifier"


class ScriptedToolServer(FakeLLMServer):
    """An OpenAI-compatible server whose next answers are scripted assistant messages (tool
    calls or a final text); once the script is spent it repeats its last message."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        super().__init__("openai")
        self.messages = deque(messages)

    def ok_body(self, request: dict[str, Any]) -> dict[str, Any]:
        body = super().ok_body(request)
        with self._lock:
            msg = self.messages.popleft() if len(self.messages) > 1 else self.messages[0]
        body["choices"][0]["message"] = {"role": "assistant", **msg}
        body["choices"][0]["finish_reason"] = "tool_calls" if "tool_calls" in msg else "stop"
        return body


class ScriptedAnthropicServer(FakeLLMServer):
    """The same script in Anthropic's messages dialect: content blocks, ``tool_use`` calls."""

    def __init__(self, blocks: list[list[dict[str, Any]]]) -> None:
        super().__init__("anthropic")
        self.blocks = deque(blocks)

    def ok_body(self, request: dict[str, Any]) -> dict[str, Any]:
        body = super().ok_body(request)
        with self._lock:
            content = self.blocks.popleft()
        body["content"] = content
        body["stop_reason"] = "tool_use" if content[-1]["type"] == "tool_use" else "end_turn"
        return body


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """An assistant message with one tool call (``arguments`` as the model wrote them)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
    ]}  # fmt: skip


@pytest.fixture()
def desk(tmp_cache, tmp_path):
    return Desk(tiny_lab(tmp_path / "served"))


@pytest.fixture()
def scripted(monkeypatch):
    """Start a scripted server and point ``openai-compatible:`` at it."""
    servers = []

    def start(messages: list[dict[str, Any]]) -> ScriptedToolServer:
        s = ScriptedToolServer(messages).start()
        servers.append(s)
        monkeypatch.setenv("RAG_OPENAI_COMPATIBLE_BASE_URL", f"{s.url}/v1")
        return s

    yield start
    for s in servers:
        s.stop()


def test_the_loop_runs_the_desk_sends_errors_back_and_returns_the_answer(desk, scripted):
    final = f"fastText is a linear classifier over n-gram features [arXiv:{FASTTEXT_CLS} p. 1]."
    server = scripted([
        call("call_1", "search", {"query": QUERY, "k": 3, "retriever": None}),
        call("call_2", "search", {"query": "fastText", "k": 999}),
        {"content": final},
    ])  # fmt: skip
    rec = research("What is fastText?", "openai-compatible:scripted", desk, max_steps=4)

    assert (rec.mode, rec.stopped, rec.answer) == ("tools", "answer", final)
    assert [(s.tool, s.ok) for s in rec.steps] == [("search", True), ("search", False)]
    assert rec.steps[0].arguments == {
        "query": "fastText linear classifier",
        "k": 3,
    }  # null: default
    assert rec.steps[1].arguments == {"query": "fastText", "k": 999}
    assert "k=999" in rec.steps[1].error
    # the answer names one paper the tools returned: that is its citation
    assert [(c["arxiv_id"], c["title"]) for c in rec.citations] == [
        (FASTTEXT_CLS, TITLES[FASTTEXT_CLS])
    ]
    assert rec.unknown_citations == []

    assert len(server.bodies) == 3
    first = server.bodies[0]
    assert first["model"] == "scripted" and first["tools"] == tool_schemas(desk)
    assert {t["function"]["name"] for t in first["tools"]} == {
        "list_papers", "search", "ask", "judge", "get_paper", "read", "citations", "related",
        "summarize",
    }  # fmt: skip
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    # the real desk search went back to the model as the tool's answer
    sent = server.bodies[1]["messages"][-1]
    assert sent["role"] == "tool" and sent["tool_call_id"] == "call_1"
    expected = desk.search(QUERY, k=3)
    got = json.loads(sent["content"])
    assert got["hits"] == expected["hits"] and len(got["hits"]) == 3
    assert got["hits"][0]["arxiv_id"] == FASTTEXT_CLS
    # the bad k went back as a tool error naming the value, and the loop went on
    err = server.bodies[2]["messages"][-1]
    assert err["role"] == "tool" and err["tool_call_id"] == "call_2"
    assert "k=999" in json.loads(err["content"])["error"]
    assert server.bodies[2]["messages"][-2]["tool_calls"][0]["id"] == "call_2"


def test_bad_calls_are_tool_errors_and_the_loop_stops_at_max_steps(desk, scripted):
    server = scripted([
        call("c1", "delete_everything", {}),
        call("c2", "related", "{not json"),
        call("c3", "related", {"arxiv_id": FASTTEXT_CLS, "depth": 2}),
        call("c4", "related", {"arxiv_id": FASTTEXT_CLS, "k": 1, "method": "text"}),
    ])  # fmt: skip
    rec = research("Related work of fastText?", "openai-compatible:scripted", desk, max_steps=4)

    assert rec.stopped == "max_steps" and "max_steps" in rec.answer and rec.citations == []
    assert [s.ok for s in rec.steps] == [False, False, False, True]
    assert "delete_everything" in rec.steps[0].error
    assert "{not json" in rec.steps[1].error
    assert "'depth'" in rec.steps[2].error
    assert rec.steps[3].summary == f"1 papers related to {FASTTEXT_CLS}: 1810.08699"
    # four tool turns, then one more request whose tool call is not run
    assert len(server.bodies) == 5
    errors = [json.loads(m["content"]) for m in server.bodies[4]["messages"] if m["role"] == "tool"]
    assert len(errors) == 4 and [e.get("error", "") != "" for e in errors] == [True] * 3 + [False]


def test_the_loop_speaks_anthropic_tool_use(desk, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    final = (
        f"fastText classifies text with a linear model [arXiv:{FASTTEXT_CLS} p. 1], "
        "faster than deep models [arXiv:2501.00001 p. 3]."
    )
    script = [
        [{"type": "text", "text": "Searching."},
         {"type": "tool_use", "id": "tu_1", "name": "search",
          "input": {"query": "fastText linear classifier", "k": 2}}],
        [{"type": "tool_use", "id": "tu_2", "name": "read", "input": {"page": 1}}],
        [{"type": "text", "text": final}],
    ]  # fmt: skip
    with ScriptedAnthropicServer(script) as server:
        settings = LLMSettings(anthropic_base_url=server.url, max_attempts=1)
        rec = research("What is fastText?", "anthropic:claude-x", desk, settings=settings)
    assert (rec.mode, rec.model, rec.answer) == ("tools", "anthropic:claude-x", final)
    assert [(s.tool, s.ok) for s in rec.steps] == [("search", True), ("read", False)]
    assert "give arxiv_id and page" in rec.steps[1].error
    first, second, third = server.bodies
    assert first["system"] and [m["role"] for m in first["messages"]] == ["user"]
    assert [t["name"] for t in first["tools"]] == [
        t["function"]["name"] for t in tool_schemas(desk)
    ]
    assert first["tools"][1]["input_schema"] == tool_schemas(desk)[1]["function"]["parameters"]
    result = second["messages"][-1]["content"][0]
    assert (result["type"], result["tool_use_id"], result["is_error"]) == (
        "tool_result",
        "tu_1",
        False,
    )
    hits = json.loads(result["content"])["hits"]
    assert hits == desk.search("fastText linear classifier", k=2)["hits"]
    error = third["messages"][-1]["content"][0]
    assert (error["tool_use_id"], error["is_error"]) == ("tu_2", True)
    assert [c["arxiv_id"] for c in rec.citations] == [FASTTEXT_CLS]
    assert rec.unknown_citations == ["2501.00001"]  # named by the model, returned by no tool


def test_bad_requests_are_named(desk):
    with pytest.raises(ToolInputError, match="question=' '"):
        research(" ", None, desk)
    with pytest.raises(ToolInputError, match=f"max_steps=0: .* 1 to {MAX_STEPS}"):
        research("fastText?", None, desk, max_steps=0)
    with pytest.raises(ToolInputError, match=f"max_steps={MAX_STEPS + 1}"):
        research("fastText?", None, desk, max_steps=MAX_STEPS + 1)
    with pytest.raises(ConfigError, match="unknown provider 'opena'"):
        research("fastText?", "opena:gpt-4o", desk)


# -- the offline plan on the smoke index, through the CLI --------------------------------------


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, shared_dir):
    return str(tmp_path_factory.mktemp("research-cli") / "served")


def test_rag_research_offline_runs_the_plan_with_a_cited_answer(index_dir, capsys, monkeypatch):
    # a tool-calling model without its endpoint: the plan runs, and the record says why
    monkeypatch.delenv("RAG_OPENAI_COMPATIBLE_BASE_URL", raising=False)
    model = "openai-compatible:no-endpoint"
    code, out, err = rag(capsys, "research", SBERT_QUESTION, "--model", model, "--json",
                         *smoke(index_dir))  # fmt: skip
    assert code == 0, err
    d = json.loads(out)
    assert (d["mode"], d["model"], d["stopped"]) == ("plan", model, "answer")
    assert "no endpoint: set RAG_OPENAI_COMPATIBLE_BASE_URL" in d["why"]
    assert [s["tool"] for s in d["steps"]] == ["search", "related", "ask"]
    assert all(s["ok"] for s in d["steps"])
    assert d["steps"][0]["summary"].startswith(f"5 hits (hybrid): {SBERT} p. ")
    assert d["steps"][1]["arguments"] == {"arxiv_id": SBERT, "k": 5}
    assert d["steps"][1]["summary"].startswith(f"4 papers related to {SBERT}: ")
    assert d["answer"] and "[1]" in d["answer"]
    assert d["citations"] and all(c["cited"] and c["quote"] for c in d["citations"])
    assert SBERT in {c["arxiv_id"] for c in d["citations"]}
    assert d["judgement"] is not None


def test_rag_research_refuses_bad_values_before_loading(capsys):
    code, out, err = rag(capsys, "research", "q", "--max-steps", "0", "--profile", "smoke")
    assert code == 2 and f"'0' is not a whole number from 1 to {MAX_STEPS}" in err
    code, out, err = rag(capsys, "research", "  ", "--profile", "smoke")
    assert code == 2 and "question='  '" in err and out == ""
