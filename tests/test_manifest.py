"""The pinned manifest: the committed file, validation errors that name the line, bootstrap."""

from __future__ import annotations

import hashlib
import json

import pytest
import requests

from rag.corpus.arxiv_client import ClientSettings, bootstrap_manifest
from rag.corpus.manifest import (
    Paper,
    default_manifest_path,
    load_manifest,
    manifest_line,
    observe,
    parse_manifest_lines,
    write_manifest,
)
from rag.errors import ManifestError
from tests.fakearxiv import Entry, FakeArxiv, make_pdf

GOOD = {
    "arxiv_id": "2401.00001",
    "version": "v2",
    "title": "A paper",
    "primary_category": "cs.IR",
    "pages": 3,
    "bytes": 1000,
    "sha256": "a" * 64,
}


def _lines(*rows: dict | str) -> list[str]:
    return [r if isinstance(r, str) else json.dumps(r) for r in rows]


def test_committed_manifest_pins_100_papers_with_checksums():
    papers = load_manifest()
    assert len(papers) == 100
    assert len({p.arxiv_id for p in papers}) == 100
    assert all(p.sha256 and p.pages and p.bytes for p in papers)
    first = papers[0]
    assert (first.arxiv_id, first.version) == ("1301.3781", "v3")
    assert first.versioned_id == "1301.3781v3"


def test_committed_manifest_matches_shared_corpus(shared_dir):
    shared = [json.loads(x) for x in (shared_dir / "corpus" / "manifest.jsonl").open()]
    ours = load_manifest()
    assert [(p.arxiv_id, p.version, p.sha256) for p in ours] == [
        (r["arxiv_id"], r["version"], r["sha256"]) for r in shared
    ]


def test_valid_lines_skip_blanks_and_comments():
    papers = parse_manifest_lines(["# pinned", "", json.dumps(GOOD), "  "])
    assert papers == [Paper(**GOOD)]


def test_bad_json_names_the_line():
    with pytest.raises(ManifestError, match=r"m\.jsonl line 2: not valid JSON"):
        parse_manifest_lines(_lines(GOOD, "{oops"), source="m.jsonl")


def test_bad_field_names_line_and_field():
    bad = {**GOOD, "arxiv_id": "2401.00002", "version": "2"}
    with pytest.raises(ManifestError, match=r"m line 3 \(arxiv_id '.*'\): field 'version'"):
        parse_manifest_lines(_lines(GOOD, "# c", bad), source="m")


def test_unknown_key_is_rejected():
    with pytest.raises(ManifestError, match="sha_256"):
        parse_manifest_lines(_lines({**GOOD, "sha_256": "x"}))


def test_duplicate_id_names_both_lines():
    with pytest.raises(
        ManifestError, match=r"m line 2: arxiv_id '2401.00001' already used on line 1"
    ):
        parse_manifest_lines(_lines(GOOD, {**GOOD, "version": "v3"}), source="m")


def test_non_object_line_is_rejected():
    with pytest.raises(ManifestError, match=r"line 1: expected a JSON object, got list"):
        parse_manifest_lines(["[1, 2]"])


def test_missing_manifest_says_how_to_fix(tmp_path):
    with pytest.raises(ManifestError, match=r"not found.*git checkout.*--manifest.*--bootstrap"):
        load_manifest(tmp_path / "nope.jsonl")


def test_empty_manifest_is_an_error(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text("# nothing pinned\n")
    with pytest.raises(ManifestError, match="holds no papers"):
        load_manifest(p)


def test_write_is_deterministic_and_round_trips(tmp_path):
    papers = [Paper(**GOOD), Paper(**{**GOOD, "arxiv_id": "hep-th/9901001", "sha256": None})]
    a = write_manifest(papers, tmp_path / "a.jsonl").read_bytes()
    b = write_manifest(load_manifest(tmp_path / "a.jsonl"), tmp_path / "b.jsonl").read_bytes()
    assert a == b
    assert load_manifest(tmp_path / "b.jsonl") == papers
    assert not list(tmp_path.glob(".*"))  # no temporary file left beside the manifest


def test_committed_manifest_is_in_canonical_form():
    raw = default_manifest_path().read_text(encoding="utf-8")
    assert raw == "".join(manifest_line(p) + "\n" for p in load_manifest())


def test_old_style_ids_get_a_flat_filename():
    p = Paper(**{**GOOD, "arxiv_id": "hep-th/9901001"})
    assert p.filename == "hep-th_9901001.pdf"
    assert p.versioned_id == "hep-th/9901001v2"


def test_bootstrap_lists_newest_first_from_the_configured_api():
    entries = [
        Entry("2501.00001", "v1", "Old  paper", published="2025-01-01T00:00:00Z"),
        Entry("2502.00002", "v3", "Newest paper", published="2025-02-02T00:00:00Z"),
        Entry("2501.00003", "v2", "Middle paper", published="2025-01-15T00:00:00Z"),
        Entry("2501.00004", "v1", "A CL paper", "cs.CL", published="2025-03-01T00:00:00Z"),
    ]
    with FakeArxiv(entries=entries) as fake, requests.Session() as s:
        settings = ClientSettings(api_url=fake.api_url, min_interval_s=0.0)
        papers = bootstrap_manifest("cat:cs.IR", 2, settings, session=s)
        n_requests = len(fake.requests)
    assert [(p.arxiv_id, p.version, p.title) for p in papers] == [
        ("2502.00002", "v3", "Newest paper"),
        ("2501.00003", "v2", "Middle paper"),
    ]
    assert all(p.primary_category == "cs.IR" and p.sha256 is None for p in papers)
    assert n_requests == 1


def test_observe_fills_in_size_pages_and_checksum(tmp_path):
    data = make_pdf("observe me", pages=3)
    path = tmp_path / "x.pdf"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    p = observe(Paper(**{**GOOD, "sha256": None, "pages": None, "bytes": None}), path, sha)
    assert (p.pages, p.bytes, p.sha256) == (3, len(data), sha)
