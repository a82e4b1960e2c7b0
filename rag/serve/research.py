"""``rag research``: a question worked through the paper desk's tools, by a model or a fixed plan.

With a tool-capable chat model (``openai:``, ``groq:``, ``ollama:``, ``openai-compatible:``
through the OpenAI chat-completions ``tools`` API; ``anthropic:`` through its messages API) the
model is sent the desk's tools with the JSON schemas the MCP server (:mod:`rag.serve.mcp_server`)
exposes, so both doors describe the tools once. Each tool call runs through
:class:`rag.serve.desk.Desk`; a bad call (unknown tool, arguments that are not a JSON object, an
unknown or missing argument, a value the desk refuses) goes back to the model as a tool error
naming the value, and the loop goes on. It ends at the model's first message without tool calls,
or at the first turn that asks for more once ``max_steps`` tool calls have run (the record says
it stopped there). The loop is a ReAct-style agent (Yao et al., 2023, "ReAct: Synergizing
Reasoning and Acting in Language Models") with the provider's native tool calls.

Offline — no model, a local model (``local:``, ``gguf:``), or an API model without its key or
endpoint (the record says which) — the same steps come from a fixed plan: ``search`` the
question, ``related`` papers of the top hit's paper, then ``ask`` (a cited answer, every claim
judged; by the local model when one is named, else extractive).
"""

from __future__ import annotations

import json
import logging
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from rag.errors import RagError
from rag.serve.desk import Desk, ToolInputError
from rag.types import AsDict

log = logging.getLogger(__name__)

#: Providers whose tool calls the loop makes: the OpenAI chat-completions ``tools`` API, and
#: Anthropic's messages API.
TOOL_PROVIDERS = ("openai", "groq", "ollama", "openai-compatible", "anthropic")
#: Local providers whose model can answer the plan's ``ask`` step.
LOCAL_PROVIDERS = ("local", "gguf")
MAX_STEPS = 20
#: A tool result longer than this (characters of JSON) reaches the model cut short.
RESULT_CHARS = 12_000
#: Tokens of one model turn (a tool call or the final answer).
MAX_TOKENS = 1024
SYSTEM = (
    "You answer a researcher's question from a pinned corpus of arXiv papers, using the tools. "
    "Search before you answer; read or ask when passages are not enough. Answer only from what "
    "the tools returned, and cite every claim as [arXiv:ID p. N]. If the corpus does not say, "
    "say so."
)
_ARXIV_ID = re.compile(r"\b(\d{4}\.\d{4,5})(?:v\d+)?\b")


@dataclass
class Step:
    """One tool call: what was called with what, and what came back (or the error)."""

    tool: str
    arguments: dict[str, Any]
    ok: bool
    summary: str
    error: str = ""


@dataclass
class Research(AsDict):
    """The record of one question: its steps, the answer and the sources the answer cites.

    Attributes:
        mode: "tools" (the model chose the calls) or "plan" (the fixed offline plan).
        why: why the plan ran instead of a model ("" in tools mode).
        stopped: "answer" (a final message, or the plan's answer) or "max_steps".
        citations: the sources the answer cites: arXiv id, page, title (and, from ``ask``, the
            chunk, quote and the judge's reading when the plan ran).
        unknown_citations: arXiv ids the model's answer names that no tool returned (a
            citation nothing the model read supports).
    """

    question: str
    model: str
    mode: str
    why: str
    steps: list[Step] = field(default_factory=list)
    answer: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    unknown_citations: list[str] = field(default_factory=list)
    stopped: str = "answer"
    judgement: dict[str, Any] | None = None


def check_request(question: str, max_steps: int) -> str:
    """The stripped question, or :class:`ToolInputError` naming an empty one or a bad step cap."""
    if not isinstance(question, str) or not question.strip():
        raise ToolInputError("question", f"question={question!r}: give a non-empty question")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int):
        raise ToolInputError("max_steps", f"max_steps={max_steps!r}: give a whole number")
    if not 1 <= max_steps <= MAX_STEPS:
        raise ToolInputError(
            "max_steps", f"max_steps={max_steps!r}: give a whole number from 1 to {MAX_STEPS}"
        )
    return question.strip()


