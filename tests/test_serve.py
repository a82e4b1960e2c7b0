"""The service through FastAPI's TestClient: every endpoint and every bad input it refuses.

The lab is built over hand-made chunks of two pinned papers with a hashing embedder
(:mod:`tests.serve_support`), so these run in seconds; ingest goes through the real mirror, parser
and chunker. The real ``rag serve`` process is exercised in ``test_serve_e2e.py``.
"""

from __future__ import annotations

import ast
import json
import threading
import time

import pytest
from fastapi.testclient import TestClient

from rag.judge import Verdict, judge_claims
from rag.llm.base import Completion
from rag.serve.app import create_app
from rag.serve.config import ServeSettings, profile_settings
from rag.serve.guard import scrub
from rag.serve.index import MANIFEST, SEGMENTS, ServedIndex, read_manifest
from tests.serve_support import tiny_lab

OFFLINE = ServeSettings(allow_network=False, rate_limit_per_minute=0)


class WordJudge:
    """A claim judge for tests: supported when most of the claim's words are in the context."""

    name = "word-judge"
    fingerprint = "word-judge:most-words"

    def verdict(self, claim: str, context: str) -> Verdict:
        words = [w for w in claim.lower().split() if w.isalpha()]
        share = sum(w in context.lower() for w in words) / max(len(words), 1)
        return Verdict("supported" if share >= 0.5 else "not_found", share, f"share {share:.2f}")

    def judge_answer(self, answer: str, context: str):
        return judge_claims(self, answer, context)


class EchoModel:
    """A chat model that answers the rewrite prompt with a fixed standalone question."""

    name = "fake-rewriter"

    def __init__(self, reply: str) -> None:
        self.reply, self.calls = reply, 0

    def complete(self, messages, **kw) -> Completion:
        self.calls += 1
        return Completion(self.reply, self.name, "test", 10, 5, 0.0, 0.001, False)


@pytest.fixture()
def lab(tmp_cache, tmp_path):
    model = EchoModel("How is pair2vec trained?")
    lab = tiny_lab(tmp_path / "served", judge=WordJudge(), chat_model=lambda name: model)
    lab.fake_model = model
    return lab


@pytest.fixture()
def client(lab):
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        yield c


