"""A real ``rag serve`` process on 127.0.0.1: readiness, SSE parsed event by event, and a crash.

The server serves two small pinned papers (from the mirror, embedded with the real MiniLM into a
cache in a tmp folder), so a first start costs a few seconds of embedding. The crash tests hold an
ingest of a third paper at a known point of its commit (:mod:`tests.serve_pause`), kill the server
with SIGKILL there, restart it on the same served index and check the one outcome that point
allows: killed before the manifest is replaced, the paper is wholly out; killed after, wholly in
(manifest, segments, dense and BM25 agree either way).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.serve_support import Server, serve_cache_dir, wait_until

NEW = "1310.4546"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory, shared_dir):
    return tmp_path_factory.mktemp("serve-e2e")


@pytest.fixture(scope="module")
def serve_cache(tmp_path_factory, shared_dir):
    return serve_cache_dir(tmp_path_factory)


def sse_events(response) -> list[tuple[str, dict]]:
    """Parse a text/event-stream response event by event, as a browser's EventSource does."""
    events, name, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif line == "" and name is not None:
            events.append((name, json.loads("\n".join(data))))
            name, data = None, []
    return events


def test_rag_serve_end_to_end(tmp, serve_cache):
    server = Server(tmp, cache=serve_cache)
    try:
        info = server.wait_ready()
        assert info["papers"] == 2 and info["chunks"] > 10
        assert set(server.causes) <= {"starting", "index loading", "model loading"}
        assert httpx.get(server.url + "/health").json() == {"status": "ok"}
        r = httpx.post(server.url + "/search", json={"query": "hierarchical softmax", "k": 3})
        assert r.status_code == 200 and r.json()["hits"][0]["arxiv_id"] == "1607.01759"
        q = {"question": "How are word pair embeddings trained?", "stream": True}
        with httpx.stream("POST", server.url + "/ask", json=q, timeout=60) as resp:
            assert resp.status_code == 200
            events = sse_events(resp)
        kinds = [k for k, _ in events]
        assert kinds[0] == "retrieval" and kinds[-2:] == ["citations", "done"], kinds
        assert all(k == "token" for k in kinds[1:-2])
        done = events[-1][1]
        assert "".join(d["text"] for k, d in events if k == "token") == done["answer"]
        assert done["citations"] and done["latency_ms"]["total"] > 0
        assert httpx.post(server.url + "/search", json={"query": ""}).status_code == 422
        page = httpx.get(server.url + "/")
        assert page.status_code == 200 and "Ask the lab" in page.text
        assert str(Path.home()) not in server.log.read_text()
    finally:
        server.stop()


def _state(url: str) -> tuple[dict, dict]:
    papers = httpx.get(url + "/papers").json()
    return papers, {p["arxiv_id"]: p["n_chunks"] for p in papers["papers"]}


def _on_disk(served: Path) -> tuple[list[str], list[str]]:
    manifest = json.loads((served / "manifest.json").read_text())
    return [p["paper_id"] for p in manifest["papers"]], sorted(
        d.name for d in (served / "segments").iterdir()
    )


@pytest.mark.parametrize("point", ["before-manifest", "after-manifest"])
def test_sigkill_inside_the_ingest_commit_leaves_the_paper_wholly_out_or_in(
    tmp_path, serve_cache, point
):
    marker = tmp_path / "held"
    server = Server(tmp_path, cache=serve_cache, module=("tests.serve_pause", point, str(marker)))
    try:
        server.wait_ready()
        before, _ = _state(server.url)
        job = httpx.post(server.url + "/ingest", json={"arxiv_id": NEW}).json()
        wait_until(marker.exists, 600, f"the ingest of {NEW} reaching {point}", every=0.2)
        # Held inside the commit: the segment is in place and the running server has not
        # swapped its snapshot, whatever the manifest says.
        status = httpx.get(f"{server.url}/ingest/{job['job_id']}").json()
        assert (status["status"], status["stage"]) == ("running", "committing")
        assert NEW not in _state(server.url)[1]
        listed, segments = _on_disk(server.index_dir)
        assert segments == [NEW]
        assert (NEW in listed) == (point == "after-manifest")
        server.kill()
    finally:
        server.stop()
    restarted = Server(tmp_path, cache=serve_cache)
    try:
        info = restarted.wait_ready()
        papers, counts = _state(restarted.url)
        listed, segments = _on_disk(restarted.index_dir)
        manifest = json.loads((restarted.index_dir / "manifest.json").read_text())
        if point == "after-manifest":  # the commit point was passed: wholly in
            assert segments == [NEW] and counts[NEW] > 0 and NEW in listed
            assert info["chunks"] == before["n_chunks"] + counts[NEW]
            hits = httpx.post(restarted.url + "/search", json={"query": "phrases Skip-gram"})
            assert hits.json()["hits"][0]["arxiv_id"] == NEW
        else:  # not committed: wholly out, the orphan segment removed at start
            assert segments == [] and NEW not in counts and NEW not in listed
            assert info["chunks"] == before["n_chunks"]
        assert manifest["n_chunks"] == info["chunks"] == papers["n_chunks"]
        # Either way a second ingest brings the index to the same whole state.
        job = httpx.post(restarted.url + "/ingest", json={"arxiv_id": NEW}).json()

        def finished():
            st = httpx.get(f"{restarted.url}/ingest/{job['job_id']}").json()
            return st if st["status"] in ("done", "failed") else None

        st = wait_until(finished, 600, f"the second ingest of {NEW}", every=0.25)
        assert st["status"] == "done", st
        assert (st["added_chunks"] == 0) == (point == "after-manifest"), st
        _, counts2 = _state(restarted.url)
        assert counts2[NEW] > 0 and counts2[NEW] == counts.get(NEW, counts2[NEW])
        hits = httpx.post(restarted.url + "/search", json={"query": "phrases Skip-gram", "k": 1})
        assert hits.json()["hits"][0]["arxiv_id"] == NEW
    finally:
        restarted.stop()
