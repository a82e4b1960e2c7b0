"""A real ``rag serve`` on 127.0.0.1 under concurrent and hostile use.

Reads racing an ingest see the index before or after the swap, never a mix; two ingests of one
paper at once add one chunk set; two clients are rate limited separately (each connects from its
own loopback address, 127.0.0.x); an upload over the limit is 413; the API key guards every route
of the app but the public ones; clients leaving mid-stream leave the server healthy. Every test is
bounded (request counts and polling deadlines); the servers serve two small pinned papers.
"""

from __future__ import annotations

import json
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Mount

from rag.serve import models as m
from rag.serve.app import create_app
from rag.serve.config import ServeSettings
from rag.serve.guard import PUBLIC, PUBLIC_PREFIX
from tests.serve_support import Server, serve_cache_dir, wait_until

KEY = "live-" + secrets.token_hex(12)
AUTH = {"X-API-Key": KEY}
NEW = "1310.4546"  # added while readers run
TWICE = "1905.02851"  # ingested twice at once
#: Queries over the served papers, and one the new paper answers (its hits change on the swap).
QUERIES = ("hierarchical softmax", "named entity recognition", "Skip-gram phrases subsampling")
JOB_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def serve_cache(tmp_path_factory, shared_dir):
    return serve_cache_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def server(tmp_path_factory, serve_cache):
    s = Server(tmp_path_factory.mktemp("serve-live"), cache=serve_cache, env={"RAG_API_KEY": KEY})
    try:
        s.wait_ready(headers=AUTH)
        yield s
    finally:
        s.stop()


def _wait_job(c: httpx.Client, job_id: str) -> dict:
    def finished():
        st = c.get(f"/ingest/{job_id}").json()
        return st if st["status"] in ("done", "failed") else None

    return wait_until(finished, JOB_TIMEOUT_S, f"ingest job {job_id}", every=0.25)


def _search(c: httpx.Client, q: str) -> tuple:
    r = c.post("/search", json={"query": q, "k": 5})
    assert r.status_code == 200, r.text
    return tuple((h["chunk_id"], h["score"]) for h in r.json()["hits"])


def _ask(c: httpx.Client, q: str) -> tuple:
    r = c.post("/ask", json={"question": q})
    assert r.status_code == 200, r.text
    body = r.json()
    return body["answer"], tuple(x["chunk_id"] for x in body["citations"])


def _papers(c: httpx.Client) -> tuple[int, dict[str, int]]:
    body = c.get("/papers").json()
    counts = {p["arxiv_id"]: p["n_chunks"] for p in body["papers"]}
    assert sum(counts.values()) == body["n_chunks"] and len(counts) == body["n_papers"]
    return body["n_chunks"], counts


def _view(c: httpx.Client) -> dict[tuple[str, str], tuple]:
    return {
        **{("search", q): _search(c, q) for q in QUERIES},
        **{("ask", q): _ask(c, q) for q in QUERIES},
    }


