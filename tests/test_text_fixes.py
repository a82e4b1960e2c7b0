"""Hygiene's repairs of kept chunks: TOC runs inside a body chunk cut, block-boundary hyphen
splits joined when the paper spells the word, everything else left byte for byte.

Expected texts are written by hand from the rules in ``rag.text.hygiene`` and
``rag.text.hyphens``; the run below is the Self-RAG chunk ``rag ask`` showed as a source.
"""

from __future__ import annotations

from collections import Counter

from rag.text.hygiene import repair_chunks, split_body, strip_toc_runs
from rag.text.hyphens import join_splits, vocabulary
from rag.types import Chunk

SELF_RAG_RUN = """. . . . . . . . . . . . . . . . . . 20
C Results
20
C.1 Analysis . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . 20
C.2 Human Evaluation Examples . . . . . . . . . . . . . . . . . . . . . 21
C.3 Qualitative Examples . . . . . . . . . . . . . . . . . . . . . . . . 21
D Full List of Instructions and Demonstrations for GPT-4 21"""
SELF_RAG_BODY = """A SELF-RAG DETAILS

A.1 REFLECTION TOKENS.

Definitions of reflection tokens. Below, we provide a detailed definition of reflection type and
output tokens. The first three aspects will be provided at each segment level."""

PLAIN = """Dense retrievers encode questions and passages with two towers, and rank by inner
product. Sparse methods such as BM25 remain strong baselines (Table 2, row 3).

Figure 4: Recall at 5, 10 and 20 for the three retrievers."""

AXIS_LABELS = "\n".join(["Layer pairs", "5 vs. 6", "12 vs. 13", "21 vs. 22", "31 vs. 32"])


def _chunk(cid: str, text: str, paper: str = "p") -> Chunk:
    return Chunk(cid, paper, "fixed", text, "S", 1, 1, 0, len(text), len(text.split()))


# -- TOC runs ------------------------------------------------------------------------------------


def test_a_toc_run_before_the_body_is_cut_and_the_body_kept_verbatim():
    text, runs = strip_toc_runs(SELF_RAG_RUN + "\n\n" + SELF_RAG_BODY)
    assert text == SELF_RAG_BODY
    assert runs == [SELF_RAG_RUN]
    assert runs[0].startswith(". . .") and runs[0].endswith("GPT-4 21")


def test_a_toc_run_between_body_paragraphs_leaves_one_break():
    text, runs = strip_toc_runs(f"{PLAIN}\n\nContents\n{SELF_RAG_RUN}\n\n{SELF_RAG_BODY}")
    assert text == f"{PLAIN}\n\n{SELF_RAG_BODY}"
    assert len(runs) == 1 and runs[0].startswith("Contents\n")


def test_a_toc_run_that_ends_the_chunk_goes_with_the_break_before_it():
    cut = "CONTENTS\n1 Introduction\n4\n2.1 Task Formulation . . . . . . . . 5\n2.3 Setup . . ."
    text, runs = strip_toc_runs(f"{PLAIN}\n\n{cut}")
    assert text == PLAIN and runs == [cut]


def test_text_without_a_run_comes_back_unchanged():
    for t in (PLAIN, SELF_RAG_BODY, AXIS_LABELS, "", "Total . . . . 12"):
        assert strip_toc_runs(t) == (t, [])


def test_numbered_lines_without_a_leader_or_contents_line_are_not_a_run():
    # "5 vs. 6" has the shape "<number> <title> <number>", as table rows and axis labels do.
    assert strip_toc_runs(f"{PLAIN}\n{AXIS_LABELS}") == (f"{PLAIN}\n{AXIS_LABELS}", [])


# -- hyphen splits -------------------------------------------------------------------------------


def test_a_split_word_the_paper_spells_whole_is_joined():
    vocab = vocabulary(["Multi-head attention attends to every token."])
    text, joins = join_splits("the atten-\n\ntion weights", vocab)
    assert text == "the attention weights"
    assert [(j.before, j.after) for j in joins] == [("atten-\n\ntion", "attention")]


def test_a_compound_the_paper_hyphenates_keeps_its_hyphen():
    vocab = vocabulary(["self-attention layers", "self-attention is cheap", "attention"])
    assert join_splits("a self-\n\nattention layer", vocab)[0] == "a self-attention layer"
    vocab = vocabulary(["state-of-the-art results"])
    assert join_splits("state-of-the-\n\nart", vocab)[0] == "state-of-the-art"


def test_a_split_without_evidence_or_with_one_letter_is_left_alone():
    vocab = vocabulary(["pi is a number", "best and worst-case", "GPT-4"])
    for t in ("best-\n\nand worst-case bounds", "p-\n\ni", "GPT-\n\n4", "foo-\n\nbar"):
        assert join_splits(t, vocab) == (t, [])
    # a hyphen before a space is a suspended compound, not a line break
    assert join_splits("best- and worst-case", Counter({"bestand": 3})) == (
        "best- and worst-case",
        [],
    )


def test_text_without_a_split_comes_back_unchanged():
    vocab = vocabulary([PLAIN])
    assert join_splits(PLAIN, vocab) == (PLAIN, [])


# -- chunks --------------------------------------------------------------------------------------


def test_repairs_read_each_papers_own_vocabulary_and_keep_ids():
    a = _chunk("a1", "The atten-\n\ntion weights.", paper="A")
    a2 = _chunk("a2", "Scaled dot-product attention.", paper="A")
    b = _chunk("b1", "The atten-\n\ntion weights.", paper="B")  # B never spells "attention"
    out, repairs = repair_chunks([a, a2, b])
    assert [c.chunk_id for c in out] == ["a1", "a2", "b1"]
    assert [c.text for c in out] == ["The attention weights.", a2.text, b.text]
    assert out[1] is a2 and out[2] is b
    assert [(r.chunk_id, [j.after for j in r.joins]) for r in repairs] == [("a1", ["attention"])]


def test_split_body_repairs_kept_chunks_and_counts_a_chunk_that_was_only_a_run_as_toc():
    two_entries = "C.1 Analysis . . . . . . . . 20\nC.2 Examples . . . . . . . . 21"
    cs = [
        _chunk("c0", SELF_RAG_RUN + "\n\n" + SELF_RAG_BODY),
        _chunk("c1", PLAIN),
        _chunk("c2", two_entries),  # two TOC lines: below the chunk rule's three, a run
    ]
    kept, counts = split_body(cs)
    assert [c.chunk_id for c in kept] == ["c0", "c1"]
    assert kept[0].text == SELF_RAG_BODY and kept[1] is cs[1]
    assert counts == {"toc": 1, "references": 0, "body": 2}
    raw, raw_counts = split_body(cs, repair=False)
    assert raw == cs and raw_counts == {"toc": 0, "references": 0, "body": 3}
    assert split_body(cs, enabled=False) == (cs, {"toc": 0, "references": 0, "body": 3})


def test_the_index_build_caches_the_repaired_texts(tmp_cache, monkeypatch):
    """A warm build serves the repaired texts from the hygiene cache without classifying or
    repairing again."""
    from rag.index import build

    cs = [_chunk("c0", SELF_RAG_RUN + "\n\n" + SELF_RAG_BODY), _chunk("c1", PLAIN)]
    first = build.body_chunks(cs, "fp-fixes")
    assert first == split_body(cs) and first[0][0].text == SELF_RAG_BODY

    def no_work(*a, **k):
        raise AssertionError("classified again")

    monkeypatch.setattr(build, "split_body", no_work)
    assert build.body_chunks(cs, "fp-fixes") == first
