"""rag.text.hygiene: tables of contents and stray reference lists stay out of the corpus index.

The classifier is read on small hand-written texts (expected labels from the module's stated
rules: a majority of the characters in TOC or reference lines, and minimum counts); the index
build is checked to drop those chunks, record what it dropped and cache under a fingerprint that
names the setting; ``index_hygiene=False`` is checked to index every chunk as before; and the
paper desk's reference reader (parse blocks, not chunks) is checked to still find the entries.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rag.index.build import index_corpus, indexed_fingerprint
from rag.papers.references import paper_references
from rag.papers.resolve import TitleMatcher
from rag.text.chunk import chunk_settings
from rag.text.chunk_cache import chunk_corpus, chunk_fingerprint
from rag.text.hygiene import (
    HYGIENE_VERSION,
    MIN_TOC_LINES,
    classify,
    decide,
    signals,
    split_body,
)
from rag.types import Block, Chunk, ParsedPaper
from tests.test_index_build import CountingEmbedder

TOC = """Contents
1 Introduction 3
2 Related Work . . . . . . . . . . . . . . . . . . . . . . . . 4
2.1 Dense retrieval . . . . . . . . . . . . . . . . . . . . . . 4
2.2 Sparse retrieval ............................................ 5
3 Method . . . . . . . . . . . . . . . . . . . . . . . . . . . 7
3.1 Training objective . . . . . . . . . . . . . . . . . . . . 8"""

ACL_REFERENCES = """Ashish Vaswani, Noam Shazeer, Niki Parmar, Jakob
Uszkoreit, Llion Jones, Aidan N Gomez, Lukasz Kaiser, and Illia Polosukhin. 2017. Attention is all
you need. In Advances in Neural Information Processing Systems, pages 5998-6008.
Alex Wang, Amanpreet Singh, Julian Michael, Felix
Hill, Omer Levy, and Samuel R. Bowman. 2019. GLUE: A multi-task benchmark and analysis platform
for natural language understanding. In International Conference on Learning Representations.
Zhilin Yang, Zihang Dai, Yiming Yang, Jaime Carbonell, Ruslan Salakhutdinov, and Quoc V Le.
2019. Xlnet: Generalized autoregressive pretraining for language understanding. arXiv preprint
arXiv:1906.08237."""

NUMBERED_REFERENCES = """[1] A. Vaswani, N. Shazeer, N. Parmar, et al., Attention is all you need,
in Proceedings of NeurIPS, 2017.
[2] J. Devlin, M. Chang, K. Lee, K. Toutanova, BERT: pre-training of deep bidirectional
transformers for language understanding, arXiv preprint arXiv:1810.04805, 2018.
[3] S. Robertson, H. Zaragoza, The probabilistic relevance framework: BM25 and beyond,
Foundations and Trends in Information Retrieval, 3(4), pp. 333-389, 2009.
[4] V. Karpukhin, B. Oguz, S. Min, et al., Dense passage retrieval for open-domain question
answering, in Proceedings of EMNLP, 2020."""

BODY_WITH_CITATIONS = """Dense retrievers encode questions and passages with two towers [3], and
rank by inner product [12, 14]. Sparse methods such as BM25 [7] remain strong baselines on
out-of-domain data (Thakur et al., 2021), and hybrids fuse both rankings (Lin et al., 2021; Ma et
al., 2022). [3] also reports that the dual encoder needs hard negatives."""

BODY_WITH_DOTS = """We wait... and then the model answers. The loss falls from 2.1 to 1.4 . . . a
drop seen in every run. Table 3 lists the scores . . . . for each of the 12 tasks, and
Section 4.2 discusses why the gap closes after 3 epochs."""

BODY_WITH_ONE_ENTRY = """We release the code and the data. Our evaluation shows that the predictions
from the framework are closely aligned with human judgements, especially for faithfulness and
answer relevance, across every domain we tried, and the gap to the baselines holds when the
retriever changes. We leave multilingual evaluation to future work, as the judgements we
collected are in English only and the prompts were written for English.
Ori Ram, Yoav Levine, Itay Dalmedigos. 2023. In-context retrieval-augmented language models.
CoRR, abs/2302.00083."""


@pytest.mark.parametrize(
    ("text", "section", "label"),
    [
        (TOC, "", "toc"),
        (ACL_REFERENCES, "A Appendix", "references"),
        (NUMBERED_REFERENCES, "", "references"),
        (BODY_WITH_CITATIONS, "2 Related Work", "body"),
        (BODY_WITH_DOTS, "4 Results", "body"),
        (BODY_WITH_ONE_ENTRY, "6 Conclusions", "body"),
        ("", "", "body"),
    ],
)
def test_classify_reads_toc_references_and_body(text, section, label):
    assert classify(text, section) == label


def test_two_dotted_lines_are_not_a_toc_but_three_are():
    lines = [f"{i} Part {'ABCD'[i]} . . . . . . . . . . . . {10 + i}" for i in range(4)]
    assert MIN_TOC_LINES == 3
    assert classify("\n".join(lines[:2])) == "body"
    assert classify("\n".join(lines[:3])) == "toc"


def test_a_toc_that_ends_a_chunk_before_a_long_introduction_stays_body():
    intro = " ".join(["Retrieval-augmented generation grounds answers in passages."] * 12)
    assert classify(TOC) == "toc"
    s = signals(TOC + "\n1 Introduction\n" + intro)
    assert s.toc_lines >= 3 and s.toc_share < 0.5
    assert classify(TOC + "\n1 Introduction\n" + intro) == "body"


def test_a_majority_names_the_chunk_not_a_near_total():
    tail = "\nThe appendix follows with the proofs of both theorems and every prompt we used."
    assert 0.5 < signals(TOC + tail).toc_share < 0.9
    assert classify(TOC + tail) == "toc"
    assert 0.5 < signals(ACL_REFERENCES + tail).ref_share < 0.9
    assert classify(ACL_REFERENCES + tail, "A Appendix") == "references"
    s = signals(TOC)
    assert decide(replace(s, toc_share=0.5)) == "toc"
    assert decide(replace(s, toc_share=0.49)) == "body"


def test_the_references_heading_lowers_the_bar_but_alone_is_not_enough():
    one_entry = "Ori Ram, Yoav Levine, and Amnon Shashua. 2023. In-context RALM. CoRR."
    assert classify(one_entry, "A Appendix") == "body"  # 2 strong signals < 3
    assert classify(one_entry, "References") == "references"
    caption = "Figure 9: Proportion of tokens assigned to each expert on different domains."
    assert classify(caption, "References") == "body"  # a caption the page put after the heading


def _chunk(cid: str, text: str, section: str = "S") -> Chunk:
    return Chunk(cid, "p", "fixed", text, section, 1, 1, 0, len(text), len(text.split()))


def test_split_body_keeps_order_and_counts_and_off_keeps_everything():
    cs = [_chunk("a", BODY_WITH_CITATIONS), _chunk("b", TOC), _chunk("c", ACL_REFERENCES),
          _chunk("d", BODY_WITH_DOTS)]  # fmt: skip
    kept, counts = split_body(cs)
    assert [c.chunk_id for c in kept] == ["a", "d"]
    assert counts == {"toc": 1, "references": 1, "body": 2}
    everything, off = split_body(cs, enabled=False)
    assert everything == cs and off == {"toc": 0, "references": 0, "body": 4}


# -- the index build ---------------------------------------------------------------------------

INTRO = " ".join(
    f"Sentence {i} explains how dense and sparse retrieval rank passages." for i in range(12)
)
ENTRIES = [
    "[1] A. Vaswani, N. Shazeer, et al., Attention is all you need, in NeurIPS, 2017.",
    "[2] J. Devlin, M. Chang, BERT: pre-training of deep bidirectional transformers, 2019.",
    "[3] S. Robertson, H. Zaragoza, The probabilistic relevance framework: BM25 and beyond, 2009.",
]


def _paper() -> ParsedPaper:
    """A paper with a TOC section, a body section, a leaked reference list under an appendix
    heading (kind body, as the parser leaves it) and a proper References section."""
    return ParsedPaper(
        "2401.00002",
        3,
        [
            Block(1, "heading", "Contents", "Contents"),
            Block(1, "body", "Contents", TOC.split("\n", 1)[1]),
            Block(1, "heading", "1 Introduction", "1 Introduction"),
            Block(1, "body", "1 Introduction", INTRO),
            Block(2, "heading", "A Appendix", "A Appendix"),
            Block(2, "body", "A Appendix", ACL_REFERENCES),
            Block(3, "heading", "References", "References"),
            *[
                Block(
                    3, "references", "References", e, (72.0, 100.0 + 12 * i, 300.0, 110.0 + 12 * i)
                )
                for i, e in enumerate(ENTRIES)
            ],  # fmt: skip
        ],
    )


SECTION = chunk_settings({"strategy": "section", "max_tokens": 254, "overlap_sentences": 0})


def test_index_build_drops_toc_and_references_and_records_the_counts(tmp_cache):
    emb = CountingEmbedder()
    parsed = [_paper()]
    all_chunks = chunk_corpus(parsed, SECTION)
    sections = {c.section for c in all_chunks}
    assert {"Contents", "1 Introduction", "A Appendix"} <= sections
    ix = index_corpus(parsed, SECTION, embedder=emb, show_progress=False)
    assert {c.section for c in ix.chunks} == {"1 Introduction"}
    assert set(ix.dense.ids) == set(ix.bm25.ids) == {c.chunk_id for c in ix.chunks}
    assert set(emb.encoded) == {c.text for c in ix.chunks}  # dropped chunks are never embedded
    assert ix.stats["chunks_before_hygiene"] == len(all_chunks)
    assert ix.stats["hygiene_dropped_toc"] == 1
    assert ix.stats["hygiene_dropped_references"] == 1
    assert ix.stats["chunks"] == len(all_chunks) - 2
    assert ix.stats["index_hygiene"] is True and ix.stats["hygiene_version"] == HYGIENE_VERSION
    fp = chunk_fingerprint(parsed, SECTION)
    assert ix.chunk_fingerprint == indexed_fingerprint(fp, True) != fp


def test_index_hygiene_off_indexes_every_chunk_as_before(tmp_cache):
    emb = CountingEmbedder()
    parsed = [_paper()]
    off = SECTION.model_copy(update={"index_hygiene": False})
    all_chunks = chunk_corpus(parsed, SECTION)
    ix = index_corpus(parsed, off, embedder=emb, show_progress=False)
    assert [c.chunk_id for c in ix.chunks] == [c.chunk_id for c in all_chunks]
    assert ix.chunk_fingerprint == chunk_fingerprint(parsed, SECTION)  # the pre-hygiene key
    assert ix.stats["hygiene_dropped_toc"] == ix.stats["hygiene_dropped_references"] == 0
    assert ix.stats["index_hygiene"] is False and ix.stats["hygiene_version"] is None
    # The setting is not part of the chunks: same ids, same chunk fingerprint, one chunk cache.
    assert chunk_fingerprint(parsed, off) == chunk_fingerprint(parsed, SECTION)
    assert chunk_corpus(parsed, off) == all_chunks
    # ...but it is part of the index key: turning it on builds other indexes, re-embedding nothing.
    n = len(emb.encoded)
    on = index_corpus(parsed, SECTION, embedder=emb, show_progress=False)
    assert len(emb.encoded) == n and on.chunk_fingerprint != ix.chunk_fingerprint
    assert len(on.chunks) == len(ix.chunks) - 2


def test_index_hygiene_is_a_chunk_setting_with_default_on():
    assert chunk_settings({}).index_hygiene is True
    assert "index_hygiene" not in chunk_settings({}).params()  # not in chunk ids


def test_the_paper_desk_still_reads_the_references(tmp_cache):
    parsed = _paper()
    index_corpus([parsed], SECTION, embedder=CountingEmbedder(), show_progress=False)
    refs = paper_references(parsed)
    assert [r.label for r in refs] == ["1", "2", "3"]
    from rag.papers.graph import paper_citations

    matcher = TitleMatcher({"1706.03762": "Attention Is All You Need"})
    assert [c.cited for c in paper_citations(parsed, matcher)] == ["1706.03762"]


def test_weight_counts_what_isspace_calls_non_space():
    """The fast count (``str.split``) agrees with the definition on every kind of space."""
    from rag.text.hygiene import _weight

    odd = ["", " ", "a b", "\u00a0x\u2003y\u3000", "\x1c\x1d\x1e\x1fz", "t\tn\nr\r\x0b\x0c",
           "\u200bzero-width", "\u2028\u2029\x85end", "".join(map(chr, range(0x3100)))]  # fmt: skip
    for text in odd:
        assert _weight(text) == sum(not ch.isspace() for ch in text), repr(text)


# -- the measurement's bookkeeping ---------------------------------------------------------------


def test_validation_scores_labels_and_skips_stale_ones():
    from rag.bench.hygiene import labelling_sample, text_sha256, validate

    cs = [_chunk("toc", TOC), _chunk("refs", ACL_REFERENCES), _chunk("body", BODY_WITH_DOTS),
          _chunk("mixed", ACL_REFERENCES + "\n" + INTRO)]  # fmt: skip
    sample = labelling_sample(cs, n_near=1, n_random=1)
    assert [(s, c.chunk_id) for s, c in sample][:2] == [("flagged", "toc"), ("flagged", "refs")]
    assert {s for s, _ in sample[2:]} == {"near_miss", "random"}
    labels = [
        {"chunk_id": "toc", "stratum": "flagged", "label": "toc", "text_sha256": text_sha256(TOC)},
        {"chunk_id": "refs", "stratum": "flagged", "label": "body",
         "text_sha256": text_sha256(ACL_REFERENCES)},
        {"chunk_id": "mixed", "stratum": "near_miss", "label": "references",
         "text_sha256": text_sha256(ACL_REFERENCES + "\n" + INTRO)},
        {"chunk_id": "body", "stratum": "random", "label": "body", "text_sha256": "edited"},
    ]  # fmt: skip
    v = validate(cs, labels)
    assert v["stale_labels"] == ["body"] and v["scored"] == 3
    assert (v["dropped_precision"]["k"], v["dropped_precision"]["n"]) == (1, 2)
    assert (v["dropped_recall_on_sample"]["k"], v["dropped_recall_on_sample"]["n"]) == (1, 2)
    assert v["strata"]["near_miss"]["missed_non_body"] == 1
    assert v["dropped_precision"]["wilson_low"] < 0.5 < v["dropped_precision"]["wilson_high"]


def test_the_committed_labels_are_well_formed():
    from rag.bench.hygiene import load_labels

    labels = load_labels()
    assert len(labels) >= 60
    assert len({lab["chunk_id"] for lab in labels}) == len(labels)
    for lab in labels:
        assert lab["label"] in ("toc", "references", "body")
        assert lab["stratum"] in ("flagged", "near_miss", "random")
        assert len(lab["text_sha256"]) == 64 and lab["why"]


def test_the_index_build_caches_the_labels_by_the_chunk_fingerprint(tmp_cache, monkeypatch):
    """A warm build reads which chunks are body from the cache instead of classifying again;
    an entry that does not fit the chunks it is asked about is recomputed."""
    from rag.index import build

    texts = [BODY_WITH_CITATIONS, ACL_REFERENCES, TOC, BODY_WITH_DOTS]
    chunks = [
        Chunk(f"c{i}", "p1", "fixed", t, "", 1, 1, 0, len(t), 50) for i, t in enumerate(texts)
    ]
    first = build.body_chunks(chunks, "fp-a")
    assert first == split_body(chunks) and [c.chunk_id for c in first[0]] == ["c0", "c3"]

    def no_classifying(*a, **k):
        raise AssertionError("classified again")

    monkeypatch.setattr(build, "split_body", no_classifying)
    assert build.body_chunks(chunks, "fp-a") == first
    with pytest.raises(AssertionError, match="classified again"):  # same key, other chunks
        build.body_chunks(chunks[:1], "fp-a")
    monkeypatch.undo()
    assert build.body_chunks(chunks, "fp-a", enabled=False)[0] == chunks