def test_reads_racing_an_ingest_see_the_index_before_or_after_never_a_mix(server):
    with server.client(headers=AUTH, timeout=120) as c:
        before, (n_before, _) = _view(c), _papers(c)
        stop = threading.Event()
        seen: list[tuple[tuple[str, str], tuple]] = []
        papers_seen: list[int] = []
        failures: list[str] = []
        lock = threading.Lock()

        def reader(i: int) -> None:
            with server.client(headers=AUTH, timeout=120) as rc:
                n = i
                while not stop.is_set():
                    kind, q = ("search", "ask")[n % 2], QUERIES[n % len(QUERIES)]
                    n += 1
                    try:
                        got = _search(rc, q) if kind == "search" else _ask(rc, q)
                        total, _ = _papers(rc)
                    except (AssertionError, httpx.HTTPError) as e:
                        with lock:
                            failures.append(f"{kind} {q!r}: {e!r}")
                        continue
                    with lock:
                        seen.append(((kind, q), got))
                        papers_seen.append(total)

        with ThreadPoolExecutor(4) as pool:
            for i in range(4):
                pool.submit(reader, i)

            def every_read_since(start: int) -> bool:
                with lock:
                    return {k for k, _ in seen[start:]} == set(before)

            wait_until(lambda: every_read_since(0), 300, "each read before the ingest")
            job = c.post("/ingest", json={"arxiv_id": NEW}).json()
            done = _wait_job(c, job["job_id"])
            swapped_at = len(seen)
            wait_until(lambda: every_read_since(swapped_at), 300, "each read after the ingest")
            stop.set()
        assert done["status"] == "done" and done["added_chunks"] > 0, done
        after, (n_after, counts) = _view(c), _papers(c)

    assert not failures, failures[:5]
    assert n_after == n_before + done["added_chunks"] == n_before + counts[NEW]
    assert set(papers_seen) <= {n_before, n_after}
    changed = [k for k in before if before[k] != after[k]]
    assert ("search", "Skip-gram phrases subsampling") in changed  # the check can tell them apart
    torn = [(k, got) for k, got in seen if got not in (before[k], after[k])]
    assert not torn, torn[:3]
    for k in changed:
        views = {("before" if got == before[k] else "after") for key, got in seen if key == k}
        assert views == {"before", "after"}, (k, views)


def test_two_ingests_of_one_paper_at_once_add_one_chunk_set(server, shared_dir):
    pdf = (shared_dir / "corpus" / "pdfs" / f"{TWICE}.pdf").read_bytes()
    with server.client(headers=AUTH, timeout=120) as c:
        n_before, _ = _papers(c)

        def by_id(_):
            return c.post("/ingest", json={"arxiv_id": TWICE})

        def by_upload(_):
            return c.post("/ingest", files={"file": ("p.pdf", pdf, "application/pdf")})

        with ThreadPoolExecutor(4) as pool:
            posted = [pool.submit(f, i) for f in (by_id, by_upload) for i in range(2)]
            responses = [f.result() for f in posted]
        assert [r.status_code for r in responses] == [202] * 4, [r.text for r in responses]
        jobs = [_wait_job(c, r.json()["job_id"]) for r in responses]
        n_after, counts = _papers(c)
    assert all(j["status"] == "done" for j in jobs), jobs
    for pair in (jobs[:2], jobs[2:]):
        assert pair[0]["paper_id"] == pair[1]["paper_id"]
        assert sorted(j["added_chunks"] == 0 for j in pair) == [False, True], pair
    upload_id = jobs[2]["paper_id"]
    assert upload_id.startswith("upload-") and counts[TWICE] == counts[upload_id] > 0
    assert n_after == n_before + counts[TWICE] + counts[upload_id]
    manifest = json.loads((server.index_dir / "manifest.json").read_text())
    ids = [p["paper_id"] for p in manifest["papers"]]
    assert ids.count(TWICE) == ids.count(upload_id) == 1
    segments = sorted(d.name for d in (server.index_dir / "segments").iterdir())
    assert segments.count(TWICE) == segments.count(upload_id) == 1
    assert manifest["n_chunks"] == n_after


def test_an_upload_over_the_limit_is_413_and_changes_nothing(server):
    limit = ServeSettings().max_upload_bytes
    big = b"%PDF-1.4\n" + b"0" * limit
    with server.client(headers=AUTH, timeout=120) as c:
        n_before, _ = _papers(c)
        r = c.post("/ingest", files={"file": ("big.pdf", big, "application/pdf")})
        assert r.status_code == 413, r.text
        assert m.ErrorResponse.model_validate(r.json()).error == "request body too large"
        assert c.get("/ready").status_code == 200 and _papers(c)[0] == n_before