def tool_schemas(desk: Desk) -> list[dict[str, Any]]:
    """The desk's tools as OpenAI function tools, with the MCP server's own JSON schemas."""
    import anyio

    from rag.serve.mcp_server import build_server

    tools = anyio.run(build_server(desk).list_tools)
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description or "",
                                          "parameters": t.inputSchema}}
        for t in tools
    ]  # fmt: skip


def summarize_result(tool: str, r: dict[str, Any]) -> str:
    """One line saying what a tool returned."""
    if tool == "search":
        top = ", ".join(f"{h['arxiv_id']} p. {h['page']}" for h in r["hits"][:3])
        return f"{len(r['hits'])} hits ({r['retriever']}): {top}"
    if tool == "related":
        return f"{len(r['related'])} papers related to {r['arxiv_id']}: " + ", ".join(
            d["arxiv_id"] for d in r["related"][:3]
        )
    if tool == "ask":
        cited = sum(c["cited"] for c in r["citations"])
        return f"{cited} cited source(s): " + textwrap.shorten(r["answer"], 120, placeholder="…")
    if tool == "judge":
        return f"{r['label']} ({r['score']:.3f}) by {r['judge']}"
    if tool == "list_papers":
        return f"{r['n_papers']} papers, {r['n_chunks']} chunks"
    if tool == "get_paper":
        return f"{r['arxiv_id']}: {r['title']} ({r['pages']} pages, {len(r['sections'])} sections)"
    if tool == "read":
        return f"{len(r['chunks'])} chunk(s) of {r['arxiv_id']}"
    if tool == "citations":
        return f"{r['arxiv_id']} cites {r['n_cites']}, cited by {r['n_cited_by']}"
    if tool == "summarize":
        return f"{len(r['sentences'])} summary sentence(s) of {r['paper_id']}"
    return ", ".join(sorted(r))


