"""Ingest under faults: concurrent ingests, swapped PDFs, a true reason for every failure.

Each docstring says which fault the test reproduces and what a wrong implementation would do.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from rag.corpus import arxiv_client
from rag.corpus.arxiv_client import ClientSettings
from rag.corpus.fetch import BYTES_TOLERANCE
from rag.corpus.ingest import IngestSettings, ingest, main
from rag.corpus.manifest import Paper, write_manifest
from rag.corpus.parse import ParseSettings, parse_pdf
from rag.errors import ConfigError
from tests.fakearxiv import FakeArxiv, closed_port, make_pdf
from tests.polling import wait_until

WORDS = (
    "Dense retrieval encodes questions and passages into one vector space where the nearest "
    "passages answer the question; sparse retrieval weighs rare terms higher."
)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _long_pdf(i: int, pages: int = 6, pad: int = 0) -> bytes:
    """A PDF with many text lines per page, so a hole in it garbles or breaks the parse; ``pad``
    bytes of an incompressible attachment make it span many of the client's 64 KiB reads."""
    import random

    import pymupdf

    doc = pymupdf.open()
    if pad:  # half before the pages, half after: the pages sit in the middle of the file
        doc.embfile_add("pad0.bin", random.Random(i).randbytes(pad // 2))
    for n in range(pages):
        page = doc.new_page()
        for line in range(40):
            page.insert_text(
                (72, 60 + 17 * line),
                f"Paper {i} page {n + 1} line {line}: {WORDS[:70]}",
                fontsize=9,
            )
    if pad:
        doc.embfile_add("pad1.bin", random.Random(-i).randbytes(pad - pad // 2))
    data = doc.tobytes()
    doc.close()
    return data


def _paper(i: int, data: bytes, **kw) -> Paper:
    fields = dict(
        arxiv_id=f"2401.0000{i}",
        version="v1",
        title=f"Paper {i}",
        primary_category="cs.IR",
        pages=None,
        bytes=len(data),
        sha256=_sha(data),
    )
    fields.update(kw)
    return Paper(**fields)


@pytest.fixture()
def session():
    with requests.Session() as s:
        s.trust_env = False
        yield s


def _client(base: str, **kw) -> ClientSettings:
    opts = dict(
        api_url=f"{base}/api/query",
        pdf_base_url=f"{base}/pdf",
        min_interval_s=0.0,
        backoff_initial_s=0.01,
        max_attempts=2,
    )
    opts.update(kw)
    return ClientSettings(**opts)


# --- two concurrent downloading ingests into one folder ------------------------------------


def _ingest_cli(fake: FakeArxiv, tmp_path: Path, manifest: Path, tag: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "rag.corpus.ingest",
        "--manifest",
        str(manifest),
        "--no-mirror",
        "--pdf-dir",
        str(tmp_path / "pdfs"),
        "--summary",
        str(tmp_path / f"summary-{tag}.json"),
        "--pdf-base-url",
        fake.pdf_base_url,
        "--min-interval",
        "0",
        "--max-attempts",
        "3",
        "--backoff",
        "0.01",
    ]
    env = {"RAG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # lets the check against the previous rag/ reach the children
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_concurrent_downloading_ingests_never_cache_a_corrupt_parse(tmp_path):
    """Two ``rag ingest`` processes into one PDF folder and one cache, against a server where
    both fetch the first PDF at once over connections of unequal speed (``pair`` in
    :mod:`tests.fakearxiv`).

    Without the per-paper lock the second process truncates the shared ``.<id>.pdf.part`` under
    the first, which verifies its own stream, moves the holed file into place and parses it: a
    parse with missing text (or a "corrupt" failure) cached under the correct checksum key, which
    this test catches (the cached parse differs from a fresh parse of the final PDF). With the lock
    the second process waits, never requests the PDF, and reuses the first one's verified file;
    the first request waits out ``pair_wait_s`` for a partner that never comes (~8 s).
    """
    ids = (1, 2)
    pdfs = {f"2401.0000{i}v1": _long_pdf(i, pad=700_000) for i in ids}
    papers = [_paper(i, pdfs[f"2401.0000{i}v1"]) for i in ids]
    manifest = write_manifest(papers, tmp_path / "manifest.jsonl")
    with FakeArxiv(pdfs=pdfs, slow_s=1.0, pair_wait_s=8.0) as fake:
        fake.plans = {papers[0].versioned_id: ["pair", "pair"]}
        first = _ingest_cli(fake, tmp_path, manifest, "a")
        # the first process is downloading (and holds the paper's lock) when the second starts
        wait_until(lambda: fake.pdf_requests(), what="the first ingest's PDF request")
        second = _ingest_cli(fake, tmp_path, manifest, "b")
        outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    pdf_dir = tmp_path / "pdfs"
    for p in papers:
        assert (pdf_dir / p.filename).read_bytes() == pdfs[p.versioned_id]
    for tag in ("a", "b"):
        summary = json.loads((tmp_path / f"summary-{tag}.json").read_text())
        assert [o["parse_status"] for o in summary["papers"]] == ["ok"] * len(ids), summary
    cached = sorted((tmp_path / "cache" / "parsed").glob("*.json"))
    assert len(cached) == len(ids)
    for path in cached:
        stem = path.name.split("-")[0]
        fresh = parse_pdf(pdf_dir / f"{stem}.pdf", ParseSettings())
        stored = json.loads(path.read_text())
        assert [b["text"] for b in stored["blocks"]] == [b.text for b in fresh.blocks], stem


def test_a_pdf_rewritten_while_parsed_is_not_cached(tmp_path, tmp_cache):
    """The parse is made only from a file whose sha256 matches at the moment of parsing."""
    from rag.corpus.parse import load_parsed

    data = _long_pdf(1, pages=2)
    path = tmp_path / "2401.00001.pdf"
    path.write_bytes(data[:200] + b"\0" * 500 + data[700:])  # what the race left on disk
    parsed = load_parsed(path, _sha(data), ParseSettings(), verify=True)
    assert parsed.status == "error" and "changed on disk" in parsed.error
    assert not list((tmp_cache / "parsed").glob("*.json"))


# --- a changed PDF that is another paper (pages, size or page-1 title) ----------------------


def test_a_swapped_pdf_is_refused_by_name_and_a_regenerated_one_is_accepted(tmp_path, session):
    """A changed-checksum PDF whose pages and size contradict the manifest is another paper: it is
    refused, never parsed; a regenerated copy of the pinned paper is used (and flagged)."""
    pinned = _long_pdf(1, pages=6)
    regenerated = pinned.replace(b"Paper 1", b"Paper 1", 1) + b"\n% regenerated\n%%EOF\n"
    swapped = _long_pdf(9, pages=2)
    papers = [
        _paper(1, pinned, pages=6),
        _paper(2, pinned, pages=6),  # its mirror file is another, shorter paper
    ]
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / papers[0].filename).write_bytes(regenerated)
    (mirror / papers[1].filename).write_bytes(swapped)
    s = IngestSettings(
        pdf_dir=tmp_path / "pdfs",
        mirror=mirror,
        client=_client(f"http://127.0.0.1:{closed_port()}"),
    )
    calls: list[str] = []

    def parse_fn(path, sha):
        calls.append(path.stem)
        from rag.types import ParsedPaper

        return ParsedPaper(paper_id=path.stem, n_pages=6)

    summary = ingest(papers, s, session=session, parse_fn=parse_fn)
    ok, bad = summary.outcomes
    assert (ok.status, ok.changed, ok.used, ok.refused) == ("changed", True, True, False)
    assert "regenerated" in ok.reason
    assert (bad.status, bad.changed, bad.used, bad.refused) == ("failed", True, False, True)
    assert list(summary.refused) == [papers[1].arxiv_id]
    assert "2 pages vs the manifest's 6" in bad.reason and "bytes vs the manifest's" in bad.reason
    assert calls == [papers[0].arxiv_id]  # the swapped file is never parsed
    assert papers[1].arxiv_id not in summary.pdf_paths
    assert summary.changed == [p.arxiv_id for p in papers]
    assert summary.failures[papers[1].arxiv_id].startswith("refused:")
    assert BYTES_TOLERANCE < 1


def _titled_pdf(title: str, pages: int = 6) -> bytes:
    """A paper whose page 1 opens with ``title`` above lines of body text."""
    import pymupdf

    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page()
        if n == 0:
            page.insert_text((50, 50), title, fontsize=11)
        for line in range(38):
            page.insert_text((72, 80 + 17 * line), f"{n + 1}.{line}: {WORDS[:80]}", fontsize=9)
    data = doc.tobytes()
    doc.close()
    return data


def test_a_lookalike_pdf_of_another_paper_is_refused_by_its_page_1_title(tmp_path, session):
    """Another paper's file whose pages and size fit the manifest passes those checks, but its
    page 1 does not carry the manifest's title: refused by name, never parsed or indexed."""
    ours = "Dense Passage Retrieval for Open-Domain Question Answering"
    theirs = (
        "Leveraging Passage Retrieval with Generative Models for Open Domain Question Answering"
    )
    pinned, other = _titled_pdf(ours), _titled_pdf(theirs)
    regenerated = pinned + b"\n% regenerated\n%%EOF\n"
    papers = [
        _paper(1, pinned, pages=6, title=ours),
        _paper(2, pinned, pages=6, title=ours),  # its mirror file is the look-alike
    ]
    assert abs(len(other) - len(pinned)) / len(pinned) < BYTES_TOLERANCE  # the size check passes
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / papers[0].filename).write_bytes(regenerated)
    (mirror / papers[1].filename).write_bytes(other)
    s = IngestSettings(
        pdf_dir=tmp_path / "pdfs",
        mirror=mirror,
        client=_client(f"http://127.0.0.1:{closed_port()}"),
    )
    calls: list[str] = []

    def parse_fn(path, sha):
        calls.append(path.stem)
        from rag.types import ParsedPaper

        return ParsedPaper(paper_id=path.stem, n_pages=6)

    summary = ingest(papers, s, session=session, parse_fn=parse_fn)
    ok, bad = summary.outcomes
    assert (ok.status, ok.used, ok.refused) == ("changed", True, False)
    assert (bad.status, bad.used, bad.refused) == ("failed", False, True)
    assert calls == [papers[0].arxiv_id] and papers[1].arxiv_id not in summary.pdf_paths
    why = summary.failures[papers[1].arxiv_id]
    assert why.startswith("refused:") and papers[1].versioned_id in why
    assert f"manifest's title {ours!r}" in why and f"page 1 reads {theirs!r}"[:-1] in why


def test_a_real_lookalike_pair_of_corpus_papers_is_refused(tmp_path, shared_dir):
    """Two corpus papers whose pages (±1) and size (±25 %) fit each other: the file of 2005.11401
    (RAG for knowledge-intensive tasks) saved as 2402.13178 (RAG benchmark for medicine)."""
    from rag.corpus.fetch import manifest_mismatch
    from rag.corpus.manifest import load_manifest
    from rag.corpus.titlecheck import check_title
    from rag.errors import WrongPaperError

    by_id = {p.arxiv_id: p for p in load_manifest(shared_dir / "corpus" / "manifest.jsonl")}
    claimed = by_id["2402.13178"]
    swapped = tmp_path / claimed.filename
    swapped.write_bytes((shared_dir / "corpus" / "pdfs" / "2005.11401.pdf").read_bytes())
    assert manifest_mismatch(claimed, swapped, swapped.stat().st_size) is None  # pages, size fit
    with pytest.raises(WrongPaperError) as info:
        check_title(claimed, swapped)
    msg = str(info.value)
    assert claimed.versioned_id in msg and repr(claimed.title) in msg
    assert "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks" in msg
    assert check_title(claimed, shared_dir / "corpus" / "pdfs" / claimed.filename) >= 95


# --- true per-paper reasons; no retry ladder when nothing answers ------------------------


def test_each_failure_carries_its_own_reason(tmp_path, session, monkeypatch):
    """Every miss carries its own reason and URL (not the first paper's), and a bad mirror file
    is part of the paper's reason, not only a WARNING line; a refused connection is not retried
    (no 2+4+8+16 s back-off ladder: the client never waits)."""
    waits: list[float] = []
    init = arxiv_client.ArxivClient.__init__

    def recording_init(self, settings, **kw):
        init(self, settings, **{**kw, "sleep": waits.append})

    monkeypatch.setattr(arxiv_client.ArxivClient, "__init__", recording_init)
    good = make_pdf("fine", pages=1)
    papers = [_paper(i, good) for i in (1, 2, 3, 4)]
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / papers[1].filename).write_bytes(good[: len(good) // 2])  # truncated
    (mirror / papers[2].filename).write_bytes(b"<html>not a pdf</html>")
    (mirror / papers[3].filename).write_bytes(good)
    base = f"http://127.0.0.1:{closed_port()}"
    s = IngestSettings(
        pdf_dir=tmp_path / "pdfs",
        mirror=mirror,
        parse=False,
        client=_client(base, max_attempts=5, backoff_initial_s=2.0),
    )
    summary = ingest(papers, s, session=session)
    assert [w for w in waits if w > 0] == []
    f = summary.failures
    assert set(f) == {p.arxiv_id for p in papers[:3]}
    assert "network unreachable" in f[papers[0].arxiv_id]
    assert papers[0].versioned_id in f[papers[0].arxiv_id]
    assert "truncated" in f[papers[1].arxiv_id] and "mirror file" in f[papers[1].arxiv_id]
    assert papers[1].versioned_id in f[papers[1].arxiv_id]
    assert papers[0].versioned_id not in f[papers[1].arxiv_id]
    assert "not a PDF" in f[papers[2].arxiv_id]
    assert summary.outcomes[0].attempts == 1
    assert summary.outcomes[3].status == "mirror"


def test_timeouts_and_503_are_still_retried(tmp_path, session):
    data = make_pdf("retry me", pages=1)
    paper = _paper(1, data)
    with FakeArxiv(pdfs={paper.versioned_id: data}) as fake:
        fake.plans[paper.versioned_id] = ["503", "reset"]
        s = IngestSettings(
            pdf_dir=tmp_path / "pdfs",
            mirror=None,
            parse=False,
            client=_client(fake.base, max_attempts=3),
        )
        summary = ingest([paper], s, session=session)
    assert summary.outcomes[0].status == "downloaded" and summary.outcomes[0].attempts == 3


# --- ingest's command line -----------------------------------------------------------------


def test_cli_limit_has_one_meaning_and_a_missing_mirror_is_named(tmp_path, capsys):
    """``--limit -1`` is an error (not all but one paper), ``--limit 0`` means all papers, and a
    missing ``--mirror`` folder is an error, not silently ignored."""
    data = make_pdf("cli", pages=1)
    papers = [_paper(i, data) for i in (1, 2, 3)]
    manifest = write_manifest(papers, tmp_path / "m.jsonl")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for p in papers:
        (mirror / p.filename).write_bytes(data)
    common = ["--manifest", str(manifest), "--no-parse", "--pdf-dir", str(tmp_path / "pdfs")]
    common += ["--summary", str(tmp_path / "s.json")]
    assert main([*common, "--limit", "-1", "--mirror", str(mirror)]) == 2
    assert "--limit must be >= 0" in capsys.readouterr().err
    assert main([*common, "--limit", "0", "--mirror", str(mirror)]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["counts"]["requested"] == 3
    assert main([*common, "--limit", "2", "--mirror", str(mirror)]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["counts"]["requested"] == 2
    missing = tmp_path / "nonexistent"
    assert main([*common, "--mirror", str(missing)]) == 2
    assert "nonexistent" in capsys.readouterr().err


def test_a_missing_mirror_folder_in_settings_is_a_config_error(tmp_path):
    s = IngestSettings(pdf_dir=tmp_path / "pdfs", mirror=tmp_path / "gone", parse=False)
    with pytest.raises(ConfigError, match="gone"):
        ingest([], s)


def test_title_scores_separate_own_titles_from_swapped_ones(shared_dir):
    """On real corpus papers every own title clears the threshold and no other paper's does (the
    full corpus is measured by ``python -m rag.corpus.title_scores``)."""
    from rag.corpus.manifest import load_manifest
    from rag.corpus.title_scores import measure
    from rag.corpus.titlecheck import TITLE_THRESHOLD

    papers = load_manifest(shared_dir / "corpus" / "manifest.jsonl")[:12]
    result = measure(papers, shared_dir / "corpus" / "pdfs")
    assert result["own_title"]["n"] == 12 and result["swapped_pairs"]["n"] == 12 * 11
    assert result["own_title"]["min"] >= TITLE_THRESHOLD > result["swapped_pairs"]["max"]
    assert result["own_below_threshold"] == result["swapped_at_or_above_threshold"] == 0