def _route_requests(app) -> list[tuple[str, str]]:
    """(method, url) of every route of the app, FastAPI's own (docs, OpenAPI) and mounts too."""
    out = []
    for r in app.fastapi.routes:
        if isinstance(r, Mount):
            out.append(("GET", r.path + "/style.css"))
            continue
        for method in sorted(getattr(r, "methods", None) or {"GET"}):
            if method != "HEAD":
                out.append((method, r.path.replace("{job_id}", "0123456789abcdef")))
    return out


def test_the_api_key_guards_every_route_but_the_public_ones(server):
    app = create_app(serve=ServeSettings(), api_key=KEY, loader=lambda status: None)
    requests = _route_requests(app)
    api = {(meth, r.path) for r in app.fastapi.routes if isinstance(r, APIRoute)
           for meth in r.methods}  # fmt: skip
    assert len(api) >= 8 and len(requests) > len(api)  # the app's own routes are in the list
    protected = 0
    with server.client(timeout=60) as c:
        for method, url in requests:
            public = url in PUBLIC or url.startswith(PUBLIC_PREFIX)
            body = {"json": {}} if method == "POST" else {}
            none = c.request(method, url, **body)
            wrong = c.request(method, url, headers={"X-API-Key": "not-" + KEY}, **body)
            right = c.request(method, url, headers=AUTH, **body)
            assert right.status_code != 401, (method, url)
            if public:
                assert none.status_code == wrong.status_code == 200, (method, url)
            else:
                protected += 1
                assert none.status_code == wrong.status_code == 401, (method, url, none.text)
                assert none.json() == {
                    "error": "unauthorized",
                    "detail": "missing X-API-Key header",
                }
                assert wrong.json() == {"error": "unauthorized", "detail": "wrong API key"}
    assert protected >= len(api)


def test_clients_leaving_mid_stream_leave_the_server_healthy(server):
    q = {"question": "How is fastText trained?", "stream": True}
    for _ in range(5):
        with server.client(headers=AUTH, timeout=300) as c:
            # judged: the server is still judging claims when the client leaves
            with c.stream("POST", "/ask", json={**q, "judge": True}) as r:
                assert r.status_code == 200
                assert next(r.iter_lines()) == "event: retrieval"
            # leaving both blocks closes the connection with the stream unread
    with server.client(headers=AUTH, timeout=120) as c:
        with c.stream("POST", "/ask", json=q) as r:
            lines = [line for line in r.iter_lines() if line.startswith("event: ")]
        assert lines[0] == "event: retrieval" and lines[-2:] == ["event: citations", "event: done"]
        assert c.get("/ready").status_code == 200
    assert server.proc.poll() is None
    assert "Traceback" not in server.log.read_text()


def test_two_clients_are_rate_limited_separately(tmp_path, serve_cache):
    """One shared key, two source addresses: each has its own bucket of 3; a third client
    cycling wrong keys is limited too (the limit comes before the key check)."""
    server = Server(tmp_path, "--rate-burst", "3", cache=serve_cache, env={"RAG_API_KEY": KEY},
                    rate_limit=1)  # fmt: skip
    try:
        server.wait_ready(headers=AUTH, spread=True)
        with (
            server.client("127.0.0.2", headers=AUTH) as a,
            server.client("127.0.0.3", headers=AUTH) as b,
            server.client("127.0.0.4") as guesser,
        ):
            assert [a.get("/papers").status_code for _ in range(3)] == [200] * 3
            limited = a.get("/papers")
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
            assert m.ErrorResponse.model_validate(limited.json()).error == "rate limited"
            assert [b.get("/papers").status_code for _ in range(3)] == [200] * 3
            assert b.get("/papers").status_code == 429
            assert a.get("/papers").status_code == 429
            codes = [guesser.get("/papers", headers={"X-API-Key": secrets.token_hex(8)})
                     .status_code for _ in range(4)]  # fmt: skip
            assert codes == [401, 401, 401, 429]
            assert a.get("/health").status_code == 200  # liveness is never limited
    finally:
        server.stop()
