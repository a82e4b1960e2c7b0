"""Hand-labelled claim/passage pairs from the corpus papers: ``data/judge/corpus_claims.jsonl``.

The set only reports how a faithfulness judge does in the lab's own domain
(docs/judge-corpus-set.md). These tests keep it what the protocol says: the schema, the label and
kind counts, unique ids, and every passage copied verbatim from its page of the pinned PDF (PyMuPDF
text with hyphenated line breaks joined and whitespace collapsed,
:func:`rag.text.normalize.verbatim_form`).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

from rag import paths
from rag.text.normalize import verbatim_form

CLAIMS = paths.project_root() / "data" / "judge" / "corpus_claims.jsonl"
MANIFEST = paths.project_root() / "data" / "manifest.jsonl"

KEYS = {"id", "arxiv_id", "page", "passage", "claim", "label", "kind", "note"}
#: Minimum pairs of each kind, by label (the protocol's counts).
KINDS = {
    "supported": {"paraphrase": 8, "number_restated": 8, "sub_span": 7, "combined": 7},
    "contradicted": {
        "direction": 5,
        "number": 5,
        "entity": 5,
        "negation": 5,
        "comparison": 5,
        "quantifier": 5,
    },
    "not_said": {"extra_detail": 8, "over_generalisation": 8, "causal": 7, "elsewhere": 7},
}
MIN_PER_LABEL = 30
MIN_PAPERS = 30
PASSAGE_WORDS = (40, 200)


def _rows() -> list[dict]:
    with open(CLAIMS, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _manifest() -> dict[str, dict]:
    with open(MANIFEST, encoding="utf-8") as f:
        return {p["arxiv_id"]: p for p in map(json.loads, f)}


def test_verbatim_form_joins_line_breaks_and_keeps_everything_else():
    page = "the retrie-\nval   step\n\ufb01nds \u201cit\u201d  in pre-trained\tGPT-\n4"
    assert (
        verbatim_form(page) == "the retrieval step \ufb01nds \u201cit\u201d in pre-trained GPT- 4"
    )


def test_schema_and_ids():
    rows = _rows()
    manifest = _manifest()
    ids = [r.get("id") for r in rows]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    for r in rows:
        assert set(r) == KEYS, (r.get("id"), sorted(set(r) ^ KEYS))
        assert re.fullmatch(r"cc-\d{3}", r["id"]), r["id"]
        assert r["arxiv_id"] in manifest, (r["id"], r["arxiv_id"])
        assert isinstance(r["page"], int) and 1 <= r["page"] <= manifest[r["arxiv_id"]]["pages"]
        assert r["label"] in KINDS, (r["id"], r["label"])
        assert r["kind"] in KINDS[r["label"]], (r["id"], r["label"], r["kind"])
        lo, hi = PASSAGE_WORDS
        assert lo <= len(r["passage"].split()) <= hi, (r["id"], len(r["passage"].split()))
        assert r["passage"] == verbatim_form(r["passage"]), r["id"]
        for field in ("claim", "note"):
            assert r[field].strip() and "\n" not in r[field], (r["id"], field)
        # Claims are written the way an answerer paraphrases, never copied from the passage.
        assert r["claim"].rstrip(".") not in r["passage"], r["id"]


def test_label_and_kind_counts():
    rows = _rows()
    labels = Counter(r["label"] for r in rows)
    kinds = Counter((r["label"], r["kind"]) for r in rows)
    for label, wanted in KINDS.items():
        assert labels[label] >= MIN_PER_LABEL, (label, labels[label])
        for kind, n in wanted.items():
            assert kinds[label, kind] >= n, (label, kind, kinds[label, kind])
    assert len({r["arxiv_id"] for r in rows}) >= MIN_PAPERS


def test_every_passage_is_on_its_page(shared_dir):
    import pymupdf

    by_paper: dict[str, list[dict]] = defaultdict(list)
    for r in _rows():
        by_paper[r["arxiv_id"]].append(r)
    missing = []
    for arxiv_id, rows in sorted(by_paper.items()):
        pdf = shared_dir / "corpus" / "pdfs" / f"{arxiv_id}.pdf"
        assert pdf.exists(), f"{pdf} is missing from the shared corpus"
        with pymupdf.open(pdf) as doc:
            pages = {p: verbatim_form(doc[p - 1].get_text()) for p in {r["page"] for r in rows}}
        missing += [
            (r["id"], arxiv_id, r["page"]) for r in rows if r["passage"] not in pages[r["page"]]
        ]
    assert not missing, f"passages not found verbatim on their page: {missing}"


def test_the_page_check_can_fail(shared_dir):
    """A passage moved to the wrong page, or with one word changed, is not found."""
    import pymupdf

    r = _rows()[0]
    with pymupdf.open(shared_dir / "corpus" / "pdfs" / f"{r['arxiv_id']}.pdf") as doc:
        page = verbatim_form(doc[r["page"] - 1].get_text())
        other = verbatim_form(doc[r["page"] % doc.page_count].get_text())
    assert r["passage"] in page
    assert r["passage"] not in other
    first, rest = r["passage"].split(" ", 1)
    assert f"{first}x {rest}" not in page
