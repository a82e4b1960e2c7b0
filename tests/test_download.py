"""The polite arXiv client against a real HTTP server on 127.0.0.1 that misbehaves on demand."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
import requests

from rag.corpus.arxiv_client import (
    ArxivClient,
    ArxivUnreachable,
    ClientSettings,
    RateLimiter,
    looks_like_pdf,
    parse_retry_after,
)
from rag.corpus.manifest import Paper
from rag.errors import DownloadError
from tests.fakearxiv import Entry, FakeArxiv, closed_port, make_pdf

PAPER = Paper(arxiv_id="2401.00001", version="v2", title="T", primary_category="cs.IR")
KEY = "2401.00001v2"
PDF = make_pdf("download me", pages=2)


@pytest.fixture()
def session():
    with requests.Session() as s:
        s.trust_env = False  # never route 127.0.0.1 through a proxy from the environment
        yield s


@pytest.fixture()
def fake():
    with FakeArxiv(pdfs={KEY: PDF}) as f:
        yield f


def _client(fake, session, sleeps=None, **kw):
    opts = dict(
        api_url=fake.api_url,
        pdf_base_url=fake.pdf_base_url,
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        read_timeout_s=2.0,
        max_attempts=4,
    )
    opts.update(kw)
    extra = {"sleep": sleeps.append} if sleeps is not None else {}
    return ArxivClient(ClientSettings(**opts), session=session, **extra)


def _leftovers(d):
    return sorted(p.name for p in d.iterdir())


def test_clean_download_is_verified_and_atomic(fake, session, tmp_path):
    got = _client(fake, session).download(PAPER, tmp_path / PAPER.filename)
    assert got.sha256 == hashlib.sha256(PDF).hexdigest()
    assert (got.bytes, got.attempts) == (len(PDF), 1)
    assert got.url.endswith("/pdf/2401.00001v2")  # the versioned URL, never the latest
    assert (tmp_path / PAPER.filename).read_bytes() == PDF
    assert _leftovers(tmp_path) == [PAPER.filename]


def test_backoff_doubles_from_the_initial_wait_and_is_capped(fake, session, tmp_path):
    fake.plans[KEY] = ["503", "503", "503"]
    sleeps: list[float] = []
    got = _client(fake, session, sleeps, backoff_initial_s=0.1, backoff_max_s=0.3, max_attempts=5)
    result = got.download(PAPER, tmp_path / PAPER.filename)
    # 0.1 * 2**0, 0.1 * 2**1, then 0.1 * 2**2 = 0.4 capped at 0.3
    assert sleeps == pytest.approx([0.1, 0.2, 0.3])
    assert result.attempts == 4
    assert [r.action for r in fake.pdf_requests()] == ["503", "503", "503", "ok"]


def test_retry_after_is_honoured_on_429(fake, session, tmp_path):
    fake.plans[KEY] = ["429"]
    fake.retry_after = "1"
    _client(fake, session, backoff_initial_s=0.01).download(PAPER, tmp_path / PAPER.filename)
    first, second = fake.pdf_requests()
    assert (first.action, second.action) == ("429", "ok")
    assert second.t - first.t >= 0.95  # waited Retry-After (1 s), not the 0.01 s backoff


def test_retry_after_longer_than_allowed_fails_at_once(fake, session, tmp_path):
    fake.plans[KEY] = ["429"]
    fake.retry_after = "3600"
    client = _client(fake, session, max_retry_after_s=60)
    with pytest.raises(DownloadError, match=r"Retry-After 3600 s.*try again later"):
        client.download(PAPER, tmp_path / PAPER.filename)
    assert len(fake.pdf_requests()) == 1
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("failure", ["cut", "reset", "hang", "503", "429"])
def test_transient_failure_is_retried(fake, session, tmp_path, failure):
    fake.plans[KEY] = [failure]
    fake.retry_after = "0"
    fake.hang_s = 0.8
    client = _client(fake, session, read_timeout_s=0.3)
    got = client.download(PAPER, tmp_path / PAPER.filename)
    assert got.attempts == 2
    assert (tmp_path / PAPER.filename).read_bytes() == PDF
    assert _leftovers(tmp_path) == [PAPER.filename]


def test_attempts_are_bounded(fake, session, tmp_path):
    fake.plans[KEY] = ["503"] * 10
    with pytest.raises(DownloadError, match=r"gave up after 3 attempt\(s\): HTTP 503"):
        _client(fake, session, max_attempts=3).download(PAPER, tmp_path / PAPER.filename)
    assert len(fake.pdf_requests()) == 3


def test_a_cut_download_never_leaves_a_file(fake, session, tmp_path):
    fake.plans[KEY] = ["cut"] * 3
    with pytest.raises(DownloadError, match="attempt"):
        _client(fake, session, max_attempts=3).download(PAPER, tmp_path / PAPER.filename)
    assert [r.action for r in fake.pdf_requests()] == ["cut"] * 3
    assert _leftovers(tmp_path) == []  # neither a truncated PDF nor a temp file


def test_a_failed_refetch_keeps_the_previous_file(fake, session, tmp_path):
    dest = tmp_path / PAPER.filename
    dest.write_bytes(PDF)
    fake.plans[KEY] = ["cut"]
    with pytest.raises(DownloadError):
        _client(fake, session, max_attempts=1).download(PAPER, dest)
    assert dest.read_bytes() == PDF


def test_a_page_that_is_not_a_pdf_is_rejected_without_retry(fake, session, tmp_path):
    fake.plans[KEY] = ["html"]
    with pytest.raises(DownloadError, match=r"not a PDF \(starts with b'<html'"):
        _client(fake, session).download(PAPER, tmp_path / PAPER.filename)
    assert len(fake.pdf_requests()) == 1
    assert _leftovers(tmp_path) == []


def test_a_pdf_without_trailer_counts_as_truncated(fake, session, tmp_path):
    fake.pdfs[KEY] = PDF[: len(PDF) // 2]  # complete per Content-Length, but cut at the source
    with pytest.raises(DownloadError, match="no %%EOF trailer"):
        _client(fake, session, max_attempts=2).download(PAPER, tmp_path / PAPER.filename)
    assert _leftovers(tmp_path) == []


def test_missing_version_is_a_clear_error(fake, session, tmp_path):
    other = PAPER.model_copy(update={"version": "v9"})
    with pytest.raises(DownloadError, match=r"HTTP 404; check the arxiv_id and version"):
        _client(fake, session).download(other, tmp_path / other.filename)
    assert len(fake.pdf_requests()) == 1


def test_requests_are_spaced_by_the_minimum_interval(fake, session, tmp_path):
    papers = [PAPER.model_copy(update={"arxiv_id": f"2401.0000{i}"}) for i in range(1, 5)]
    for p in papers:
        fake.pdfs[p.versioned_id] = PDF
    fake.plans[papers[1].versioned_id] = ["503"]  # a retry is spaced too
    client = _client(fake, session, min_interval_s=0.25, backoff_initial_s=0.0)
    for p in papers:
        client.download(p, tmp_path / p.filename)
    times = [r.t for r in fake.pdf_requests()]
    assert len(times) == 5
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.2, gaps  # 0.25 s minus arrival jitter


def test_rate_limiter_sleeps_only_the_remainder():
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    lim = RateLimiter(3.0, clock=lambda: now[0], sleep=sleep)
    lim.wait()  # first request: no wait
    now[0] += 1.0
    lim.wait()  # 1 s later: sleep 2 s
    now[0] += 5.0
    lim.wait()  # 5 s later: no wait
    assert slept == [2.0]


def test_spacing_holds_across_clients_sharing_a_stamp(fake, session, tmp_path):
    stamp = tmp_path / "stamp"
    settings = ClientSettings(pdf_base_url=fake.pdf_base_url, min_interval_s=0.4)
    ArxivClient(settings, session=session, stamp=stamp).download(PAPER, tmp_path / "a.pdf")
    # a new client (as after a restart) must still wait out the previous request's interval
    ArxivClient(settings, session=session, stamp=stamp).download(PAPER, tmp_path / "b.pdf")
    first, second = fake.pdf_requests()
    assert second.t - first.t >= 0.35  # 0.4 s minus arrival jitter


def test_unreachable_arxiv_says_how_to_fix(session, tmp_path):
    port = closed_port()
    settings = ClientSettings(
        pdf_base_url=f"http://127.0.0.1:{port}/pdf",
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        max_attempts=2,
    )
    with pytest.raises(ArxivUnreachable, match=r"RAG_PDF_MIRROR.*<arxiv_id>\.pdf"):
        ArxivClient(settings, session=session).download(PAPER, tmp_path / PAPER.filename)
    assert _leftovers(tmp_path) == []


def test_retry_after_formats():
    assert parse_retry_after("120") == 120.0
    now = datetime(2015, 10, 21, 7, 27, 0, tzinfo=UTC)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=now) == 60.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:26:00 GMT", now=now) == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_looks_like_pdf(tmp_path):
    ok, cut, html = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    ok.write_bytes(PDF)
    cut.write_bytes(PDF[:-100])
    html.write_bytes(b"<html>%%EOF")
    assert [looks_like_pdf(p) for p in (ok, cut, html, tmp_path / "none")] == [
        True,
        False,
        False,
        False,
    ]


def test_metadata_by_id_list_goes_through_the_polite_client(fake, session):
    fake.entries = [Entry("2401.00001", "v2", "First"), Entry("2401.00005", "v1", "Other")]
    client = _client(fake, session)
    papers = client.metadata(["2401.00001v2"])
    assert [(p.arxiv_id, p.version, p.title) for p in papers] == [("2401.00001", "v2", "First")]
    assert client.requests_sent == 1
    assert "id_list=2401.00001v2" in fake.requests[0].path


def test_cached_file_hash_follows_every_write(tmp_path, monkeypatch):
    import os
    import time

    from rag.corpus.pdf_check import sha256_file_cached

    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "a.pdf"
    f.write_bytes(b"%PDF-1 one %%EOF")
    assert sha256_file_cached(f) == hashlib.sha256(b"%PDF-1 one %%EOF").hexdigest()
    assert not (tmp_path / "cache" / "file-sha").exists() or not any(
        (tmp_path / "cache" / "file-sha").iterdir()
    ), "a file changed just now is not memoised (its next write may share the clock tick)"
    monkeypatch.setattr("rag.filehash.SETTLED_NS", 0)
    first = sha256_file_cached(f)
    assert first == hashlib.sha256(f.read_bytes()).hexdigest()
    assert len(list((tmp_path / "cache" / "file-sha").glob("*.json"))) == 1
    assert str(tmp_path) not in next((tmp_path / "cache" / "file-sha").glob("*.json")).read_text()
    # same size, mtime put back: the write still moves ctime, so the memo is not trusted
    st = f.stat()
    time.sleep(0.05)  # past the file-time tick, so the write moves ctime
    f.write_bytes(b"%PDF-1 two %%EOF")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert sha256_file_cached(f) == hashlib.sha256(b"%PDF-1 two %%EOF").hexdigest() != first
    # an unchanged file is answered from the memo, not re-read
    monkeypatch.setattr("rag.filehash.sha256_file", lambda p: "re-read")
    assert sha256_file_cached(f) == hashlib.sha256(b"%PDF-1 two %%EOF").hexdigest()
