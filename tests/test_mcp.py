"""``rag mcp`` over stdio, driven by the official SDK's own client (``stdio_client`` +
``ClientSession``) against a real server process on the smoke profile's five papers.

One server per module (its index built, or found, in the project's cache as ``tests/test_cli.py``
builds it); the client session lives on an event loop in a background thread, so each test sends
its requests through :meth:`Client.run`. Every tool is called, bad inputs come back as tool errors
naming the field and the value, the server keeps serving after them, and two calls run at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from rag import paths
from rag.papers.graph import read_citations
from rag.report.profiles import load_profile

SMOKE_PAPERS = set(load_profile("smoke")["all"]["paper_ids"])
SBERT = "1908.10084"  # Sentence-BERT: 15 resolved references, cited by 8 corpus papers
TOOLS = {
    "list_papers", "search", "ask", "judge", "get_paper", "read", "citations", "related",
    "summarize",
}  # fmt: skip
CALL_TIMEOUT_S = 600


class Client:
    """An MCP client session to one ``rag mcp`` subprocess, on a loop in its own thread."""

    def __init__(self, params: StdioServerParameters, errlog) -> None:
        self.loop = asyncio.new_event_loop()
        self.session: ClientSession | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._params, self._errlog = params, errlog
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(),))
        self.thread.start()
        if not self._ready.wait(CALL_TIMEOUT_S) or self._failed:
            raise AssertionError(f"rag mcp did not initialise: {self._failed!r}")

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            async with stdio_client(self._params, errlog=self._errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    self.init = await session.initialize()
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as e:  # reported by the constructor's wait
            self._failed = e
            self._ready.set()

    def run(self, fn):
        """``await fn(session)`` on the client's loop; its result."""
        fut = asyncio.run_coroutine_threadsafe(fn(self.session), self.loop)
        return fut.result(CALL_TIMEOUT_S)

    def call(self, tool: str, **arguments):
        return self.run(lambda s: s.call_tool(tool, arguments))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(60)
        self.loop.close()


@pytest.fixture(scope="module")
def client(tmp_path_factory, shared_dir):
    tmp = tmp_path_factory.mktemp("mcp")
    args = ["-m", "rag.cli", "mcp", "--profile", "smoke", "--index-dir", str(tmp / "served")]
    params = StdioServerParameters(
        command=sys.executable, args=args, env=dict(os.environ), cwd=str(paths.project_root())
    )
    with (tmp / "server.log").open("w") as errlog:
        c = Client(params, errlog)
        c.log = tmp / "server.log"
        yield c
        c.close()


def result(r) -> dict:
    """A successful call's structured result (the dict the desk returned)."""
    assert not r.isError, r.content[0].text
    assert json.loads(r.content[0].text) == r.structuredContent
    return r.structuredContent


def error_text(r) -> str:
    assert r.isError, r
    return r.content[0].text


def test_tools_are_listed_with_the_desks_bounds_in_their_schemas(client):
    assert client.init.serverInfo.name == "arxiv-rag-lab"
    tools = {t.name: t for t in client.run(lambda s: s.list_tools()).tools}
    assert set(tools) == TOOLS
    search = tools["search"].inputSchema
    assert search["required"] == ["query"]
    assert search["properties"]["k"]["minimum"] == 1 and search["properties"]["k"]["maximum"] == 50
    assert search["properties"]["query"]["minLength"] == 1
    related = tools["related"].inputSchema["properties"]
    assert related["method"]["enum"] == ["text", "cocitation", "coupling", "popularity", "fusion"]
    assert all(t.description for t in tools.values())


def test_list_papers_and_get_paper_describe_the_served_corpus(client):
    listed = result(client.call("list_papers"))
    assert {p["arxiv_id"] for p in listed["papers"]} == SMOKE_PAPERS
    assert all(p["n_chunks"] > 0 and p["category"].startswith("cs.") for p in listed["papers"])
    paper = result(client.call("get_paper", arxiv_id=SBERT))
    assert paper["title"].startswith("Sentence-BERT")
    assert paper["pages"] >= 9 and paper["url"].endswith(SBERT)
    pages = [s["page"] for s in paper["sections"]]
    assert len(pages) >= 4 and pages == sorted(pages)


def test_search_then_read_returns_the_same_chunk_text(client):
    found = result(client.call("search", query="siamese network sentence embeddings", k=3))
    assert len(found["hits"]) == 3
    assert {h["arxiv_id"] for h in found["hits"]} <= SMOKE_PAPERS
    assert found["hits"][0]["arxiv_id"] == SBERT
    top = found["hits"][0]
    chunk = result(client.call("read", chunk_id=top["chunk_id"]))
    assert chunk["arxiv_id"] == SBERT and chunk["chunks"][0]["text"] == top["text"]
    page = result(client.call("read", arxiv_id=SBERT, page=top["page"]))
    assert top["chunk_id"] in {c["chunk_id"] for c in page["chunks"]}
    assert all(c["page_start"] <= top["page"] <= c["page_end"] for c in page["chunks"])


