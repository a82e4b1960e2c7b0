"""The citation graph and related work on tiny hand-built graphs, with counts derived by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag.errors import ConfigError
from rag.papers.graph import (
    citation_graph,
    cocitation,
    coupling,
    degrees,
    most_cited_outside,
    paper_links,
    read_citations,
    references_of,
    write_citations,
)
from rag.papers.related import leave_one_out_runs, paper_vectors, related, signal_runs
from rag.papers.resolve import Citation
from rag.types import Chunk

# Corpus a, b, c, d. a cites b, c and x (outside); b cites c and x; d cites b and c; c cites none.
EDGES = [("a", "b"), ("a", "c"), ("a", "x"), ("b", "c"), ("b", "x"), ("d", "b"), ("d", "c")]
CORPUS = ["a", "b", "c", "d"]


def _rows(edges=EDGES) -> list[Citation]:
    return [
        Citation(s, t, t in CORPUS, "arxiv_id", 1.0, i, f"ref {t}")
        for i, (s, t) in enumerate(edges, start=1)
    ]


def test_degrees_count_corpus_links_and_all_links():
    deg = degrees(citation_graph(_rows(), CORPUS))
    assert deg == {
        "a": {"in": 0, "out": 2, "out_all": 3},
        "b": {"in": 2, "out": 1, "out_all": 2},
        "c": {"in": 3, "out": 0, "out_all": 0},
        "d": {"in": 0, "out": 2, "out_all": 2},
    }
    assert most_cited_outside(_rows() + [Citation("c", "doi:10.1/z", False, "doi", 1, 1, "")]) == [
        ("x", 2)
    ]


def test_paper_links_lists_both_directions():
    links = paper_links(_rows(), "b", CORPUS)
    assert [(d["arxiv_id"], d["in_corpus"]) for d in links["cites"]] == [("c", True), ("x", False)]
    assert [d["arxiv_id"] for d in links["cited_by"]] == ["a", "d"]
    assert links["cites"][0] == {
        "arxiv_id": "c", "in_corpus": True, "how": "arxiv_id", "score": 1.0, "reference": "ref c"
    }  # fmt: skip
    json.dumps(links)
    with pytest.raises(ConfigError, match="'x'"):
        paper_links(_rows(), "x", CORPUS)


def test_cocitation_and_coupling_by_hand():
    refs = references_of(_rows())
    # c is cited with b by a and d; with x by a and b
    assert cocitation(refs, "c") == {"b": 2, "x": 2}
    # hiding a's list leaves d (b with c) and b (c with x)
    assert cocitation(refs, "c", hide="a") == {"b": 1, "x": 1}
    # a's list {b, c, x}: shares {c, x} with b and {b, c} with d
    assert coupling(refs, "a") == {"b": 2, "d": 2}
    assert coupling(refs, "c") == {}


def test_citations_round_trip_and_bad_files_are_named(tmp_path):
    path = write_citations(_rows(), tmp_path / "c" / "citations.jsonl")
    assert read_citations(path) == _rows()
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"citing", "cited", "in_corpus", "how", "score", "ref_index", "reference"}
    path.write_text('{"citing": "a"}\n')
    with pytest.raises(ConfigError, match="line 1"):
        read_citations(path)
    with pytest.raises(ConfigError, match="not found"):
        read_citations(tmp_path / "missing.jsonl")


def _vectors() -> dict[str, np.ndarray]:
    chunks = [
        Chunk(f"{p}{i}", p, "fixed", "t", "", 1, 1, 0, 1, 1) for p in CORPUS for i in range(2)
    ]
    # each paper's two chunks average to a known direction
    raw = {"a": [(1, 0), (1, 0)], "b": [(1, 1), (1, -1)], "c": [(0, 1), (0, 1)],
           "d": [(1, 1), (1, 1)]}  # fmt: skip
    vecs = np.array([v for p in CORPUS for v in raw[p]], dtype=np.float32)
    return paper_vectors(chunks, vecs)


def test_paper_vectors_are_unit_means():
    v = _vectors()
    assert np.allclose(v["b"], [1, 0]) and np.allclose(v["d"], [2**-0.5, 2**-0.5])
    with pytest.raises(ConfigError, match="aligned"):
        paper_vectors([], np.zeros((1, 2)))


def test_leave_one_out_hides_the_papers_own_list():
    refs = references_of(_rows())
    qrels, runs = leave_one_out_runs(CORPUS, _vectors(), refs)
    assert qrels == {"a": {"b": 1, "c": 1}, "b": {"c": 1}, "d": {"b": 1, "c": 1}}
    assert set(runs) == {"text", "cocitation", "popularity", "fusion"}  # no coupling
    # for a: co-citation of a is empty (nobody cites a); popularity without a's list:
    # b is cited by d, c by b and d
    assert runs["cocitation"]["a"] == {}
    assert runs["popularity"]["a"] == {"b": 1.0, "c": 2.0}
    # text for a = cosine with (1,0): b 1, d 0.7071, c 0
    assert runs["text"]["a"] == pytest.approx({"b": 1.0, "c": 0.0, "d": 2**-0.5})
    # fusion is RRF(k=60) of text (b, d, c) and co-citation (empty)
    assert runs["fusion"]["a"] == pytest.approx({"b": 1 / 61, "d": 1 / 62, "c": 1 / 63})


def test_fusion_is_the_projects_rrf_of_text_and_cocitation():
    refs = references_of(_rows())
    runs = signal_runs("b", CORPUS, _vectors(), refs, hide_own_references=True)
    # text for b (1,0): a 1, d 0.7071, c 0 ; co-citation of b (hiding b's list): a {c}, d {c}
    assert runs["cocitation"] == {"c": 2.0}
    assert runs["fusion"] == pytest.approx({"a": 1 / 61, "c": 1 / 63 + 1 / 61, "d": 1 / 62})
    assert list(runs["fusion"]) == ["c", "a", "d"]


def test_related_ranks_and_names_bad_input():
    refs = references_of(_rows())
    out = related("a", CORPUS, _vectors(), refs, method="coupling", k=5)
    assert out == [
        {"arxiv_id": "b", "score": 2.0, "rank": 1},
        {"arxiv_id": "d", "score": 2.0, "rank": 2},
    ]
    assert [r["arxiv_id"] for r in related("a", CORPUS, _vectors(), refs, method="text", k=1)] == [
        "b"
    ]
    with pytest.raises(ConfigError, match="'zz'"):
        related("zz", CORPUS, _vectors(), refs)
    with pytest.raises(ConfigError, match="'pagerank'"):
        related("a", CORPUS, _vectors(), refs, method="pagerank")
    with pytest.raises(ConfigError, match="k must"):
        related("a", CORPUS, _vectors(), refs, k=0)
