"""A real ``rag serve`` with query batching on: concurrent ``/search`` requests get exactly the
JSON each gets alone (latency aside), for the hybrid and the dense retriever (whose scores are the
raw cosines, the first to show a changed vector), and the server's log shows shared calls.

The server serves two small pinned papers with the real MiniLM query encoder, as the other
end-to-end tests do; ``rag -v`` makes the batcher log each shared call.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.serve_support import Server, serve_cache_dir

QUERIES = (
    "How does fastText represent sentences?",
    "hierarchical softmax",
    "How are word pair embeddings trained?",
    "What does pair2vec improve on SQuAD 2.0?",
    "How fast is training on a billion words?",
    "negative sampling objective over contexts",
    "text classification baseline accuracy",
    "relation between two words",
)
ROUNDS = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared_dir):
    tmp = tmp_path_factory.mktemp("serve-batching")
    env = {"RAG_QUERY_BATCH_MAX_BATCH": "16", "RAG_QUERY_BATCH_MAX_WAIT_MS": "2"}
    s = Server(tmp, env=env, cache=serve_cache_dir(tmp_path_factory), module=("rag.cli", "-v"))
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def _search(client: httpx.Client, body: dict) -> dict:
    r = client.post("/search", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    out.pop("latency_ms")
    return out


@pytest.mark.parametrize("retriever", ["hybrid", "dense"])
def test_concurrent_searches_return_exactly_what_each_returns_alone(server, retriever):
    bodies = [{"query": q, "k": 5, "retriever": retriever} for q in QUERIES]
    with httpx.Client(base_url=server.url, timeout=60) as c:
        alone = [_search(c, b) for b in bodies]
    assert all(a["hits"] for a in alone)
    start = threading.Barrier(len(bodies))

    def at_once(body: dict) -> dict:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            c.get("/health")  # connected before the barrier, so the requests land together
            start.wait(30)
            return _search(c, body)

    with ThreadPoolExecutor(len(bodies)) as pool:
        for _ in range(ROUNDS):
            together = list(pool.map(at_once, bodies))
            for a, t in zip(alone, together, strict=True):
                assert t == a, f"{a['query']!r}: batched result differs from the one alone"
    log = server.log.read_text()
    assert "query batching on" in log
    shared = [int(n) for n in re.findall(r"query batch: (\d+) texts", log)]
    assert shared and max(shared) >= 2, "no two concurrent queries shared an encoder call"
