"""Ingest: cache → mirror → a fake arXiv on 127.0.0.1, then parse; and a kill mid-run."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from rag.corpus.arxiv_client import ClientSettings
from rag.corpus.ingest import IngestSettings, ingest
from rag.corpus.manifest import Paper, write_manifest
from rag.errors import DownloadError
from rag.types import ParsedPaper
from tests.fakearxiv import FakeArxiv, closed_port, make_pdf
from tests.polling import wait_until

TEXT = "Retrieval augmented generation answers questions over a pinned corpus of papers."


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _corpus(n: int = 4) -> tuple[list[Paper], dict[str, bytes]]:
    papers, pdfs = [], {}
    for i in range(1, n + 1):
        data = make_pdf(f"Paper {i}. {TEXT}", pages=2)  # page 1 opens with the title
        p = Paper(
            arxiv_id=f"2401.0000{i}",
            version="v1",
            title=f"Paper {i}",
            primary_category="cs.IR",
            pages=2,
            bytes=len(data),
            sha256=_sha(data),
        )
        papers.append(p)
        pdfs[p.versioned_id] = data
    return papers, pdfs


@pytest.fixture()
def corpus():
    return _corpus()


@pytest.fixture()
def fake(corpus):
    with FakeArxiv(pdfs=dict(corpus[1])) as f:
        yield f


@pytest.fixture()
def session():
    with requests.Session() as s:
        s.trust_env = False
        yield s


def _settings(fake, tmp_path, **kw) -> IngestSettings:
    client = ClientSettings(
        api_url=fake.api_url,
        pdf_base_url=fake.pdf_base_url,
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        max_attempts=2,
    )
    opts = dict(pdf_dir=tmp_path / "pdfs", mirror=None, client=client)
    opts.update(kw)
    return IngestSettings(**opts)


def _requested_ids(fake) -> list[str]:
    return sorted(r.path.removeprefix("/pdf/") for r in fake.pdf_requests())


def test_first_run_downloads_and_parses_then_rerun_is_all_cache(
    corpus, fake, session, tmp_path, tmp_cache
):
    papers, pdfs = corpus
    summary_path = tmp_path / "summary.json"
    s = _settings(fake, tmp_path, summary_path=summary_path)
    first = ingest(papers, s, session=session)
    assert first.counts == {
        "requested": 4,
        "downloaded": 4,
        "from_cache": 0,
        "from_mirror": 0,
        "failed": 0,
        "changed": 0,
        "parse_failed": 0,
        "parsed": 4,
        "pages": 8,
    }
    assert sorted(first.parsed) == [p.arxiv_id for p in papers]
    assert all(isinstance(d, ParsedPaper) and d.ok for d in first.parsed.values())
    assert json.loads(summary_path.read_text())["counts"]["downloaded"] == 4
    n = len(fake.requests)

    second = ingest(papers, s, session=session)
    assert len(fake.requests) == n  # a verified cached PDF is never fetched again
    assert second.counts["from_cache"] == 4 and second.counts["parsed"] == 4
    assert [o.status for o in second.outcomes] == ["cached"] * 4
    assert sorted(p.name for p in (tmp_path / "pdfs").glob("*.pdf")) == [p.filename for p in papers]


def test_mirror_is_consulted_before_the_network(corpus, fake, session, tmp_path):
    papers, pdfs = corpus
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for p in papers[:2]:
        (mirror / p.filename).write_bytes(pdfs[p.versioned_id])
    summary = ingest(papers, _settings(fake, tmp_path, mirror=mirror, parse=False), session=session)
    assert [o.source for o in summary.outcomes] == ["mirror", "mirror", "network", "network"]
    assert _requested_ids(fake) == [p.versioned_id for p in papers[2:]]
    assert summary.pdf_paths[papers[0].arxiv_id] == mirror / papers[0].filename
    assert not (tmp_path / "pdfs" / papers[0].filename).exists()  # used in place, not copied


def test_changed_checksum_is_reported_kept_and_not_refetched(corpus, fake, session, tmp_path):
    papers, _ = corpus
    pinned = papers[1].model_copy(update={"sha256": "0" * 64})
    manifest = [papers[0], pinned, *papers[2:]]
    calls: list[str] = []

    def parse_fn(path: Path, sha: str) -> ParsedPaper:
        calls.append(path.stem)
        return ParsedPaper(paper_id=path.stem, n_pages=2)

    s = _settings(fake, tmp_path)
    summary = ingest(manifest, s, session=session, parse_fn=parse_fn)
    out = summary.outcomes[1]
    assert summary.changed == [pinned.arxiv_id]
    assert (out.status, out.changed, out.used) == ("changed", True, True)
    assert out.sha256 == papers[1].sha256 and out.expected_sha256 == "0" * 64
    assert (tmp_path / "pdfs" / pinned.filename).exists()
    assert calls == [p.arxiv_id for p in papers]  # used (flagged), by default

    calls.clear()
    n = len(fake.requests)
    strict = s.model_copy(update={"use_changed": False})
    again = ingest(manifest, strict, session=session, parse_fn=parse_fn)
    assert len(fake.requests) == n
    assert again.changed == [pinned.arxiv_id]
    assert (again.outcomes[1].source, again.outcomes[1].used) == ("cache", False)
    assert pinned.arxiv_id not in calls and len(calls) == 3


def test_corrupt_pdf_is_reported_and_skipped(corpus, fake, session, tmp_path, tmp_cache):
    papers, _ = corpus
    junk = b"%PDF-1.7\n" + b"\x00garbage " * 200 + b"\n%%EOF\n"
    bad = papers[2].model_copy(update={"sha256": _sha(junk), "bytes": len(junk)})
    fake.pdfs[bad.versioned_id] = junk
    manifest = [*papers[:2], bad, papers[3]]
    summary = ingest(manifest, _settings(fake, tmp_path), session=session)
    out = summary.outcomes[2]
    assert (out.status, out.source, out.parse_status) == ("parse_failed", "network", "corrupt")
    assert list(summary.parse_failures) == [bad.arxiv_id]
    assert summary.counts["parsed"] == 3 and summary.counts["requested"] == 4
    assert bad.arxiv_id not in summary.parsed


def test_failures_are_recorded_and_the_batch_goes_on(corpus, fake, session, tmp_path):
    papers, _ = corpus
    fake.plans[papers[0].versioned_id] = ["html"]
    fake.plans[papers[1].versioned_id] = ["503", "503"]

    def parse_fn(path: Path, sha: str) -> ParsedPaper:
        if path.stem == papers[3].arxiv_id:
            raise RuntimeError("parser exploded")
        return ParsedPaper(paper_id=path.stem, n_pages=2)

    summary = ingest(papers, _settings(fake, tmp_path), session=session, parse_fn=parse_fn)
    assert [o.arxiv_id for o in summary.outcomes] == [p.arxiv_id for p in papers]
    assert [o.status for o in summary.outcomes] == [
        "failed",
        "failed",
        "downloaded",
        "parse_failed",
    ]
    assert "not a PDF" in summary.failures[papers[0].arxiv_id]
    assert "gave up after 2 attempt(s): HTTP 503" in summary.failures[papers[1].arxiv_id]
    assert summary.parse_failures == {papers[3].arxiv_id: "error: RuntimeError: parser exploded"}
    assert len(summary.table()) == 4


def test_junk_in_the_cache_is_replaced(corpus, fake, session, tmp_path):
    papers, pdfs = corpus
    pdf_dir = tmp_path / "pdfs"
    pdf_dir.mkdir()
    (pdf_dir / papers[0].filename).write_bytes(b"half a file")
    summary = ingest(papers[:1], _settings(fake, tmp_path, parse=False), session=session)
    assert summary.outcomes[0].status == "downloaded"
    assert (pdf_dir / papers[0].filename).read_bytes() == pdfs[papers[0].versioned_id]


def test_unreachable_arxiv_without_mirror_says_how_to_fix(corpus, session, tmp_path):
    papers, _ = corpus
    client = ClientSettings(
        pdf_base_url=f"http://127.0.0.1:{closed_port()}/pdf",
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        max_attempts=2,
    )
    summary_path = tmp_path / "summary.json"
    s = IngestSettings(pdf_dir=tmp_path / "pdfs", mirror=None, client=client)
    s = s.model_copy(update={"summary_path": summary_path})
    with pytest.raises(DownloadError, match=r"RAG_PDF_MIRROR.*no mirror folder is configured"):
        ingest(papers, s, session=session)
    written = json.loads(summary_path.read_text())
    assert written["counts"]["failed"] == 4
    # a refused connection is not retried; the rest are not tried, each with its own URL
    assert [p["attempts"] for p in written["papers"]] == [1, 0, 0, 0]
    assert all("RAG_PDF_MIRROR" in r for r in written["failures"].values())
    for p in papers[1:]:
        assert p.versioned_id in written["failures"][p.arxiv_id]


def test_unreachable_arxiv_with_partial_mirror_reports_the_rest(corpus, session, tmp_path):
    papers, pdfs = corpus
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / papers[0].filename).write_bytes(pdfs[papers[0].versioned_id])
    client = ClientSettings(
        pdf_base_url=f"http://127.0.0.1:{closed_port()}/pdf",
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        max_attempts=1,
    )
    s = IngestSettings(pdf_dir=tmp_path / "pdfs", mirror=mirror, parse=False, client=client)
    summary = ingest(papers, s, session=session)
    assert summary.counts["from_mirror"] == 1 and summary.counts["failed"] == 3


def _run_cli(fake, tmp_path, manifest, **popen):
    cmd = [
        sys.executable,
        "-m",
        "rag.corpus.ingest",
        "--manifest",
        str(manifest),
        "--no-parse",
        "--no-mirror",
        "--pdf-dir",
        str(tmp_path / "pdfs"),
        "--summary",
        str(tmp_path / "summary.json"),
        "--api-url",
        fake.api_url,
        "--pdf-base-url",
        fake.pdf_base_url,
        "--min-interval",
        "0.01",
        "--max-attempts",
        "2",
        "--backoff",
        "0.01",
    ]
    env = {"RAG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(cmd, env=env, **popen)


def test_killed_ingest_resumes_without_loss_duplicates_or_truncation(tmp_path):
    papers, pdfs = _corpus(5)
    manifest = write_manifest(papers, tmp_path / "manifest.jsonl")
    pdf_dir = tmp_path / "pdfs"
    with FakeArxiv(pdfs=pdfs, slow_s=0.6) as fake:
        fake.plans = {k: ["slow"] for k in pdfs}
        proc = _run_cli(
            fake, tmp_path, manifest, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def third_download_in_flight() -> bool:
            # the client opens the .part file once the headers are in, then waits out the 0.6 s
            # trickle (the fake PDF is smaller than one read, so the bytes land at its very end)
            return len(fake.pdf_requests()) >= 3 and any(pdf_dir.glob(".*.part"))

        wait_until(third_download_in_flight, what="the third PDF's download to be under way")
        proc.send_signal(signal.SIGKILL)  # inside the third paper's 0.6 s trickle
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

        finals = {p.name: p.read_bytes() for p in pdf_dir.glob("*.pdf")}
        by_name = {p.filename: pdfs[p.versioned_id] for p in papers}
        assert 1 <= len(finals) < 5, "the kill must land mid-run"
        assert all(data == by_name[name] for name, data in finals.items())  # none truncated
        assert list(pdf_dir.glob(".*.part")), "the in-flight download was cut, as intended"

        fake.plans = {}
        rerun = _run_cli(fake, tmp_path, manifest, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = rerun.communicate(timeout=60)
        assert rerun.returncode == 0, err.decode()

        summary = json.loads((tmp_path / "summary.json").read_text())
        assert summary["counts"]["from_cache"] == len(finals)
        assert summary["counts"]["downloaded"] == 5 - len(finals)
        assert summary["counts"]["failed"] == 0
        assert sorted(p.name for p in pdf_dir.glob("*.pdf")) == sorted(by_name)  # no duplicates
        assert not list(pdf_dir.glob("*.part")) and not list(pdf_dir.glob(".*.part"))
        assert all((pdf_dir / n).read_bytes() == b for n, b in by_name.items())
        hits = {k: 0 for k in pdfs}
        for r in fake.pdf_requests():
            hits[r.path.removeprefix("/pdf/")] += 1
        # what was done before the kill was never fetched again; only the cut one twice
        assert all(hits[p.versioned_id] == 1 for p in papers if p.filename in finals)
        assert sorted(hits.values()) == [1, 1, 1, 1, 2]
        assert b"downloaded: " in out


def test_cli_bootstrap_writes_an_unobserved_manifest(tmp_path, capsys, monkeypatch):
    from rag.corpus.ingest import main
    from rag.corpus.manifest import load_manifest
    from tests.fakearxiv import Entry

    entries = [
        Entry("2501.00001", "v1", "Older", published="2025-01-01T00:00:00Z"),
        Entry("2501.00002", "v2", "Newer", published="2025-01-05T00:00:00Z"),
    ]
    out = tmp_path / "new.jsonl"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the CLI's own session honours the environment
    with FakeArxiv(entries=entries) as fake:
        rc = main(
            ["--bootstrap", "cat:cs.IR", "--limit", "5", "--out", str(out)]
            + ["--api-url", fake.api_url]
        )
    assert rc == 0
    assert [(p.arxiv_id, p.version, p.sha256) for p in load_manifest(out)] == [
        ("2501.00002", "v2", None),
        ("2501.00001", "v1", None),
    ]
    assert "drift" in capsys.readouterr().out


def test_cli_missing_manifest_is_a_clear_error(tmp_path, capsys):
    from rag.corpus.ingest import main

    assert main(["--manifest", str(tmp_path / "none.jsonl"), "--no-parse"]) == 2
    assert "manifest not found" in capsys.readouterr().err


def _no_arxiv() -> ClientSettings:
    """arXiv at a closed local port: a file missing from the mirror fails, never downloads."""
    base = f"http://127.0.0.1:{closed_port()}"
    return ClientSettings(api_url=f"{base}/api/query", pdf_base_url=f"{base}/pdf", max_attempts=1)


def test_pinned_papers_match_the_shared_mirror(shared_dir, tmp_path):
    from rag.corpus.manifest import load_manifest

    papers = load_manifest()[:3]
    s = IngestSettings(
        pdf_dir=tmp_path / "pdfs",
        mirror=shared_dir / "corpus" / "pdfs",
        parse=False,
        client=_no_arxiv(),
    )
    summary = ingest(papers, s)
    assert [o.status for o in summary.outcomes] == ["mirror"] * 3
    assert summary.requests_sent == 0


@pytest.mark.slow
def test_full_corpus_ingests_from_the_mirror(shared_dir, tmp_path, tmp_cache):
    from rag.corpus.manifest import load_manifest

    s = IngestSettings(
        pdf_dir=tmp_path / "pdfs", mirror=shared_dir / "corpus" / "pdfs", client=_no_arxiv()
    )
    summary = ingest(load_manifest(), s)
    c = summary.counts
    assert (c["requested"], c["from_mirror"], c["changed"], c["failed"]) == (100, 100, 0, 0)
    assert (c["parsed"], c["parse_failed"], c["pages"]) == (100, 0, 1631)
