"""The PDF parser on small PDFs built here with PyMuPDF, whose layout is known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest

from rag.bench.corpus import bench_parse
from rag.corpus.parse import (
    ParseFailure,
    ParseSettings,
    cache_key,
    load_parsed,
    paper_pages_text,
    parse_pdf,
    pymupdf_version,
)
from rag.errors import ParseError
from rag.types import ParsedPaper

LEFT, RIGHT = 72, 320  # column x positions on a 612 pt wide Letter page
HEADER = "Preprint Conference 2024"
STAMP = "arXiv:2101.00001v2 [cs.CL] 1 Jan 2021"


def _lines(page: pymupdf.Page, x: float, y: float, lines: list[str], **kw) -> None:
    for i, line in enumerate(lines):
        page.insert_text(
            (x, y + 12 * i), line, fontsize=kw.get("size", 10), fontname=kw.get("font", "helv")
        )


def _heading(page: pymupdf.Page, x: float, y: float, text: str) -> None:
    page.insert_text((x, y), text, fontsize=12, fontname="hebo")


def build_paper(path: Path) -> Path:
    """A 3-page two-column paper with every feature the parser handles."""
    doc = pymupdf.open()
    for n in (1, 2, 3):
        page = doc.new_page(width=612, height=792)
        page.insert_text((LEFT, 40), HEADER, fontsize=9, fontname="helv")
        page.insert_text((300, 760), str(n), fontsize=9, fontname="helv")
    p1, p2, p3 = doc[0], doc[1], doc[2]
    p1.insert_font(fontname="lig", fontbuffer=pymupdf.Font("cjk").buffer)
    p1.insert_text((30, 600), STAMP, fontsize=20, fontname="tiro", rotate=90)
    p1.insert_text((180, 90), "A Study of Retrieval", fontsize=20, fontname="hebo")
    _heading(p1, LEFT, 130, "Abstract")
    _lines(p1, LEFT, 146, ["We study dense retrie-", "val for question answering."])
    p1.insert_text((LEFT, 170), "Our method \ufb01nds the \ufb02ow of", fontsize=10, fontname="lig")
    _lines(p1, LEFT, 182, ["pre-trained models."])
    _heading(p1, LEFT, 220, "1 Introduction")
    _lines(p1, LEFT, 236, ["Introduction text in the left column.", "It continues here."])
    _heading(p1, RIGHT, 130, "2 Method")
    _lines(
        p1,
        RIGHT,
        146,
        ["The method is a pre-", "trained encoder used", "as a well-known baseline."],
    )
    p1.insert_text((RIGHT, 200), "2.1 Details", fontsize=11, fontname="hebo")
    _lines(p1, RIGHT, 216, ["Details of the method."])

    _lines(p2, LEFT, 100, ["Left column body on page two.", "More left text."])
    _lines(p2, RIGHT, 100, ["Right column body on page two.", "More right text."])
    _lines(p2, LEFT, 300, ["Figure 1: A wide figure caption that spans both columns of the page."])
    _lines(p2, LEFT, 400, ["Left text below the figure."])
    _lines(p2, RIGHT, 400, ["Right text below the figure."])
    _lines(p2, LEFT, 700, ["1 A footnote in small type."], size=7)

    _heading(p3, LEFT, 100, "References")
    _lines(p3, LEFT, 116, ["[1] A. Author. A paper. 2020."])
    _lines(p3, LEFT, 140, ["[2] B. Author. Another paper. 2021."])
    _heading(p3, LEFT, 200, "A Appendix Details")
    _lines(p3, LEFT, 216, ["Appendix body text."])
    doc.save(path, garbage=3, deflate=True)
    return path


@pytest.fixture(scope="module")
def paper(tmp_path_factory) -> ParsedPaper:
    path = build_paper(tmp_path_factory.mktemp("pdf") / "2101.00001.pdf")
    return parse_pdf(path, ParseSettings())


def _content(paper: ParsedPaper, page: int) -> list[tuple[str, str, str]]:
    return [
        (b.kind, b.section, b.text)
        for b in paper.blocks
        if b.page == page and b.kind != "header_footer"
    ]


def test_page_one_reading_order_sections_hyphens_ligatures(paper):
    assert paper.ok and paper.n_pages == 3 and paper.paper_id == "2101.00001"
    assert _content(paper, 1) == [
        ("heading", "", "A Study of Retrieval"),
        ("heading", "Abstract", "Abstract"),
        # "retrie-|val" joins (no "retrie-val" elsewhere); ligatures expand; "pre-trained" stays.
        (
            "body",
            "Abstract",
            "We study dense retrieval for question answering. "
            "Our method finds the flow of pre-trained models.",
        ),
        ("heading", "1 Introduction", "1 Introduction"),
        ("body", "1 Introduction", "Introduction text in the left column. It continues here."),
        ("heading", "2 Method", "2 Method"),
        # The paper spells "pre-trained" with a hyphen elsewhere, so the line-end hyphen stays.
        ("body", "2 Method", "The method is a pre-trained encoder used as a well-known baseline."),
        ("heading", "2.1 Details", "2.1 Details"),
        ("body", "2.1 Details", "Details of the method."),
    ]


def test_two_columns_around_a_full_width_caption_and_a_footnote(paper):
    assert _content(paper, 2) == [
        ("body", "2.1 Details", "Left column body on page two. More left text."),
        ("body", "2.1 Details", "Right column body on page two. More right text."),
        (
            "caption",
            "2.1 Details",
            "Figure 1: A wide figure caption that spans both columns of the page.",
        ),
        ("body", "2.1 Details", "Left text below the figure."),
        # The footnote sits at the foot of the left column, so it is read before the right one.
        ("footnote", "2.1 Details", "1 A footnote in small type."),
        ("body", "2.1 Details", "Right text below the figure."),
    ]


def test_references_end_at_the_appendix(paper):
    assert _content(paper, 3) == [
        ("heading", "References", "References"),
        ("references", "References", "[1] A. Author. A paper. 2020."),
        ("references", "References", "[2] B. Author. Another paper. 2021."),
        ("heading", "A Appendix Details", "A Appendix Details"),
        ("body", "A Appendix Details", "Appendix body text."),
    ]


def test_stamp_running_header_and_page_numbers_are_header_footer(paper):
    hf = sorted((b.page, b.text) for b in paper.blocks if b.kind == "header_footer")
    assert hf == sorted(
        [(1, STAMP)] + [(n, HEADER) for n in (1, 2, 3)] + [(n, str(n)) for n in (1, 2, 3)]
    )
    text = "\n".join(paper_pages_text(paper).values())
    assert "arXiv" not in text and HEADER not in text
    assert all(b.page in (1, 2, 3) and b.bbox[2] > b.bbox[0] for b in paper.blocks)


def test_columns_off_reads_top_to_bottom(tmp_path):
    parsed = parse_pdf(build_paper(tmp_path / "x.pdf"), ParseSettings(columns=False))
    page2 = [t for _, _, t in _content(parsed, 2)]
    assert page2[:2] == [
        "Left column body on page two. More left text.",
        "Right column body on page two. More right text.",
    ]
    page1 = [t for _, _, t in _content(parsed, 1)]
    # Without columns, "2 Method" (right, y=130) comes before the abstract body (left, y=146).
    assert page1.index("2 Method") < page1.index("1 Introduction")


def test_compound_hyphen_rule_can_be_switched_off(tmp_path):
    parsed = parse_pdf(build_paper(tmp_path / "x.pdf"), ParseSettings(keep_compound_hyphens=False))
    assert any(b.text.startswith("The method is a pretrained encoder") for b in parsed.blocks)


def test_parse_is_deterministic(tmp_path, paper):
    again = parse_pdf(build_paper(tmp_path / "2101.00001.pdf"), ParseSettings())
    strip = lambda p: json.dumps({**p.to_dict(), "parse_seconds": 0}, sort_keys=True)  # noqa: E731
    assert strip(again) == strip(paper)


# --- guard rails ------------------------------------------------------------------------------


def _encrypted(path: Path) -> Path:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "secret text")
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="user")
    return path


def _blank(path: Path) -> Path:
    doc = pymupdf.open()
    doc.new_page()
    doc.save(path)
    return path


def _image_only(path: Path) -> Path:
    doc = pymupdf.open()
    page = doc.new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    pix.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 72, 272, 272), pixmap=pix)
    doc.save(path)
    return path


def _corrupt(path: Path) -> Path:
    path.write_bytes(b"%PDF-1.4\n this is not really a PDF \x00\x01\x02")
    return path


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (_encrypted, "encrypted"),
        (_blank, "empty"),
        (_image_only, "image_only"),
        (_corrupt, "corrupt"),
    ],
)
def test_bad_pdfs_raise_parse_error_with_status(tmp_path, make, status):
    path = make(tmp_path / "bad.pdf")
    with pytest.raises(ParseError) as info:
        parse_pdf(path, ParseSettings())
    assert isinstance(info.value, ParseFailure) and info.value.status == status
    assert "bad.pdf" in str(info.value)


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (_encrypted, "encrypted"),
        (_blank, "empty"),
        (_image_only, "image_only"),
        (_corrupt, "corrupt"),
    ],
)
def test_load_parsed_reports_bad_pdfs_without_raising(tmp_cache, tmp_path, make, status):
    parsed = load_parsed(make(tmp_path / "bad.pdf"), "0" * 64, ParseSettings())
    assert (parsed.status, parsed.ok, parsed.blocks) == (status, False, [])
    assert parsed.error and "bad.pdf" in parsed.error
    assert not list((tmp_cache / "parsed").glob("*.json"))  # failures are not cached


def test_page_and_time_limits(tmp_path):
    path = build_paper(tmp_path / "p.pdf")
    with pytest.raises(ParseFailure) as info:
        parse_pdf(path, ParseSettings(max_pages=2))
    assert info.value.status == "too_many_pages" and "3 pages" in str(info.value)
    with pytest.raises(ParseFailure) as info:
        parse_pdf(path, ParseSettings(time_limit_s=1e-9))
    assert info.value.status == "timeout"


def test_missing_file_is_an_error_status(tmp_cache, tmp_path):
    parsed = load_parsed(tmp_path / "nope.pdf", "0" * 64, ParseSettings())
    assert parsed.status == "error" and "not found" in parsed.error


def test_settings_forbid_unknown_keys_and_bounds():
    with pytest.raises(ValueError):
        ParseSettings(max_page=3)
    with pytest.raises(ValueError):
        ParseSettings(margin_band=0.5)


# --- cache ------------------------------------------------------------------------------------


def test_load_parsed_caches_by_content_and_settings(tmp_cache, tmp_path):
    path = build_paper(tmp_path / "2101.00001.pdf")
    first = load_parsed(path, "a" * 64, ParseSettings())
    files = list((tmp_cache / "parsed").glob("*.json"))
    assert first.ok and len(files) == 1 and files[0].name.startswith("2101.00001-")
    path.unlink()  # a cache hit must not need the PDF
    second = load_parsed(path, "a" * 64, ParseSettings())
    assert second.to_dict() == first.to_dict()
    # Other settings or another file hash → another key, so a re-parse (which now fails).
    assert load_parsed(path, "a" * 64, ParseSettings(columns=False)).status == "error"
    assert load_parsed(path, "b" * 64, ParseSettings()).status == "error"
    assert cache_key("a" * 64, ParseSettings()) != cache_key("a" * 64, ParseSettings(nfkc=False))


def test_a_cached_parse_carries_its_content_hash_from_a_memo(tmp_cache, tmp_path):
    import dataclasses

    from rag.types import ParsedPaper

    path = build_paper(tmp_path / "2101.00002.pdf")
    first = load_parsed(path, "a" * 64, ParseSettings())
    memo = next((tmp_cache / "parsed").glob("*.sha1"))
    fresh = ParsedPaper.from_dict(first.to_dict())  # no hash remembered: computed from blocks
    assert "known_sha1" not in first.to_dict() and fresh.known_sha1 is None
    assert memo.read_text().strip() == fresh.content_sha1() == first.known_sha1
    second = load_parsed(path, "a" * 64, ParseSettings())
    assert second.known_sha1 == fresh.content_sha1()
    edited = dataclasses.replace(fresh, blocks=fresh.blocks[1:])
    assert edited.content_sha1() != fresh.content_sha1()  # the hash follows the blocks
    memo.write_text("not a hash")  # a damaged memo is recomputed and rewritten
    third = load_parsed(path, "a" * 64, ParseSettings())
    assert third.known_sha1 == fresh.content_sha1() == memo.read_text().strip()


def test_bench_parse_counts_pages(tmp_path, capsys):
    build_paper(tmp_path / "one.pdf")
    _corrupt(tmp_path / "two.pdf")
    res = bench_parse(tmp_path, ["one", "two"])
    assert (res["papers"], res["failed"], res["pages"]) == (2, 1, 3)
    assert res["pages_per_s"] > 0 and "pages/s" in capsys.readouterr().out


# --- the real corpus (slow) -------------------------------------------------------------------


@pytest.mark.slow
def test_real_corpus_parses_and_evidence_is_found(shared_dir, tmp_cache):
    """All 100 papers parse; gold quotes and QASPER paragraphs are found in the parsed text.

    Measured when written: gold 281/281 (all on their annotated page), QASPER 39/40; the QASPER
    miss (1908.10084) is a paragraph that the PDF breaks across a column with a figure between.
    """
    import re

    from rag.evaluation.evidence import evidence_found, summarize_found
    from rag.evaluation.gold import evidence_items, load_gold
    from rag.evaluation.qasper import load_qasper, qasper_evidence_items

    manifest = [
        json.loads(line)
        for line in (shared_dir / "corpus" / "manifest.jsonl").read_text().splitlines()
        if line.strip()
    ]
    settings = ParseSettings()
    parsed = {
        m["arxiv_id"]: load_parsed(
            shared_dir / "corpus" / "pdfs" / f"{m['arxiv_id']}.pdf", m["sha256"], settings
        )
        for m in manifest
    }
    assert [i for i, p in parsed.items() if not p.ok] == []
    assert sum(p.n_pages for p in parsed.values()) == sum(m["pages"] for m in manifest)
    stamp = re.compile(r"arXiv:\d{4}\.\d{4,5}v\d+\s*\[")
    leaks = [
        i
        for i, p in parsed.items()
        for b in p.blocks
        if b.kind != "header_footer" and stamp.search(b.text)
    ]
    assert leaks == []
    assert all(any(b.kind == "references" for b in p.blocks) for p in parsed.values())

    items = evidence_items(load_gold(shared_dir / "gold" / "dev.jsonl")) + qasper_evidence_items(
        load_qasper(shared_dir / "datasets" / "qasper" / "corpus_questions.jsonl")
    )
    summary = summarize_found(evidence_found(parsed, items))
    assert summary["gold"]["found_rate"] >= 0.99
    assert summary["gold"]["on_page_rate"] >= 0.99
    assert summary["qasper"]["found_rate"] >= 0.95
    assert summary["all"]["found_rate"] >= 0.95


def test_an_unreadable_page_is_skipped_and_reported(tmp_path, monkeypatch):
    import rag.corpus.parse as parse_mod

    real = parse_mod.page_lines

    def flaky(page, nfkc):
        if page.number == 1:
            raise RuntimeError("bad content stream")
        return real(page, nfkc)

    monkeypatch.setattr(parse_mod, "page_lines", flaky)
    parsed = parse_pdf(build_paper(tmp_path / "p.pdf"), ParseSettings())
    assert parsed.ok and parsed.error == "unreadable pages skipped: [2]"
    assert {b.page for b in parsed.blocks} == {1, 3}
    monkeypatch.setattr(parse_mod, "page_lines", lambda page, nfkc: flaky(page.parent[1], nfkc))
    with pytest.raises(ParseFailure) as info:
        parse_pdf(tmp_path / "p.pdf", ParseSettings())
    assert info.value.status == "corrupt"


def test_cache_keys_name_pymupdf_as_it_states_itself():
    """The parse cache is keyed by PyMuPDF's version read without importing it (a cached parse
    then needs no PyMuPDF); it must be the version PyMuPDF states, or every key would change."""
    assert pymupdf_version() == pymupdf.VersionBind