def test_ask_answers_with_citations_and_a_verdict_per_claim(client):
    d = result(client.call("ask", question="How does SBERT derive sentence embeddings?", k=3))
    assert d["answer"] and not d["refused"]
    assert len(d["citations"]) == 3 and any(c["cited"] for c in d["citations"])
    j = d["judgement"]
    assert j["claims"] and all(c["label"] for c in j["claims"])


def test_judge_checks_one_claim_against_a_served_chunk_or_a_passage(client):
    """The desk's judge as a tool: a sentence of a chunk is supported by that chunk (given by id,
    the verdict carries its text), and a claim checked against an unrelated passage is not."""
    top = result(client.call("search", query="siamese network sentence embeddings", k=1))["hits"][0]
    sentence = max(top["text"].split(". "), key=len).strip()
    d = result(client.call("judge", claim=sentence, source=top["chunk_id"]))
    assert (d["chunk_id"], d["source"], d["claim"]) == (top["chunk_id"], top["text"], sentence)
    assert d["label"] == "supported" and d["judge"] and d["reason"] and 0 <= d["score"] <= 1
    other = result(client.call("judge", claim=sentence, source="Bananas are rich in potassium."))
    assert other["chunk_id"] is None and other["label"] != "supported"
    text = error_text(client.call("judge", claim="   ", source=top["chunk_id"]))
    assert "ToolInputError: claim=" in text


def test_citations_are_the_graphs_rows_both_ways(client):
    d = result(client.call("citations", arxiv_id=SBERT))
    rows = read_citations(paths.resolve("data/citations.jsonl"))
    assert [x["arxiv_id"] for x in d["cites"]] == [r.cited for r in rows if r.citing == SBERT]
    assert sorted(x["arxiv_id"] for x in d["cited_by"]) == sorted(
        r.citing for r in rows if r.cited == SBERT
    )
    assert d["n_cites"] == 15 and d["n_cited_by"] == 8
    assert all(x["title"] for x in d["cited_by"])  # every citing paper is a corpus paper


def test_related_ranks_the_other_served_papers(client):
    d = result(client.call("related", arxiv_id=SBERT, k=10, method="text"))
    ids = [r["arxiv_id"] for r in d["related"]]
    assert set(ids) == SMOKE_PAPERS - {SBERT}
    assert [r["rank"] for r in d["related"]] == [1, 2, 3, 4]
    scores = [r["score"] for r in d["related"]]
    assert scores == sorted(scores, reverse=True)
    top = result(client.call("related", arxiv_id=SBERT, k=1))
    assert top["method"] == "fusion" and len(top["related"]) == 1


def test_summarize_judges_every_sentence(client):
    d = result(client.call("summarize", arxiv_id=SBERT, sentences=3))
    assert d["paper_id"] == SBERT and d["method"] == "extractive"
    assert 1 <= len(d["sentences"]) <= 3
    assert all(s["verdict"]["label"] and s["page"] >= 1 for s in d["sentences"])


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("citations", {"arxiv_id": "2501.99999"}, ["arxiv_id", "2501.99999"]),
        ("get_paper", {"arxiv_id": "not-an-id"}, ["arxiv_id", "not-an-id"]),
        ("summarize", {"arxiv_id": "2501.99999"}, ["arxiv_id", "2501.99999"]),
        ("search", {"query": "   "}, ["query"]),
        ("search", {"query": "word vectors", "k": 0}, ["k", "0"]),
        ("related", {"arxiv_id": SBERT, "k": 51}, ["k", "51"]),
        ("related", {"arxiv_id": SBERT, "method": "magic"}, ["method", "magic"]),
        ("ask", {"question": ""}, ["question"]),
        ("read", {"chunk_id": "0123456789abcdef"}, ["chunk_id", "0123456789abcdef"]),
        ("read", {"arxiv_id": SBERT, "page": 999}, ["page", "999"]),
    ],
)
def test_a_bad_input_is_a_tool_error_naming_it(client, tool, arguments, named):
    text = error_text(client.call(tool, **arguments))
    for word in named:
        assert word in text, text


@pytest.mark.parametrize(
    ("tool", "arguments", "bad"),
    [
        ("search", {"query": "word vectors", "k": 0}, "k"),
        ("ask", {"question": "How does SBERT derive sentence embeddings?", "k": 0}, "k"),
        ("related", {"arxiv_id": SBERT, "k": 51}, "k"),
        ("related", {"arxiv_id": SBERT, "method": "magic"}, "method"),
        ("summarize", {"arxiv_id": SBERT, "sentences": "many"}, "sentences"),
    ],
)
def test_a_bad_argument_is_the_desks_message_not_pydantics(client, tool, arguments, bad):
    """The SDK does not check the schema's bounds itself: the desk does, so the client reads the
    desk's ``field=value: …`` (as docs/lab.md and the HTTP service word it), never pydantic's
    raw error with its link."""
    text = error_text(client.call(tool, **arguments))
    assert f"ToolInputError: {bad}={arguments[bad]!r}: " in text, text
    assert "pydantic" not in text and "validation error" not in text, text


