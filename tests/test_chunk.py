"""Chunking: text assembly, the three strategies, ids, persistence and evidence survival.

Most tests use the whitespace tokenizer so every expected count is derivable by hand; a few run
the real all-MiniLM-L6-v2 tokenizer (skipped when its package is absent); ``slow`` tests chunk the
real corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag.bench import chunk as bc
from rag.errors import ChunkError
from rag.evaluation.evidence import EvidenceItem, evidence_intact, intact_rate
from rag.text import chunk as ck
from rag.text import chunk_cache as cc
from rag.text import tokenize as tk
from rag.text.sentences import sentence_spans
from rag.types import Block, ParsedPaper

WS = tk.WhitespaceTokenizer()


def words(prefix: str, n: int, start: int = 0) -> str:
    return " ".join(f"{prefix}{i}" for i in range(start, start + n))


def paper(blocks: list[Block], pid: str = "0000.00001") -> ParsedPaper:
    return ParsedPaper(paper_id=pid, n_pages=max(b.page for b in blocks), blocks=blocks)


def settings(**kw) -> ck.ChunkSettings:
    return ck.chunk_settings(kw)


def run(p: ParsedPaper, **kw) -> tuple[ck.PaperText, list]:
    s = settings(**kw)
    pt = ck.paper_text(
        p,
        include_references=s.include_references,
        include_captions=s.include_captions,
        include_footnotes=s.include_footnotes,
    )
    return pt, ck.make_chunker(s, WS).chunk(pt, p.paper_id)


MIXED = paper(
    [
        Block(1, "header_footer", "", "arXiv:0000.00001v1 [cs.CL] 1 Jan 2020"),
        Block(1, "heading", "1 Intro", "1 Intro"),
        Block(1, "body", "1 Intro", "Alpha beta."),
        Block(1, "footnote", "1 Intro", "1 A footnote."),
        Block(2, "caption", "1 Intro", "Figure 1: A cat."),
        Block(2, "body", "1 Intro", "  Gamma delta.  "),
        Block(2, "body", "1 Intro", "   "),
        Block(3, "heading", "References", "References"),
        Block(3, "references", "References", "[1] Someone. A paper. 2019."),
    ]
)


# ------------------------------------------------------------------ paper_text


def test_paper_text_drops_headers_references_footnotes_by_default():
    pt = ck.paper_text(MIXED)
    # Kept: heading, body, caption, body (stripped); the empty block is skipped. The
    # "References" heading goes with its entries: its section has nothing else left.
    expected = "1 Intro\n\nAlpha beta.\n\nFigure 1: A cat.\n\nGamma delta."
    assert pt.text == expected
    assert "arXiv:" not in pt.text and "[1] Someone" not in pt.text
    assert [(s.start, s.end, s.page, s.kind) for s in pt.spans] == [
        (0, 7, 1, "heading"),
        (9, 20, 1, "body"),
        (22, 38, 2, "caption"),
        (40, 52, 2, "body"),
    ]
    for s in pt.spans:
        assert pt.text[s.start : s.end].strip() == pt.text[s.start : s.end]


def test_paper_text_flags():
    pt = ck.paper_text(
        MIXED, include_references=True, include_captions=False, include_footnotes=True
    )
    assert "[1] Someone. A paper. 2019." in pt.text
    assert "1 A footnote." in pt.text
    assert "Figure 1" not in pt.text
    assert "arXiv:" not in pt.text  # header_footer is always dropped


def test_locate_pages_and_majority_section():
    pt = ck.paper_text(MIXED, include_references=True)
    assert pt.text.endswith("Gamma delta.\n\nReferences\n\n[1] Someone. A paper. 2019.")
    assert pt.locate(9, 20) == (1, 1, "1 Intro")
    assert pt.locate(9, 45) == (1, 2, "1 Intro")
    # 3 chars of "1 Intro" body vs 10 of "References": the majority section wins.
    assert pt.locate(49, 64) == (2, 3, "References")
    with pytest.raises(ChunkError, match=r"\[5, 5\)"):
        pt.locate(5, 5)
    with pytest.raises(ChunkError, match="length 93"):
        pt.locate(0, 94)


def test_orphan_headings():
    p = paper(
        [
            Block(1, "heading", "5 Results", "5 Results"),
            Block(1, "heading", "5.1 Setup", "5.1 Setup"),
            Block(1, "body", "5.1 Setup", "We ran it."),
            Block(2, "heading", "Figures", "Figures"),
            Block(2, "caption", "Figures", "Figure 9: A plot."),
        ]
    )
    # Without captions the "Figures" section is empty, so its heading goes too; "5 Results"
    # lost nothing to the filters and stays in the text.
    pt = ck.paper_text(p, include_captions=False)
    assert pt.text == "5 Results\n\n5.1 Setup\n\nWe ran it."
    assert ck.paper_text(p).text.endswith("Figures\n\nFigure 9: A plot.")
    # The section strategy gives the bare "5 Results" title no chunk of its own.
    chunks = ck.make_chunker(settings(strategy="section", max_tokens=16), WS).chunk(pt, "x")
    assert [(c.section, c.text) for c in chunks] == [("5.1 Setup", "5.1 Setup\n\nWe ran it.")]


# ------------------------------------------------------------------ sentence splitter


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def test_split_sentences_tricky_cases():
    text = (
        "We follow Mikolov et al. (2013) closely. Results are in Fig. 3 and Eq. 2. "
        "The accuracy is 3.14 on average, e.g. BERT gets 2.5. See Sec. 4 for details! "
        'Is it good? He said "stop." Then J. Smith left the U.S. Army (see Table 2.) '
        "Next, i.e. Another one, etc. and more.\n\nDone."
    )
    assert sentences(text) == [
        "We follow Mikolov et al. (2013) closely.",
        "Results are in Fig. 3 and Eq. 2.",
        "The accuracy is 3.14 on average, e.g. BERT gets 2.5.",
        "See Sec. 4 for details!",
        "Is it good?",
        'He said "stop."',
        "Then J. Smith left the U.S. Army (see Table 2.)",
        "Next, i.e. Another one, etc. and more.",
        "Done.",
    ]


def test_split_sentences_edges():
    assert sentence_spans("") == []
    assert sentence_spans("   ") == []
    assert sentences("  no final stop  ") == ["no final stop"]
    # A lowercase start is never a sentence start; a bracketed abbreviation is still one.
    assert sentences("It works (cf. Smith) well. ok then.") == [
        "It works (cf. Smith) well. ok then."
    ]
    assert sentences("Version 2.0 is out. 3 runs were done.") == [
        "Version 2.0 is out.",
        "3 runs were done.",
    ]


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"strategy": "semantic"}, "semantic"),
        ({"max_tokens": 8}, "max_tokens=8"),
        ({"overlap_tokens": 200}, "overlap_tokens=200"),
        ({"max_tokens": 64, "overlap_tokens": 40}, "overlap_tokens=40"),
        ({"chunk_size": 100}, "chunk_size"),
    ],
)
def test_bad_settings_name_the_value(kw, needle):
    with pytest.raises(ChunkError, match=needle):
        ck.chunk_settings(kw)


def test_chunker_rejects_other_strategy_settings():
    with pytest.raises(ChunkError, match="'sentence'"):
        ck.FixedChunker(settings(strategy="sentence"), WS)


# ------------------------------------------------------------------ fixed


def test_fixed_windows_and_overlap_by_hand():
    p = paper([Block(1, "body", "", words("w", 41))])
    pt, chunks = run(p, strategy="fixed", max_tokens=16, overlap_tokens=4)
    # Stride 16 - 4 = 12: windows start at tokens 0, 12, 24, 36; the last holds w36..w40.
    assert [c.text for c in chunks] == [
        words("w", 16, 0),
        words("w", 16, 12),
        words("w", 16, 24),
        words("w", 5, 36),
    ]
    assert [c.n_tokens for c in chunks] == [16, 16, 16, 5]
    for c in chunks:
        assert pt.text[c.char_start : c.char_end] == c.text


def test_fixed_exact_fit_has_no_tail_window():
    p = paper([Block(1, "body", "", words("w", 40))])
    _, chunks = run(p, strategy="fixed", max_tokens=16, overlap_tokens=4)
    assert [c.n_tokens for c in chunks] == [16, 16, 16]
    _, chunks0 = run(p, strategy="fixed", max_tokens=20, overlap_tokens=0)
    assert [c.text for c in chunks0] == [words("w", 20), words("w", 20, 20)]


def test_fixed_page_span_and_section_across_blocks():
    p = paper(
        [
            Block(1, "heading", "1 A", "1 A"),
            Block(1, "body", "1 A", words("a", 10)),
            Block(2, "heading", "2 B", "2 B"),
            Block(2, "body", "2 B", words("b", 20)),
        ]
    )
    _, chunks = run(p, strategy="fixed", max_tokens=16, overlap_tokens=0)
    # Tokens: "1","A", a0..a9 (12), "2","B", b0..b19 (22) = 34 -> windows of 16, 16, 2.
    assert [c.n_tokens for c in chunks] == [16, 16, 2]
    first = chunks[0]
    assert first.text == "1 A\n\n" + words("a", 10) + "\n\n2 B\n\nb0 b1"
    assert (first.page_start, first.page_end) == (1, 2)
    assert first.section == "1 A"  # 3 + 29 chars in "1 A" vs 3 + 5 in "2 B"
    assert (chunks[1].page_start, chunks[1].page_end, chunks[1].section) == (2, 2, "2 B")


# ------------------------------------------------------------------ sentence


def six(i: int) -> str:
    """A sentence of exactly six whitespace tokens."""
    return f"S{i} one two three four five."


def test_sentence_packing_by_hand():
    p = paper([Block(1, "body", "", " ".join(six(i) for i in range(5)))])
    pt, chunks = run(p, strategy="sentence", max_tokens=16, overlap_sentences=0)
    # 6-token sentences under a 16-token cap: 2 + 2 + 1 sentences.
    assert [c.text for c in chunks] == [
        f"{six(0)} {six(1)}",
        f"{six(2)} {six(3)}",
        six(4),
    ]
    assert [c.n_tokens for c in chunks] == [12, 12, 6]
    _, ov = run(p, strategy="sentence", max_tokens=16, overlap_sentences=1)
    assert [c.text for c in ov] == [f"{six(i)} {six(i + 1)}" for i in range(4)]
    for c in chunks + ov:
        assert pt.text[c.char_start : c.char_end] == c.text


def test_sentence_longer_than_cap_is_cut_at_words():
    p = paper([Block(1, "body", "", six(0) + " " + words("X", 39) + ". " + six(1))])
    _, chunks = run(p, strategy="sentence", max_tokens=16)
    # 6 | 39 = 16 + 16 + 7 (hard windows, no overlap) | 6
    assert [c.n_tokens for c in chunks] == [6, 16, 16, 7, 6]
    assert chunks[1].text == words("X", 16)
    assert chunks[3].text == words("X", 7, 32) + "."


def test_sentence_windows_pack_whole_blocks_across_pages():
    # No final period in the first block: the block end still ends the sentence.
    p = paper([Block(1, "body", "", "a b c"), Block(2, "body", "", "D e f.")])
    _, chunks = run(p, strategy="sentence", max_tokens=16)
    assert [c.text for c in chunks] == ["a b c\n\nD e f."]
    assert (chunks[0].page_start, chunks[0].page_end) == (1, 2)


# ------------------------------------------------------------------ section


SECTIONED = paper(
    [
        Block(1, "body", "", "Title of paper."),
        Block(1, "heading", "1 Intro", "1 Intro"),
        Block(1, "body", "1 Intro", six(0)),
        Block(2, "heading", "2 Proposed Method", "2 Proposed Method"),
        Block(2, "body", "2 Proposed Method", " ".join(six(i) for i in range(1, 5))),
        Block(3, "body", "2 Proposed Method", six(5)),
    ]
)


def test_section_chunks_never_cross_sections_and_carry_title():
    pt, chunks = run(SECTIONED, strategy="section", max_tokens=16, overlap_sentences=0)
    # Untitled front matter; "1 Intro" fits whole (2 + 6 tokens, starts with its heading so no
    # prefix); "2 Proposed Method" (3 + 30 tokens) is split by sentences under 16 - 3 (prefix
    # "2 Proposed Method\n\n") = 13 tokens: heading+S1 (9), S2+S3 (12 + 3), S4+S5 (12 + 3).
    m = "2 Proposed Method"
    assert [c.text for c in chunks] == [
        "Title of paper.",
        f"1 Intro\n\n{six(0)}",
        f"{m}\n\n{six(1)}",
        f"{m}\n\n{six(2)} {six(3)}",
        f"{m}\n\n{six(4)}\n\n{six(5)}",
    ]
    assert [c.section for c in chunks] == ["", "1 Intro", m, m, m]
    assert [c.n_tokens for c in chunks] == [3, 8, 9, 15, 15]
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 1), (1, 1), (2, 2), (2, 2), (2, 3)]
    for c in chunks:
        body = pt.text[c.char_start : c.char_end]
        assert c.text in (body, f"{c.section}\n\n{body}")
        inside = [s for s in pt.spans if s.start < c.char_end and s.end > c.char_start]
        assert {s.section for s in inside} == {c.section}


def test_section_overlap_repeats_one_sentence_inside_the_section():
    _, chunks = run(SECTIONED, strategy="section", max_tokens=16, overlap_sentences=1)
    m = "2 Proposed Method"
    # Cap 13 after the prefix: [H, S1], then pairs sliding by one sentence; never into "1 Intro".
    assert [c.text for c in chunks[2:]] == [
        f"{m}\n\n{six(1)}",
        f"{m}\n\n{six(1)} {six(2)}",
        f"{m}\n\n{six(2)} {six(3)}",
        f"{m}\n\n{six(3)} {six(4)}",
        f"{m}\n\n{six(4)}\n\n{six(5)}",
    ]
    assert chunks[1].text == f"1 Intro\n\n{six(0)}"


def test_section_without_prefix_is_exact_slice():
    pt, chunks = run(
        SECTIONED,
        strategy="section",
        max_tokens=16,
        prefix_section_title=False,
        overlap_sentences=0,
    )
    assert all(pt.text[c.char_start : c.char_end] == c.text for c in chunks)
    # Without the prefix the cap is the full 16: heading + S1 + S2 = 3 + 6 + 6 = 15 fits.
    assert chunks[2].text == f"2 Proposed Method\n\n{six(1)} {six(2)}"
    assert [c.n_tokens for c in chunks] == [3, 8, 15, 12, 6]


def test_references_excluded_by_default_for_every_strategy():
    for strategy in ("fixed", "sentence", "section"):
        kw = {"strategy": strategy, "max_tokens": 16, "overlap_tokens": 0}
        _, chunks = run(MIXED, **kw)
        assert chunks and not any("Someone" in c.text for c in chunks)
        _, with_refs = run(MIXED, **kw, include_references=True)
        assert any("Someone" in c.text for c in with_refs)


# ------------------------------------------------------------------ conformance


@pytest.mark.parametrize("strategy", ["fixed", "sentence", "section"])
@pytest.mark.parametrize("doc", [MIXED, SECTIONED], ids=["mixed", "sectioned"])
def test_every_strategy_keeps_the_chunk_contract(strategy, doc):
    s = settings(strategy=strategy, max_tokens=16, overlap_tokens=4)
    chunker = ck.make_chunker(s, WS)
    assert chunker.name == strategy and chunker.settings == s
    pt = ck.paper_text(doc)
    chunks = chunker.chunk(pt, doc.paper_id)
    assert chunks
    assert [c.char_start for c in chunks] == sorted(c.char_start for c in chunks)
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    covered = set()
    for c in chunks:
        body = pt.text[c.char_start : c.char_end]
        assert c.text in (body, f"{c.section}\n\n{body}")
        assert c.strategy == strategy and c.paper_id == doc.paper_id
        assert c.n_tokens == WS.count([c.text])[0] <= 16
        assert 1 <= c.page_start <= c.page_end <= doc.n_pages
        covered.update(range(c.char_start, c.char_end))
    # Nothing but block separators is left out.
    missing = {i for i in range(len(pt.text)) if i not in covered and not pt.text[i].isspace()}
    assert missing == set()


# ------------------------------------------------------------------ ids


def test_ids_stable_and_parameter_sensitive():
    a = run(SECTIONED, strategy="sentence", max_tokens=16, overlap_sentences=0)[1]
    b = run(SECTIONED, strategy="sentence", max_tokens=16, overlap_sentences=0)[1]
    assert [c.chunk_id for c in a] == [c.chunk_id for c in b]
    assert len({c.chunk_id for c in a}) == len(a)
    assert all(len(c.chunk_id) == 16 and int(c.chunk_id, 16) >= 0 for c in a)
    # Same offsets, other parameters or paper: other ids.
    c = run(SECTIONED, strategy="sentence", max_tokens=16, overlap_sentences=1)[1]
    assert a[0].char_start == c[0].char_start and a[0].chunk_id != c[0].chunk_id
    other = paper(SECTIONED.blocks, pid="9999.99999")
    d = run(other, strategy="sentence", max_tokens=16, overlap_sentences=0)[1]
    assert a[0].chunk_id != d[0].chunk_id
    # The id is the documented hash.
    s0 = settings(strategy="sentence", max_tokens=16, overlap_sentences=0)
    params = {**s0.params(), "tokenizer": "whitespace"}
    assert a[0].chunk_id == ck.chunk_id(
        SECTIONED.paper_id, "sentence", params, a[0].char_start, a[0].char_end
    )


def test_fingerprint_tracks_settings_and_content_not_parse_time(monkeypatch):
    s = settings(strategy="fixed", max_tokens=16, overlap_tokens=4)
    base = cc.chunk_fingerprint([SECTIONED], s, WS)
    timed = ParsedPaper(
        paper_id=SECTIONED.paper_id,
        n_pages=SECTIONED.n_pages,
        blocks=SECTIONED.blocks,
        parse_seconds=9.5,
    )
    assert cc.chunk_fingerprint([timed], s, WS) == base
    other = settings(strategy="fixed", max_tokens=16, overlap_tokens=0)
    assert cc.chunk_fingerprint([SECTIONED], other, WS) != base
    edited = paper([*SECTIONED.blocks[:-1], Block(3, "body", "2 Proposed Method", six(6))])
    assert cc.chunk_fingerprint([edited], s, WS) != base

    class Other(tk.WhitespaceTokenizer):
        name = "other"

    assert cc.chunk_fingerprint([SECTIONED], s, Other()) != base
    monkeypatch.setattr(cc, "CHUNKER_VERSION", "999")
    assert cc.chunk_fingerprint([SECTIONED], s, WS) != base


# ------------------------------------------------------------------ corpus and cache


def test_chunk_corpus_caches_byte_identical_and_skips_failed(tmp_cache, caplog):
    failed = ParsedPaper(paper_id="bad", n_pages=0, status="corrupt", error="xref broken")
    papers = [SECTIONED, failed, paper(MIXED.blocks, pid="0000.00002")]
    s = settings(strategy="section", max_tokens=16)
    first = cc.chunk_corpus(papers, s, tokenizer=WS)
    assert "bad" in caplog.text
    assert {c.paper_id for c in first} == {SECTIONED.paper_id, "0000.00002"}
    fp = cc.chunk_fingerprint(papers, s, WS)
    assert fp == cc.chunk_fingerprint([SECTIONED, papers[2]], s, WS)  # failed parses add nothing
    path = cc.chunks_path(fp)
    assert path.parent == Path(tmp_cache) / "chunks"
    raw = path.read_bytes()
    meta = json.loads(raw.splitlines()[0])["_meta"]
    assert meta["n_chunks"] == len(first) and meta["settings"]["strategy"] == "section"
    assert cc.chunk_corpus(papers, s, tokenizer=WS) == first  # from the cache
    path.unlink()
    assert cc.chunk_corpus(papers, s, tokenizer=WS) == first
    assert path.read_bytes() == raw


def test_stages_take_settings_parsed_at_the_door(tmp_cache):
    """Chunking, fingerprints, index builds and pipelines take ChunkSettings only: a raw mapping
    is refused with its type named, so settings are parsed once (by chunk_settings) at a door."""
    from rag.index.build import index_corpus
    from rag.index.folder import folder_root
    from rag.index.pipeline import run_pipeline

    raw = {"strategy": "section", "max_tokens": 16}
    calls = [
        lambda: ck.make_chunker(raw, WS),
        lambda: cc.chunk_corpus([SECTIONED], raw, tokenizer=WS),
        lambda: cc.chunk_fingerprint([SECTIONED], raw, WS),
        lambda: index_corpus([SECTIONED], raw, embedder=None, show_progress=False),
        lambda: run_pipeline(tmp_cache, chunking=raw),
        lambda: folder_root(tmp_cache, "minilm", raw),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=r"takes ChunkSettings, got dict .*chunk_settings"):
            call()
    parsed = settings(**raw)
    assert cc.chunk_corpus([SECTIONED], parsed, tokenizer=WS)
    # None where a stage offers a default: the default settings, the same folder as explicit ones
    assert folder_root(tmp_cache, "minilm", None) == folder_root(tmp_cache, "minilm", settings())
    assert folder_root(tmp_cache, "minilm", parsed) != folder_root(tmp_cache, "minilm", None)


def test_the_service_checks_its_chunk_settings_at_loading():
    from rag.serve.config import LabSettings

    lab = LabSettings(chunk_strategy="sentence", max_tokens=128, overlap_tokens=8)
    assert lab.chunking() == settings(strategy="sentence", max_tokens=128, overlap_tokens=8)
    assert isinstance(lab.chunking(), ck.ChunkSettings)
    with pytest.raises(ChunkError, match="chunk_strategy|strategy='paragraph'"):
        LabSettings(chunk_strategy="paragraph")  # a bad profile fails when it is loaded


def test_load_chunks_rejects_corrupt_file(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"_meta": {}}\n{"chunk_id": 1}\n')
    with pytest.raises(ChunkError, match="x.jsonl"):
        cc.load_chunks(bad)
    with pytest.raises(ChunkError, match="missing.jsonl"):
        cc.load_chunks(tmp_path / "missing.jsonl")


# ------------------------------------------------------------------ evidence


def test_evidence_intact_depends_on_overlap():
    p = paper([Block(1, "body", "", words("w", 40))])
    quote = "w18 w19 w20 w21"  # straddles the 20-token boundary
    items = [
        EvidenceItem("gold", "q1", p.paper_id, quote, 1),
        EvidenceItem("gold", "q2", "other", "w1", 1),
    ]
    _, no_ov = run(p, strategy="fixed", max_tokens=20, overlap_tokens=0)
    recs = evidence_intact(no_ov, items, threshold=100.0)
    assert [(r.qid, r.intact, r.n_paper_chunks) for r in recs.itertuples()] == [
        ("q1", False, 2),
        ("q2", False, 0),
    ]
    assert intact_rate(recs) == 0.0
    _, ov = run(p, strategy="fixed", max_tokens=20, overlap_tokens=4)
    recs = evidence_intact(ov, items, threshold=100.0)
    # Windows w0..w19, w16..w35, w32..w39: the second holds the quote.
    assert recs.loc[0, "intact"] and recs.loc[0, "chunk_id"] == ov[1].chunk_id
    assert intact_rate(recs) == 0.5
    assert intact_rate(evidence_intact(ov, [])) is None


def test_bench_chunk_reports_each_setting(capsys):
    out = bc.bench_chunk(
        [SECTIONED],
        [{"strategy": "fixed", "max_tokens": 16, "overlap_tokens": 0}, {"strategy": "section"}],
        tokenizer=WS,
    )
    assert [r["strategy"] for r in out["rows"]] == ["fixed", "section"]
    # 3 + 2 + 6 + 3 + 24 + 6 = 44 tokens -> windows of 16, 16, 12.
    assert out["rows"][0]["chunks"] == 3
    assert out["rows"][1]["chunks"] == 3  # one per section under the default cap
    assert "chunks/s" in capsys.readouterr().out


# ------------------------------------------------------------------ real tokenizer


@pytest.fixture(scope="module")
def minilm():
    return tk.default_tokenizer()


def test_minilm_offsets_slice_the_text(minilm):
    text = "The unbelievably efficient retriever (Karpukhin et al., 2020) reaches 78.4% accuracy."
    toks = minilm.encode(text)
    # "unbelievably" is several word pieces; only the first starts a word.
    pieces = [text[a:b] for a, b in zip(toks.starts, toks.ends, strict=True)]
    i = pieces.index("un")
    assert toks.word_start[i] and not toks.word_start[i + 1]
    assert "".join(pieces[i : pieces.index("efficient")]) == "unbelievably"
    assert minilm.count([text]) == [len(toks)]
    # Fingerprints name the default tokenizer without loading it, identically.
    assert tk.tokenizer_id(None) == tk.tokenizer_id(minilm)
    assert tk.tokenizer_id(None).startswith(tk.EMBED_MODEL_ID + "|tokenizers==")


def test_minilm_fixed_windows_count_and_never_split_words(minilm):
    # Common words are single word pieces, so the hand count holds for the real tokenizer too.
    body = " ".join(["the cat sat on the mat"] * 7)  # 42 tokens
    p = paper([Block(1, "body", "", body)])
    pt = ck.paper_text(p)
    s = settings(strategy="fixed", max_tokens=16, overlap_tokens=4)
    chunks = ck.make_chunker(s, minilm).chunk(pt, p.paper_id)
    assert [c.n_tokens for c in chunks] == [16, 16, 16, 6]  # starts 0, 12, 24, 36
    long = "An unbelievably uncharacteristically overparameterised retriever. " * 12
    p2 = paper([Block(1, "body", "", long.strip())])
    pt2 = ck.paper_text(p2)
    for strategy in ("fixed", "sentence", "section"):
        kw = {"overlap_tokens": 4} if strategy == "fixed" else {}
        cs = ck.make_chunker(settings(strategy=strategy, max_tokens=16, **kw), minilm).chunk(
            pt2, p2.paper_id
        )
        for c in cs:
            assert c.text == pt2.text[c.char_start : c.char_end]
            assert c.char_start == 0 or pt2.text[c.char_start - 1] == " "
            assert c.n_tokens <= 16 and c.n_tokens == minilm.count([c.text])[0]


# ------------------------------------------------------------------ real corpus (slow)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["fixed", "sentence", "section"])
def test_real_papers_invariants(shared_dir, minilm, strategy):
    from rag.corpus import parse

    pdfs = sorted((shared_dir / "corpus" / "pdfs").glob("*.pdf"))[:5]
    s = settings(strategy=strategy)
    chunker = ck.make_chunker(s, minilm)
    for pdf in pdfs:
        parsed = parse.parse_pdf(pdf, parse.ParseSettings())
        pt = ck.paper_text(parsed)
        chunks = chunker.chunk(pt, parsed.paper_id)
        assert chunks, pdf.name
        for c in chunks:
            body = pt.text[c.char_start : c.char_end]
            assert c.text in (body, f"{c.section}\n\n{body}")
            assert c.n_tokens <= s.max_tokens
            assert 1 <= c.page_start <= c.page_end <= parsed.n_pages
        if strategy == "fixed":
            # Consecutive windows overlap, so the windows cover the whole text.
            for a, b in zip(chunks, chunks[1:], strict=False):
                assert b.char_start < a.char_end


@pytest.mark.slow
def test_real_corpus_evidence_survives_chunking(shared_dir, minilm, tmp_cache):
    """Gold quotes found intact in one chunk (measured 0.96-0.99 per strategy; see report)."""
    from rag.corpus import parse
    from rag.evaluation.gold import evidence_items, load_gold

    manifest = [json.loads(x) for x in (shared_dir / "corpus" / "manifest.jsonl").open()]
    items = evidence_items(load_gold(shared_dir / "gold" / "dev.jsonl"))
    papers = [
        parse.load_parsed(
            shared_dir / "corpus" / "pdfs" / f"{m['arxiv_id']}.pdf",
            m["sha256"],
            parse.ParseSettings(),
        )
        for m in manifest
    ]
    for strategy in ("fixed", "sentence", "section"):
        chunks = cc.chunk_corpus(papers, settings(strategy=strategy), tokenizer=minilm)
        rate = intact_rate(evidence_intact(chunks, items))
        assert rate is not None and rate >= 0.93, (strategy, rate)
