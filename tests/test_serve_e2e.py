"""A real ``rag serve`` process on 127.0.0.1: readiness, SSE parsed event by event, and a crash.

The server serves two small pinned papers (from the mirror, embedded with the real MiniLM into a
cache in a tmp folder), so a first start costs a few seconds of embedding. The crash test kills
the server with SIGKILL while it ingests a third paper, restarts it on the same served index and
checks that the paper is wholly in or wholly out: manifest, segments, dense and BM25 agree.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")

PAPERS = ["1607.01759", "1810.08699"]
NEW = "1310.4546"
READY_TIMEOUT_S = 420


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``rag serve`` subprocess (its own process group, killed by its pid only)."""

    def __init__(self, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        cmd = [sys.executable, "-m", "rag.cli", "serve", "--port", str(self.port),
               "--papers", *PAPERS, "--index-dir", str(tmp / "served"), "--offline",
               "--rate-limit", "0", *extra]  # fmt: skip
        full_env = {**os.environ, "RAG_CACHE_DIR": str(tmp / "cache"), **(env or {})}
        self.proc = subprocess.Popen(
            cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=full_env,
            start_new_session=True,
        )  # fmt: skip
        self.causes: list[str] = []

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict:
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise AssertionError(f"rag serve exited: {self.log.read_text()[-3000:]}")
            try:
                r = httpx.get(self.url + "/ready", timeout=5)
            except httpx.TransportError:
                time.sleep(0.3)
                continue
            if r.status_code == 200:
                return r.json()
            assert r.status_code == 503, r.text
            self.causes.append(r.json()["cause"])
            time.sleep(0.3)
        raise AssertionError(f"not ready in {timeout} s: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def tmp(tmp_path_factory, shared_dir):
    return tmp_path_factory.mktemp("serve-e2e")


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


def test_rag_serve_end_to_end(tmp):
    server = Server(tmp)
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


def test_sigkill_during_ingest_leaves_the_paper_wholly_in_or_out(tmp):
    server = Server(tmp)
    try:
        server.wait_ready()
        before, _ = _state(server.url)
        job = httpx.post(server.url + "/ingest", json={"arxiv_id": NEW}).json()
        stage = "queued"
        for _ in range(2000):
            stage = httpx.get(f"{server.url}/ingest/{job['job_id']}").json()["stage"]
            if stage != "queued":
                break
            time.sleep(0.005)
        server.kill()
    finally:
        server.stop()
    served = tmp / "served"
    restarted = Server(tmp)
    try:
        info = restarted.wait_ready()
        papers, counts = _state(restarted.url)
        manifest = json.loads((served / "manifest.json").read_text())
        segments = sorted(d.name for d in (served / "segments").iterdir())
        if NEW in counts:  # wholly in
            assert segments == [NEW] and counts[NEW] > 0
            assert info["chunks"] == before["n_chunks"] + counts[NEW]
        else:  # wholly out
            assert segments == []
            assert info["chunks"] == before["n_chunks"]
        assert manifest["n_chunks"] == info["chunks"] == papers["n_chunks"], stage
        # Either way a second ingest brings the index to the same whole state.
        job = httpx.post(restarted.url + "/ingest", json={"arxiv_id": NEW}).json()
        for _ in range(1200):
            st = httpx.get(f"{restarted.url}/ingest/{job['job_id']}").json()
            if st["status"] in ("done", "failed"):
                break
            time.sleep(0.25)
        assert st["status"] == "done", st
        _, counts2 = _state(restarted.url)
        assert counts2[NEW] > 0 and (NEW not in counts or counts2[NEW] == counts[NEW])
        hits = httpx.post(restarted.url + "/search", json={"query": "phrases Skip-gram", "k": 1})
        assert hits.json()["hits"][0]["arxiv_id"] == NEW
    finally:
        restarted.stop()