def _wait_job(client, job_id, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        r = client.get(f"/ingest/{job_id}")
        assert r.status_code == 200, r.text
        if r.json()["status"] in ("done", "failed"):
            return r.json()
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def _sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


# -- liveness, readiness ----------------------------------------------------------------------


def test_health_and_ready(client):
    assert client.get("/health").json() == {"status": "ok"}
    r = client.get("/ready")
    assert r.status_code == 200 and r.json() == {"ready": True, "papers": 2, "chunks": 6}


def test_ready_is_503_with_its_cause_until_loaded(lab):
    go = threading.Event()

    def loader(status):
        status("index loading")
        go.wait(10)
        return lab

    with TestClient(create_app(serve=OFFLINE, api_key="", loader=loader)) as c:
        assert c.get("/health").status_code == 200
        r = c.get("/ready")
        assert r.status_code == 503 and r.json() == {
            "error": "not ready", "detail": "index loading", "ready": False,
            "cause": "index loading",
        }  # fmt: skip
        assert c.post("/search", json={"query": "fastText"}).status_code == 503
        go.set()
        for _ in range(100):
            if c.get("/ready").status_code == 200:
                break
            time.sleep(0.05)
        assert c.get("/ready").status_code == 200


def test_profile_settings_are_the_reports_defaults():
    s = profile_settings("default")
    assert (s.retriever, s.k, s.context_order, s.context_token_budget, s.per_paper_cap) == (
        "hybrid", 5, "edges", 1200, 3,
    )  # fmt: skip
    assert (s.chunk_strategy, s.max_tokens, s.overlap_tokens, s.embedder) == (
        "fixed", 254, 32, "minilm",
    )  # fmt: skip
    # the rerank settings: the profile's value where it sets one, else notebook 04's default
    from rag.report import profiles

    nb04 = {p.stem: p for p in profiles.notebook_paths()}["04_retrieval"]
    declared = profiles.declared_parameters(nb04)
    resolved = profiles.resolve_parameters("default", "outputs/default")["04_retrieval"]
    for key in ("reranker", "rerank_pool", "hybrid_pool"):
        want = resolved.get(key, ast.literal_eval(declared[key]["default"]))
        assert getattr(s, key) == want, key
    assert profile_settings("smoke").paper_ids  # the smoke profile's handful


# -- /search ----------------------------------------------------------------------------------


def test_search_returns_ranked_hits_with_their_records(client):
    r = client.post("/search", json={"query": "how fast is fastText training", "k": 3})
    assert r.status_code == 200
    body = r.json()
    assert body["retriever"] == "hybrid" and len(body["hits"]) == 3
    top = body["hits"][0]
    assert top["arxiv_id"] == "1607.01759"
    assert top["title"] == "Bag of Tricks for Efficient Text Classification"
    assert set(top) == {"chunk_id", "arxiv_id", "title", "page", "section", "score", "text"}
    scores = [h["score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("name", ["dense", "bm25", "hybrid", "multi-query"])
def test_search_with_each_offline_retriever(client, name):
    r = client.post("/search", json={"query": "pair embeddings", "k": 2, "retriever": name})
    assert r.status_code == 200 and len(r.json()["hits"]) == 2


def test_search_per_paper_cap(client):
    r = client.post("/search", json={"query": "fastText", "k": 4, "per_paper_cap": 1})
    papers = [h["arxiv_id"] for h in r.json()["hits"]]
    assert len(papers) == len(set(papers)) == 2


@pytest.mark.parametrize(
    "body, field",
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 10**6}, "k"),
        ({"query": "x", "retriever": "splade"}, "retriever"),
        ({"query": "x", "surprise": 1}, "surprise"),
        ({"k": 3}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "x", "k": "5"}, "k"),
        ({"query": "x", "k": 5.5}, "k"),  # 5.0 is an integer (JSON Schema): taken
        ({"query": 5}, "query"),
    ],
)
def test_search_bad_input_is_422_naming_the_field(client, body, field):
    r = client.post("/search", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid request"
    assert r.json()["detail"].startswith(f"{field}:")


def test_malformed_json_is_400(client):
    r = client.post("/search", content=b'{"query": ', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "malformed JSON"


def test_oversized_body_is_413(client):
    big = {"query": "x" * (1100 * 1024)}  # over the default 1 MiB
    r = client.post("/search", json=big)
    assert r.status_code == 413 and r.json()["error"] == "request body too large"

    def chunks():  # no Content-Length: the limit is enforced on the bytes read
        for _ in range(1100):
            yield b"x" * 1024

    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


# -- /ask -------------------------------------------------------------------------------------


def test_ask_extractive_answers_with_citations(client):
    r = client.post("/ask", json={"question": "How are sentences represented in fastText?"})
    assert r.status_code == 200
    body = r.json()
    assert not body["refused"] and "[" in body["answer"]
    cited = [c for c in body["citations"] if c["cited"]]
    assert cited and all(c["quote"] and c["arxiv_id"] and c["page"] for c in cited)
    assert [c["n"] for c in body["citations"]] == list(range(1, len(body["citations"]) + 1))
    assert {"retrieval", "context", "answer", "total"} <= set(body["latency_ms"])
    assert body["tokens_in"] == 0 and body["cost_usd"] == 0.0


def test_ask_refuses_when_the_sources_lack_the_answer(client):
    r = client.post("/ask", json={"question": "What is the boiling point of liquid helium?"})
    assert r.status_code == 200 and r.json()["refused"]


class ContextFreeJudge(WordJudge):
    """Judges with an empty context: no claim word is found, so every claim is "not_found"."""

    name = "context-free-judge"

    def verdict(self, claim: str, context: str) -> Verdict:
        return super().verdict(claim, "")


@pytest.mark.parametrize(
    "judge, label, score", [(WordJudge(), "supported", 1.0), (ContextFreeJudge(), "not_found", 0.0)]
)
def test_ask_with_judge_returns_the_judges_verdict_per_claim(
    tmp_cache, tmp_path, judge, label, score
):
    lab = tiny_lab(tmp_path / "served", judge=judge)
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        body = c.post("/ask", json={"question": "How is pair2vec trained?", "judge": True}).json()
    j = body["judgement"]
    assert j["status"] == "scored" and j["judge"] == judge.name
    # The extractive answer copies its sentences from the context, so a judge that reads the
    # context finds every word (share 1.0) and one that ignores it finds none.
    assert j["claims"] and all(c["claim"] in body["answer"] for c in j["claims"])
    assert [(c["label"], c["score"]) for c in j["claims"]] == [(label, score)] * len(j["claims"])
    assert all(c["reason"] == f"share {score:.2f}" for c in j["claims"])


@pytest.mark.parametrize(
    "body, field",
    [
        ({"question": "x", "answerer": "gpt-99"}, "answerer"),
        ({"question": "x", "retriever": "nope"}, "retriever"),
        ({"question": "", "answerer": "extractive"}, "question"),
        ({"question": "x", "k": 51}, "k"),
        ({"question": "x", "judge": "true"}, "judge"),
        ({"question": "x", "stream": 1}, "stream"),
    ],
)
def test_ask_bad_input_is_422_naming_the_field(client, body, field):
    r = client.post("/ask", json=body)
    assert r.status_code == 422 and r.json()["detail"].startswith(f"{field}:"), r.text


def test_ask_with_a_model_that_has_no_key_is_422(tmp_cache, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lab = tiny_lab(tmp_path / "served")  # the real model factory
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        r = c.post("/ask", json={"question": "fastText?", "answerer": "gpt-4o-mini"})
    assert r.status_code == 422
    assert r.json()["detail"].startswith("answerer:") and "OPENAI_API_KEY" in r.json()["detail"]


def test_ask_stream_sends_retrieval_tokens_citations_done(client):
    q = {"question": "How are sentences represented in fastText?", "stream": True}
    r = client.post("/ask", json=q)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = _sse(r.text)
    kinds = [k for k, _ in events]
    assert kinds[0] == "retrieval" and kinds[-2:] == ["citations", "done"]
    assert set(kinds[1:-2]) == {"token"}
    streamed = "".join(d["text"] for k, d in events if k == "token")
    done = events[-1][1]
    assert streamed == done["answer"]
    assert [s["chunk_id"] for s in events[0][1]["sources"]] == [
        c["chunk_id"] for c in done["citations"]
    ]


def test_ask_stream_with_bad_answerer_fails_before_streaming(client):
    r = client.post("/ask", json={"question": "x", "stream": True, "answerer": "nope"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/json"


# -- /chat ------------------------------------------------------------------------------------

HISTORY = [
    {"role": "user", "content": "What does pair2vec learn?"},
    {"role": "assistant", "content": "Word pair embeddings [1]."},
]


def test_chat_rewrites_a_follow_up_with_the_rule_rewriter(client):
    msgs = [*HISTORY, {"role": "user", "content": "How is this model trained?"}]
    body = client.post("/chat", json={"messages": msgs}).json()
    assert body["rephrased_query"] == "How is pair2vec trained?"
    assert body["rewritten"] and body["rewriter"] == "rules"
    assert any(c["arxiv_id"] == "1810.08699" for c in body["citations"] if c["cited"])


@pytest.mark.parametrize(
    "messages, bypass, reason",
    [
        ([{"role": "user", "content": "How is this model trained?"}], False, "no history"),
        ([*HISTORY, {"role": "user", "content": "How is this model trained?"}], True,
         "bypass_rewrite"),
        ([*HISTORY, {"role": "user", "content": "How fast is fastText?"}], False,
         "self-contained"),
    ],
)  # fmt: skip
def test_chat_skips_rewriting(client, messages, bypass, reason):
    body = client.post("/chat", json={"messages": messages, "bypass_rewrite": bypass}).json()
    assert body["rephrased_query"] == messages[-1]["content"]
    assert not body["rewritten"] and body["rewrite_reason"] == reason


def test_chat_uses_the_llm_rewriter_when_a_model_is_chosen(client, lab):
    msgs = [*HISTORY, {"role": "user", "content": "How is it trained?"}]
    body = client.post("/chat", json={"messages": msgs, "rewrite_model": "smollm2-135m"}).json()
    assert body["rephrased_query"] == "How is pair2vec trained?"
    assert body["rewriter"].startswith("llm[fake-rewriter") and lab.fake_model.calls == 1


def test_chat_bad_input(client):
    msgs = [*HISTORY]  # ends with the assistant
    r = client.post("/chat", json={"messages": msgs})
    assert r.status_code == 422 and r.json()["detail"].startswith("messages:")
    r = client.post("/chat", json={"messages": []})
    assert r.status_code == 422 and r.json()["detail"].startswith("messages:")
    r = client.post("/chat", json={"messages": [{"role": "system", "content": "x"}]})
    assert r.status_code == 422 and r.json()["detail"].startswith("messages.0.role:")


# -- API key, rate limit, scrubbing -----------------------------------------------------------


def test_api_key_required_when_set(lab):
    app = create_app(lab, serve=OFFLINE, api_key="s3cret-key")
    with TestClient(app) as c:
        assert c.get("/health").status_code == 200
        r = c.post("/search", json={"query": "fastText"})
        assert r.status_code == 401 and r.json()["detail"] == "missing X-API-Key header"
        r = c.post("/search", json={"query": "fastText"}, headers={"X-API-Key": "wrong"})
        assert r.status_code == 401 and r.json()["detail"] == "wrong API key"
        assert c.get("/papers", headers={"X-API-Key": "wrong"}).status_code == 401
        ok = c.post("/search", json={"query": "fastText"}, headers={"X-API-Key": "s3cret-key"})
        assert ok.status_code == 200 and "s3cret-key" not in ok.text


def test_rate_limit_is_429_per_client(lab):
    serve = ServeSettings(allow_network=False, rate_limit_per_minute=6, rate_burst=2)
    with TestClient(create_app(lab, serve=serve, api_key="")) as c:
        codes = [c.get("/papers").status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        r = c.get("/papers")
        assert r.json()["error"] == "rate limited" and int(r.headers["retry-after"]) >= 1
        assert c.get("/health").status_code == 200  # liveness is never limited


def test_scrub_removes_keys_and_absolute_paths():
    from rag import paths

    text = f"failed at {paths.project_root()}/.cache/x.pdf and /home/someone/secret.txt key=abc123"
    out = scrub(text, ("abc123",))
    assert ".cache/x.pdf" in out and "<path>" in out and "***" in out
    assert str(paths.project_root()) not in out and "/home/someone" not in out


# -- /ingest, /papers -------------------------------------------------------------------------


def test_ingest_a_pinned_paper_from_the_mirror_then_again(client, shared_dir):
    r = client.post("/ingest", json={"arxiv_id": "1310.4546"})
    assert r.status_code == 202
    job = _wait_job(client, r.json()["job_id"])
    assert job["status"] == "done", job
    assert job["added_chunks"] > 0
    papers = client.get("/papers").json()
    assert papers["n_papers"] == 3
    assert papers["n_chunks"] == 6 + job["added_chunks"]
    new = [p for p in papers["papers"] if p["arxiv_id"] == "1310.4546"][0]
    assert new["source"] == "arxiv" and new["title"].startswith("Distributed Representations")
    hits = client.post("/search", json={"query": "Skip-gram phrases subsampling", "k": 3}).json()
    assert hits["hits"][0]["arxiv_id"] == "1310.4546"
    again = _wait_job(
        client, client.post("/ingest", json={"arxiv_id": "1310.4546"}).json()["job_id"]
    )
    assert again["status"] == "done" and again["added_chunks"] == 0
    assert client.get("/papers").json()["n_chunks"] == papers["n_chunks"]


def test_ingest_an_id_not_in_the_mirror_fails_clearly_and_adds_nothing(client, lab):
    before = client.get("/papers").json()
    r = client.post("/ingest", json={"arxiv_id": "2501.99999"})
    assert r.status_code == 202
    job = _wait_job(client, r.json()["job_id"])
    assert job["status"] == "failed"
    assert "2501.99999" in job["detail"] and "not pinned" in job["detail"]
    assert client.get("/papers").json() == before
    assert not list((lab.index.root / SEGMENTS).iterdir())
    assert {p.paper_id for p in read_manifest(lab.index.root)} == {"1607.01759", "1810.08699"}


def test_ingest_bad_requests(client):
    r = client.post("/ingest", json={"arxiv_id": "not an id"})
    assert r.status_code == 422 and r.json()["detail"].startswith("arxiv_id:")
    r = client.post("/ingest", json={})
    assert r.status_code == 422 and r.json()["detail"].startswith("arxiv_id:")
    r = client.post("/ingest", files={"file": ("x.pdf", b"hello", "application/pdf")})
    assert r.status_code == 202  # the document cannot state "a PDF": the job refuses it
    job = _wait_job(client, r.json()["job_id"])
    assert job["status"] == "failed" and "not a PDF" in job["detail"]
    r = client.get("/ingest/doesnotexist")
    assert r.status_code == 404 and r.json()["error"] == "unknown job"


def test_ingest_a_pdf_upload(client, shared_dir):
    pdf = (shared_dir / "corpus" / "pdfs" / "1607.01759.pdf").read_bytes()
    r = client.post("/ingest", files={"file": ("a.pdf", pdf, "application/pdf")},
                    data={"title": "Uploaded fastText"})  # fmt: skip
    job = _wait_job(client, r.json()["job_id"])
    assert job["status"] == "done" and job["paper_id"].startswith("upload-")
    titles = {p["arxiv_id"]: p["title"] for p in client.get("/papers").json()["papers"]}
    assert titles[job["paper_id"]] == "Uploaded fastText"


# -- the served index on disk -----------------------------------------------------------------


def _parsed(shared_dir, arxiv_id):
    from rag.corpus.parse import ParseSettings, load_parsed

    pdf = shared_dir / "corpus" / "pdfs" / f"{arxiv_id}.pdf"
    p = load_parsed(pdf, "test", ParseSettings())
    p.paper_id = arxiv_id
    return p


def test_a_crash_before_the_manifest_commit_leaves_the_paper_out(lab, shared_dir, monkeypatch):
    idx = lab.index
    parsed = _parsed(shared_dir, "1310.4546")

    def crash(self, papers):
        raise KeyboardInterrupt("simulated crash after the segment was written")

    monkeypatch.setattr(ServedIndex, "_write_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        idx.add_paper(parsed, "word2vec phrases", "arxiv")
    monkeypatch.undo()
    assert [d.name for d in (idx.root / SEGMENTS).iterdir()] == ["1310.4546"]  # orphan on disk
    reopened = ServedIndex(idx.root, idx.base, dict(idx.snapshot.titles), idx.chunking)
    assert "1310.4546" not in reopened.snapshot.paper_ids()
    assert reopened.snapshot.n_chunks == 6
    assert not list((idx.root / SEGMENTS).iterdir())  # the orphan is gone


def test_a_committed_paper_survives_a_restart_whole(lab, shared_dir):
    idx = lab.index
    n = idx.add_paper(_parsed(shared_dir, "1310.4546"), "word2vec phrases", "arxiv")
    assert n > 0 and idx.add_paper(_parsed(shared_dir, "1310.4546"), "again", "arxiv") == 0
    reopened = ServedIndex(idx.root, idx.base, {}, idx.chunking)
    assert reopened.snapshot.n_chunks == 6 + n
    assert len(reopened.snapshot.dense.ids) == len(reopened.snapshot.bm25.ids) == 6 + n
    recorded = json.loads((idx.root / MANIFEST).read_text())
    assert recorded["n_chunks"] == 6 + n and len(recorded["papers"]) == 3


# -- the command line -------------------------------------------------------------------------


def test_cli_search_ask_chat(lab, monkeypatch, capsys):
    import io

    from rag import cli
    from rag.serve import commands

    monkeypatch.setattr(commands, "open_lab", lambda args, **kw: lab)
    assert cli.main(["search", "hierarchical softmax", "-k", "2", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert len(hits) == 2 and hits[0]["arxiv_id"] == "1607.01759"
    assert cli.main(["search", "hierarchical softmax", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hybrid: 2 hits") and "(arXiv:1607.01759, p. " in out
    assert cli.main(["ask", "How is pair2vec trained?", "--judge"]) == 0
    out = capsys.readouterr().out
    assert "[1]" in out and "Sources:" in out and "Judge (word-judge): scored" in out
    assert cli.main(["ask", "x", "--answerer", "nope"]) == 2  # a clear error, no traceback
    assert "answerer" in capsys.readouterr().err
    turns = "What does pair2vec learn?\nHow is this model trained?\n\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(turns))
    assert cli.main(["chat"]) == 0
    out = capsys.readouterr().out
    assert "» What does pair2vec learn?   (not rewritten: no history)" in out
    assert "» How is pair2vec trained?   (rewritten by rules)" in out


def test_chat_gives_the_same_turn_through_every_door(lab, monkeypatch, capsys):
    """``POST /chat``, ``Desk.chat``, ``rag.Lab``'s chat and ``rag chat`` answer one conversation
    with the same rewrite fields and the same answer."""
    import io

    from rag import Lab, cli
    from rag.serve import commands
    from rag.serve.desk import Desk

    follow_up = "How is this model trained?"
    msgs = [*HISTORY, {"role": "user", "content": follow_up}]
    opts = {"k": 3, "judge": True}
    desk = Desk(lab).chat(msgs, **opts)
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        http = c.post("/chat", json={"messages": msgs, **opts}).json()
    chat = Lab(engine=lab).chat(**opts)
    chat.messages = [dict(x) for x in HISTORY]
    front = chat.ask(follow_up).to_dict()
    rewrite = ("rephrased_query", "rewritten", "rewriter", "rewrite_reason")
    assert {f: desk[f] for f in rewrite} == {
        "rephrased_query": "How is pair2vec trained?", "rewritten": True, "rewriter": "rules",
        "rewrite_reason": desk["rewrite_reason"],
    }  # fmt: skip
    for door in (http, front):
        assert {f: door[f] for f in (*rewrite, "answer", "refused")} == {
            f: desk[f] for f in (*rewrite, "answer", "refused")
        }
        assert [(x["n"], x["chunk_id"], x["cited"]) for x in door["citations"]] == [
            (x["n"], x["chunk_id"], x["cited"]) for x in desk["citations"]
        ]
        assert door["judgement"]["claims"] == desk["judgement"]["claims"]
    monkeypatch.setattr(commands, "open_lab", lambda args, **kw: lab)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{HISTORY[0]['content']}\n{follow_up}\n\n"))
    assert cli.main(["chat", "-k", "3", "--judge"]) == 0
    out = capsys.readouterr().out
    head = f"» {desk['rephrased_query']}   (rewritten by {desk['rewriter']})"
    assert f"{head}\n{desk['answer']}\n" in out


def test_ingest_a_pinned_paper_missing_from_the_mirror_fails_clearly(lab, tmp_path):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    lab.settings = lab.settings.model_copy(update={"pdf_mirror": str(empty)})
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        job = _wait_job(c, c.post("/ingest", json={"arxiv_id": "1310.4546"}).json()["job_id"])
        assert job["status"] == "failed"
        assert "neither the PDF cache nor the mirror" in job["detail"]
        assert str(tmp_path) not in job["detail"]
        assert c.get("/papers").json()["n_papers"] == 2
    assert not list((lab.index.root / SEGMENTS).iterdir())


def test_token_buckets_refill_and_forget_idle_clients():
    from rag.serve.guard import TokenBuckets

    b = TokenBuckets(per_minute=60, burst=1, max_clients=2)
    assert b.take("a") == 0.0 and 0.0 < b.take("a") <= 1.0  # 1 token per second
    b._state = {k: (1.0, 0.0) for k in "abc"}  # three clients, idle since t=0
    assert b.take("d") == 0.0 and set(b._state) == {"d"}


def test_the_served_judge_is_the_pinned_one_even_over_a_bf16_index(
    tmp_cache, tmp_path, shared_dir, monkeypatch
):
    """The index may serve MiniLM with bf16 passages; the judge still gets the fp32 features it
    was fitted on, so the pinned judge loads and nothing is refitted."""
    from rag.index.build import index_chunks
    from rag.index.embed import minilm
    from rag.judge import offline
    from rag.serve.config import LabSettings
    from rag.serve.engine import Engine
    from rag.text.chunk import chunk_settings
    from tests.serve_support import TEXTS, TITLES, tiny_chunks

    def no_fit(*a, **kw):
        raise AssertionError("the service refitted the judge instead of loading the pinned one")

    monkeypatch.setattr(offline, "fit_judge", no_fit)
    bf16 = minilm(passage_backend="torch-bf16")
    base = index_chunks(tiny_chunks(), "tiny-bf16", embedder=bf16, show_progress=False)
    settings = LabSettings(paper_ids=tuple(TEXTS))
    chunking = chunk_settings(settings.chunking())
    served = ServedIndex(tmp_path / "served", base, dict(TITLES), chunking)
    lab = Engine(settings, served)
    assert "passages=torch-autocast-bf16" in lab.index.embedder.fingerprint
    judge = lab.judge()
    assert judge.fitted.meta["pinned"] == "data/judge/offline-v2.json"
    assert judge.embedder.fingerprint == judge.pin_inputs["embedder"]
    assert "bf16" not in judge.embedder.fingerprint
    with TestClient(create_app(lab, serve=OFFLINE, api_key="")) as c:
        body = c.post("/ask", json={"question": "How is pair2vec trained?", "judge": True}).json()
    assert body["judgement"]["judge"] == judge.name and body["judgement"]["claims"]