def test_the_server_starts_quietly(client):
    """Loading the index logs nothing at info (nor faiss's loader): the server's stderr is the
    log a desktop client shows, and holds only errors unless ``rag -v mcp``."""
    client.run(lambda s: s.list_tools())  # the index is loaded before the server answers
    log = client.log.read_text()
    assert "INFO" not in log and "faiss" not in log, log[:2000]


def test_the_server_still_serves_after_bad_inputs(client):
    assert error_text(client.call("search", query="x", k=-1))
    assert len(result(client.call("list_papers"))["papers"]) == len(SMOKE_PAPERS)


def test_two_calls_at_once_answer_as_they_do_alone(client):
    queries = ("subword information for rare words", "pair embeddings for inference")
    alone = [result(client.call("search", query=q, k=4)) for q in queries]

    async def both(s):
        return await asyncio.gather(*(s.call_tool("search", {"query": q, "k": 4}) for q in queries))

    together = [result(r) for r in client.run(both)]
    for a, b in zip(alone, together, strict=True):
        assert [h["chunk_id"] for h in a["hits"]] == [h["chunk_id"] for h in b["hits"]]
    assert alone[0]["hits"][0]["arxiv_id"] == "1607.04606"
    assert alone[0]["hits"] != alone[1]["hits"]  # each call got its own query's answer


def test_papers_are_resources(client):
    listed = client.run(lambda s: s.list_resources()).resources
    assert {str(r.uri) for r in listed} == {f"paper://{p}" for p in SMOKE_PAPERS}
    r = client.run(lambda s: s.read_resource(f"paper://{SBERT}"))
    body = json.loads(r.contents[0].text)
    assert body["arxiv_id"] == SBERT and body["sections"]
    templates = client.run(lambda s: s.list_resource_templates()).resourceTemplates
    assert [t.uriTemplate for t in templates] == ["paper://{arxiv_id}"]


def test_stdout_is_kept_for_the_protocol_alone(tmp_path):
    code = (
        "import os, sys\n"
        "from rag.serve.mcp_server import protect_stdout\n"
        "proto = protect_stdout()\n"
        "print('a library prints')\n"
        "os.write(1, b'native code writes\\n')\n"
        'proto.write(b\'{"jsonrpc": "2.0"}\\n\'); proto.flush()\n'
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=True)
    assert r.stdout == b'{"jsonrpc": "2.0"}\n'
    assert b"a library prints" in r.stderr and b"native code writes" in r.stderr


@pytest.fixture(scope="module")
def http_url(tmp_path_factory, shared_dir):
    """A real ``rag mcp --http`` on a free 127.0.0.1 port (its own session; stopped by its pid);
    its MCP endpoint URL once the port accepts connections."""
    from tests.polling import wait_until
    from tests.serve_support import READY_TIMEOUT_S, free_port

    tmp = tmp_path_factory.mktemp("mcp-http")
    port = free_port()
    log = tmp / "server.log"
    cmd = [sys.executable, "-m", "rag.cli", "mcp", "--profile", "smoke", "--index-dir",
           str(tmp / "served"), "--http", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=paths.project_root(),
            start_new_session=True,
        )  # fmt: skip

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"rag mcp --http exited: {log.read_text()[-3000:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(up, what="rag mcp --http to listen", timeout_s=READY_TIMEOUT_S, interval_s=0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def test_streamable_http_serves_the_same_tools(http_url):
    """The SDK's streamable-HTTP client against ``rag mcp --http``: the tools are listed, a call
    answers, a bad input is a tool error naming the value, and the session still serves after."""
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    async def session_calls():
        async with httpx.AsyncClient(trust_env=False, timeout=CALL_TIMEOUT_S) as http:
            async with streamable_http_client(http_url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as s:
                    init = await s.initialize()
                    tools = (await s.list_tools()).tools
                    found = await s.call_tool("search", {"query": "subword information", "k": 2})
                    bad = await s.call_tool("related", {"arxiv_id": SBERT, "k": 51})
                    listed = await s.call_tool("list_papers", {})
                    return init, tools, found, bad, listed

    init, tools, found, bad, listed = asyncio.run(session_calls())
    assert init.serverInfo.name == "arxiv-rag-lab"
    assert {t.name for t in tools} == TOOLS
    hits = result(found)["hits"]
    assert len(hits) == 2 and hits[0]["arxiv_id"] == "1607.04606"  # fastText: subword information
    text = error_text(bad)
    assert "k" in text and "51" in text
    assert {p["arxiv_id"] for p in result(listed)["papers"]} == SMOKE_PAPERS