class _Tools:
    """Runs tool calls on the desk, checking names and arguments against the schemas first."""

    def __init__(self, desk: Desk, schemas: list[dict[str, Any]] | None = None) -> None:
        self.desk = desk
        #: ``{tool: JSON schema of its arguments}``; None: the plan's own calls, not checked
        self.params = (
            None if schemas is None
            else {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
        )  # fmt: skip
        #: every source a tool returned: ``{arxiv_id: {"arxiv_id", "page", "title"}}``
        self.sources: dict[str, dict[str, Any]] = {}

    def _arguments(self, name: str, raw: Any) -> dict[str, Any]:
        if self.params is None:
            return dict(raw)
        if name not in self.params:
            raise ToolInputError("tool", f"tool={name!r} is unknown; tools: {sorted(self.params)}")
        try:
            args = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except ValueError as e:
            raise ToolInputError("arguments", f"arguments={raw!r} is not JSON: {e}") from None
        if not isinstance(args, dict):
            raise ToolInputError("arguments", f"arguments={raw!r}: give a JSON object")
        schema = self.params[name]
        unknown = sorted(set(args) - set(schema.get("properties", {})))
        if unknown:
            raise ToolInputError(unknown[0], f"{name} has no argument {unknown[0]!r}; "
                                 f"arguments: {sorted(schema.get('properties', {}))}")  # fmt: skip
        args = {k: v for k, v in args.items() if v is not None}  # null: the tool's default
        missing = [a for a in schema.get("required", []) if a not in args]
        if missing:
            raise ToolInputError(missing[0], f"{name} needs the argument {missing[0]!r}")
        return args

    def run(self, name: str, raw: Any) -> tuple[Step, dict[str, Any]]:
        """The step and what the model is sent back (the result, or ``{"error": ...}``)."""
        try:
            args = self._arguments(name, raw)
        except ToolInputError as e:
            args = raw if isinstance(raw, dict) else {"raw": raw}
            return Step(name, args, False, "", f"{type(e).__name__}: {e}"), {"error": str(e)}
        try:
            result = getattr(self.desk, name)(**args)
        except RagError as e:
            err = f"{type(e).__name__}: {e}"
            return Step(name, args, False, "", err), {"error": err}
        self._remember(name, result)
        return Step(name, args, True, summarize_result(name, result)), result

    def _remember(self, name: str, r: dict[str, Any]) -> None:
        """Note the passages a tool returned (search hits, ask's sources, a page read), so the
        answer's arXiv ids can be cited with the first page the model saw of each paper."""
        if name == "read":
            rows = [{**r, "page": r["page"] or r["chunks"][0]["page_start"]}]
        else:
            rows = r["hits"] if name == "search" else r["citations"] if name == "ask" else []
        for d in rows:
            self.sources.setdefault(
                d["arxiv_id"], {"arxiv_id": d["arxiv_id"], "page": d["page"], "title": d["title"]}
            )


@dataclass(frozen=True)
class _ToolModel:
    client: Any  # the SDK client the factory built (key, endpoint, timeout, SDK retries off)
    settings: Any  # its LLMSettings (the retry layer's attempts and backoff)
    provider: str
    api_model: str


def _tool_model(model: str, settings: Any = None) -> tuple[_ToolModel | None, str]:
    """The tool-capable model behind ``model``, or ``(None, why it cannot call tools here)``.

    The client comes from :func:`rag.llm.factory.make_chat_model`, the one place SDK clients
    are built, so the loop builds none of its own.
    """
    from rag.llm.anthropic_chat import AnthropicBackend
    from rag.llm.factory import make_chat_model
    from rag.llm.openai_chat import OpenAIChatBackend
    from rag.llm.registry import parse_model

    ref = parse_model(model)  # a typo in the provider is a ConfigError naming the known ones
    if ref.provider not in TOOL_PROVIDERS:
        return None, f"{ref.label}: no tool calls here (they need one of {TOOL_PROVIDERS})"
    try:
        chat = make_chat_model(ref, settings)
    except RagError as e:  # a missing key or endpoint: say so, and run the plan
        return None, str(e)
    backend = chat.backend
    if not isinstance(backend, OpenAIChatBackend | AnthropicBackend):  # pragma: no cover
        return None, f"{ref.label}: served by neither tool-calling API"
    return _ToolModel(backend.client, chat.settings, chat.spec.provider, chat.spec.api_model), ""


def research(
    question: str, model: str | None, desk: Desk, max_steps: int = 6, settings: Any = None
) -> Research:
    """Work ``question`` through the desk's tools: by ``model``'s tool calls when it can make
    them, else by the fixed plan (search, related, ask).

    Args:
        question: what the researcher asks.
        model: a chat model name (:mod:`rag.llm.names`), or None for the plan.
        desk: the paper desk whose tools are called.
        max_steps: tool calls the model may make (1..:data:`MAX_STEPS`).
        settings: the model's :class:`rag.llm.settings.LLMSettings` (None: defaults), e.g.
            a base URL.

    Raises:
        ToolInputError: an empty question, or ``max_steps`` outside 1..:data:`MAX_STEPS`.
        ConfigError: an unknown provider in ``model``.
        LLMError: the model's API failed after the retry layer's attempts.
    """
    from rag.llm.registry import parse_model

    q = check_request(question, max_steps)
    why, label = "no model named", ""
    if model:
        label = parse_model(model).label  # a gguf: file by its name, never its folder
        tm, why = _tool_model(model, settings)
        if tm is not None:
            return _loop(q, label, desk, tm, max_steps)
    log.info("research: the fixed plan (%s)", why)
    return _plan(q, model or "", label, desk, why)


def _plan(question: str, model: str, label: str, desk: Desk, why: str) -> Research:
    from rag.llm.registry import parse_model

    rec = Research(question, label, "plan", why)
    tools = _Tools(desk)
    step, hits = tools.run("search", {"query": question, "k": 5})
    rec.steps.append(step)
    if step.ok and hits["hits"]:
        rec.steps.append(tools.run("related", {"arxiv_id": hits["hits"][0]["arxiv_id"], "k": 5})[0])
    local = model and parse_model(model).provider in LOCAL_PROVIDERS
    step, r = tools.run("ask", {"question": question, "answerer": model if local else "extractive"})
    rec.steps.append(step)
    if step.ok:
        rec.answer, rec.judgement = r["answer"], r["judgement"]
        rec.citations = [c for c in r["citations"] if c["cited"]]
    else:
        rec.answer = f"the plan could not answer: {step.error}"
    return rec


class _OpenAIDialect:
    """Chat completions: tools as functions, results as ``tool`` messages."""

    def __init__(self, tm: _ToolModel, schemas: list[dict[str, Any]], question: str) -> None:
        self.tm, self.tools = tm, schemas
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
        ]

    def turn(self) -> tuple[Any, str, list[tuple[str, str, Any]]]:
        """One model turn: (the raw message, its text, its calls as (id, tool, arguments))."""
        resp = self.tm.client.chat.completions.create(
            model=self.tm.api_model, messages=self.messages, tools=self.tools, temperature=0.0,
            seed=0, max_tokens=MAX_TOKENS,
        )  # fmt: skip
        msg = resp.choices[0].message
        calls = [(c.id, c.function.name, c.function.arguments) for c in msg.tool_calls or []]
        return msg, msg.content or "", calls

    def answer(self, msg: Any, results: list[tuple[str, str, bool]]) -> None:
        """Append the model's turn and each call's result (id, JSON text, is an error)."""
        self.messages.append(msg.model_dump(exclude_none=True))
        for call_id, text, _ in results:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


