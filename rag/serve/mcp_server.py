"""``rag mcp``: the paper desk as a Model Context Protocol server (the official ``mcp`` SDK).

Each tool is a :class:`rag.serve.desk.Desk` method; its arguments carry the desk's own bounds in
their JSON schema (``k`` 1..50, a non-blank query), and the desk checks them, so a bad argument,
an unknown paper or a failed call comes back as a tool error (``isError``) whose text is the
desk's, naming the field and the value; the server keeps serving. Tools run on worker threads, so
two calls in flight do not wait on each other's retrieval (chat models are still used one at a
time by the lab). Every served paper is a resource ``paper://{arxiv_id}`` (its metadata and
sections as JSON). The server logs nothing but errors unless ``rag -v mcp``.

Transports: stdio (what desktop clients start) or streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, Field

from rag.errors import RagError
from rag.serve.desk import (
    AskArgs,
    Desk,
    JudgeArgs,
    PaperArgs,
    ReadArgs,
    RelatedArgs,
    SearchArgs,
    SummaryArgs,
)

INSTRUCTIONS = (
    "Tools over a pinned corpus of arXiv papers: list_papers for the ids; search for passages; "
    "ask for an answer whose [n] citations are judged claim by claim; judge to check one claim "
    "against a passage or chunk; get_paper and read for a "
    "paper's sections and pages; citations and related for its citation graph and related work; "
    "summarize for a judged summary."
)


def _f(model: type[BaseModel], name: str) -> Any:
    """A tool argument's field: the desk model's JSON schema for it (type, bounds, choices,
    description), advertised to clients but not enforced by the SDK. The tool's parameter is typed
    ``Any``, so a value out of bounds reaches the desk, whose :class:`ToolInputError` names the
    field and the value (``k=0: …``) where the SDK's own check would return pydantic's raw error."""
    schema = dict(model.model_json_schema()["properties"][name])
    schema.pop("title", None)
    schema.pop("default", None)
    return Field(description=schema.pop("description", None), json_schema_extra=schema)


async def _call(fn: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    try:
        return await anyio.to_thread.run_sync(lambda: fn(**kwargs))
    except RagError as e:
        raise ToolError(f"{type(e).__name__}: {e}") from e


def _signature(model: type[BaseModel]) -> inspect.Signature:
    """A tool's parameters as the desk's ``model`` declares them, in its order: each typed ``Any``
    with the field's schema (:func:`_f`), required where the model requires it, else with the
    model's default, so the tool and the desk cannot disagree on a default."""
    empty = inspect.Parameter.empty
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=empty if field.is_required() else field.default,
            annotation=Annotated[Any, _f(model, name)],
        )
        for name, field in model.model_fields.items()
    ]
    return inspect.Signature(params, return_annotation=dict[str, Any])


def build_server(desk: Desk, *, host: str = "127.0.0.1", port: int = 8765) -> FastMCP:
    """The MCP server over ``desk``: its tools and one ``paper://`` resource per served paper."""
    mcp = FastMCP("arxiv-rag-lab", instructions=INSTRUCTIONS, host=host, port=port)

    def tool(model: type[BaseModel] | None = None) -> Callable[[Any], Any]:
        """Register a tool whose parameters are ``model``'s fields (:func:`_signature`)."""

        def register(fn: Any) -> Any:
            if model is not None:
                fn.__signature__ = _signature(model)
            return mcp.tool()(fn)

        return register

    @tool()
    async def list_papers() -> dict[str, Any]:
        """Every paper of the served corpus: arXiv id, title, category, chunk count."""
        return await _call(desk.list_papers)

    @tool(SearchArgs)
    async def search(**kw: Any) -> dict[str, Any]:
        """Ranked passages (chunks) for a query, each with paper, page, section and text."""
        return await _call(desk.search, **kw)

    @tool(AskArgs)
    async def ask(**kw: Any) -> dict[str, Any]:
        """An answer from the corpus with numbered [n] citations (page and quote of each source)
        and, with judge, the offline judge's verdict on every claim."""
        return await _call(desk.ask, **kw)

    @tool(JudgeArgs)
    async def judge(**kw: Any) -> dict[str, Any]:
        """The offline judge's verdict (label, score, reason) on one claim against a passage's
        text or a served chunk id (from search or read), as ask judges each of its claims."""
        return await _call(desk.judge, **kw)

    @tool(PaperArgs)
    async def get_paper(**kw: Any) -> dict[str, Any]:
        """A paper's metadata (title, category, version, URL, pages) and its sections in order."""
        return await _call(desk.get_paper, **kw)

    @tool(ReadArgs)
    async def read(**kw: Any) -> dict[str, Any]:
        """The indexed text of one page of a paper (arxiv_id and page), or one chunk by id."""
        return await _call(desk.read, **kw)

    @tool(PaperArgs)
    async def citations(**kw: Any) -> dict[str, Any]:
        """What a paper cites (in the corpus or resolved arXiv ids outside it) and which corpus
        papers cite it, each link with how it was resolved and the raw reference."""
        return await _call(desk.citations, **kw)

    @tool(RelatedArgs)
    async def related(**kw: Any) -> dict[str, Any]:
        """The corpus papers most related to one, by text similarity, co-citation, coupling,
        popularity, or fusion (RRF of text and co-citation)."""
        return await _call(desk.related, **kw)

    @tool(SummaryArgs)
    async def summarize(**kw: Any) -> dict[str, Any]:
        """A section-aware summary of a paper (its abstract not read; extractive offline, or by
        a chat model), each sentence with the offline judge's verdict against the paper."""
        return await _call(desk.summarize, **kw)

    @mcp.resource(
        "paper://{arxiv_id}", name="paper", mime_type="application/json",
        description="A served paper's metadata and sections (get_paper).",
    )  # fmt: skip
    async def paper(arxiv_id: str) -> str:
        return json.dumps(await _call(desk.get_paper, arxiv_id=arxiv_id))

    for p in desk.lab.index.snapshot.papers:
        _add_paper_resource(mcp, desk, p.paper_id, p.title)
    return mcp


def _add_paper_resource(mcp: FastMCP, desk: Desk, pid: str, title: str) -> None:
    @mcp.resource(f"paper://{pid}", name=pid, title=title, mime_type="application/json")
    async def one() -> str:
        return json.dumps(await _call(desk.get_paper, arxiv_id=pid))


def protect_stdout() -> io.BufferedWriter:
    """Keep stdout for the protocol alone: the returned stream is a private copy of it, and
    file descriptor 1 and ``sys.stdout`` then point at stderr, so whatever a library prints
    (Python or native code) lands in the log instead of corrupting a message."""
    sys.stdout.flush()
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return proto


def run_stdio(server: FastMCP, proto: io.BufferedWriter) -> None:
    """Serve ``server`` over stdin and ``proto`` (from :func:`protect_stdout`)."""

    async def main() -> None:
        out = anyio.wrap_file(io.TextIOWrapper(proto, encoding="utf-8"))
        async with stdio_server(stdout=out) as (read, write):
            low = server._mcp_server  # FastMCP.run_stdio_async, with the protocol's own stdout
            await low.run(read, write, low.create_initialization_options())

    anyio.run(main)