class _AnthropicDialect:
    """Anthropic messages: ``tool_use`` blocks, results as ``tool_result`` blocks of a user turn."""

    def __init__(self, tm: _ToolModel, schemas: list[dict[str, Any]], question: str) -> None:
        self.tm = tm
        self.tools = [
            {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
            for f in (s["function"] for s in schemas)
        ]
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": question}]

    def turn(self) -> tuple[Any, str, list[tuple[str, str, Any]]]:
        from rag.llm.anthropic_chat import sdk_takes_temperature

        create = self.tm.client.messages.create
        # the SDK's own rule, as the chat backend applies it: newer SDKs take no temperature
        extra = (
            {"temperature": 0.0}
            if sdk_takes_temperature(type(self.tm.client.messages).create)
            else {}
        )
        resp = create(
            model=self.tm.api_model, system=SYSTEM, messages=self.messages, tools=self.tools,
            max_tokens=MAX_TOKENS, **extra,
        )  # fmt: skip
        text = "".join(b.text for b in resp.content if b.type == "text")
        calls = [(b.id, b.name, b.input) for b in resp.content if b.type == "tool_use"]
        return resp, text, calls

    def answer(self, resp: Any, results: list[tuple[str, str, bool]]) -> None:
        blocks = [b.model_dump(exclude_none=True) for b in resp.content]
        self.messages.append({"role": "assistant", "content": blocks})
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": text, "is_error": err}
            for i, text, err in results
        ]})  # fmt: skip


def _loop(question: str, label: str, desk: Desk, tm: _ToolModel, max_steps: int) -> Research:
    from rag.llm.retry import call_with_retries

    rec = Research(question, label, "tools", "")
    schemas = tool_schemas(desk)
    tools = _Tools(desk, schemas)
    kind = _AnthropicDialect if tm.provider == "anthropic" else _OpenAIDialect
    chat = kind(tm, schemas, question)
    while True:
        raw, text, calls = call_with_retries(
            chat.turn, provider=tm.provider, model=tm.api_model, s=tm.settings
        )
        if not calls:
            rec.answer = text.strip()
            break
        if len(rec.steps) >= max_steps:
            rec.stopped = "max_steps"
            rec.answer = f"stopped after {max_steps} tool calls (max_steps) without a final answer"
            break
        results = []
        for call_id, name, arguments in calls:
            if len(rec.steps) >= max_steps:  # the rest of this turn's calls are not run
                ok, out = False, {"error": f"not run: max_steps={max_steps} reached"}
            else:
                step, out = tools.run(name, arguments)
                rec.steps.append(step)
                ok = step.ok
            body = json.dumps(out, ensure_ascii=False)
            if len(body) > RESULT_CHARS:
                body = body[:RESULT_CHARS] + " …(cut short)"
            results.append((call_id, body, not ok))
        chat.answer(raw, results)
    named = dict.fromkeys(m.group(1) for m in _ARXIV_ID.finditer(rec.answer))
    rec.citations = [tools.sources[p] for p in named if p in tools.sources]
    rec.unknown_citations = [p for p in named if p not in tools.sources]
    return rec
