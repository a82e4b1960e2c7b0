"""rag.evaluation.compare: building the report's retrievers, running them, grading with hand values.

The runs are written by hand so every number is derived from the formula: nDCG@10 of one relevant
document at rank r is 1 / log2(r + 1), MRR@10 is 1 / r.
"""

from __future__ import annotations

import math

import pytest

from rag.errors import EvaluationError
from rag.evaluation.compare import build_retrievers, grade, latency_table, run_all
from rag.retrieval.retrievers import Components, QueryRuns, RetrievalSettings
from tests.test_retrieve import BruteDenseIndex, HashEmbedder, OverlapIndex, make_store

CHUNK_TO_PAPER = {"p1-c0": "P1", "p1-c1": "P1", "p2-c0": "P2", "p3-c0": "P3"}
#: q3 has no relevant chunk (grade 0 only): excluded and counted, never scored 0.
QRELS = {"q1": {"p1-c1": 1}, "q2": {"p2-c0": 1}, "q3": {"p3-c0": 0}}
PAPER_QRELS = {"q1": {"P1": 1}, "q2": {"P2": 1}, "q3": {"P3": 0}}


def runs(by_qid: dict[str, dict[str, float]], latency: dict[str, float]) -> QueryRuns:
    r = QueryRuns(by_qid)
    r.latency_ms = dict(latency)
    return r


# A: q1's relevant chunk at rank 2, q2's at rank 1.  B: q1's at rank 1, q2's at rank 3.
RUNS = {
    "A": runs(
        {
            "q1": {"p1-c0": 3.0, "p1-c1": 2.0, "p2-c0": 1.0},
            "q2": {"p2-c0": 3.0, "p1-c0": 1.0},
            "q3": {"p3-c0": 1.0},
        },
        {"q1": 1.0, "q2": 3.0, "q3": 2.0},
    ),
    "B": runs(
        {
            "q1": {"p1-c1": 5.0, "p3-c0": 1.0},
            "q2": {"p1-c0": 2.0, "p3-c0": 1.5, "p2-c0": 1.0},
            "q3": {"p3-c0": 1.0},
        },
        {"q1": 10.0, "q2": 20.0, "q3": 30.0},
    ),
}
R2 = 1 / math.log2(3)  # nDCG@10 of a single relevant document at rank 2
R3 = 1 / math.log2(4)  # ... at rank 3


def test_grade_chunk_level_by_hand():
    comp = grade("toy", RUNS, QRELS, metrics=("ndcg@10", "mrr@10", "recall@1"), n_resamples=200)
    a, b = comp.evals["A"], comp.evals["B"]
    assert (a.n, a.excluded) == (2, ["q3"]) and (b.n, b.excluded) == (2, ["q3"])
    assert a.per_query["ndcg@10"].to_dict() == pytest.approx({"q1": R2, "q2": 1.0})
    assert b.per_query["ndcg@10"].to_dict() == pytest.approx({"q1": 1.0, "q2": R3})
    assert a.aggregate["ndcg@10"].estimate == pytest.approx((R2 + 1) / 2)  # 0.8155
    assert b.aggregate["ndcg@10"].estimate == pytest.approx((1 + R3) / 2)  # 0.75
    assert a.aggregate["mrr@10"].estimate == pytest.approx((1 / 2 + 1) / 2)
    assert b.aggregate["mrr@10"].estimate == pytest.approx((1 + 1 / 3) / 2)
    assert a.aggregate["recall@1"].estimate == b.aggregate["recall@1"].estimate == 0.5
    # one pair, A - B on the primary metric; with two questions every sign flip is at least as
    # extreme as the observed mean difference, so the randomisation p-value is 1
    (row,) = comp.pairwise.to_dict("records")
    assert (row["a"], row["b"], row["n"]) == ("A", "B", 2)
    assert row["diff"] == pytest.approx((R2 + 1) / 2 - (1 + R3) / 2)
    assert row["p_value"] == pytest.approx(1.0, abs=1e-3) and not row["significant"]
    assert comp.primary == "ndcg@10" and comp.dataset == "toy"


def test_grade_paper_level_maxp_by_hand():
    # MaxP: A's q1 becomes {P1: 3, P2: 1} (P1 first), q2 {P2: 3, P1: 1}; B's q2 {P1: 2, P3: 1.5,
    # P2: 1} keeps P2 at rank 3
    comp = grade("toy", RUNS, PAPER_QRELS, metrics=("ndcg@10",), chunk_to_paper=CHUNK_TO_PAPER)
    assert comp.evals["A"].per_query["ndcg@10"].to_dict() == pytest.approx({"q1": 1.0, "q2": 1.0})
    assert comp.evals["B"].per_query["ndcg@10"].to_dict() == pytest.approx({"q1": 1.0, "q2": R3})
    assert comp.runs["A"] is RUNS["A"], "the chunk runs are kept as run; only grading changes"
    with pytest.raises(EvaluationError, match="'p1-c0' that is not among the chunks"):
        grade("toy", RUNS, PAPER_QRELS, chunk_to_paper={"p2-c0": "P2"})


def test_comparison_table_and_metrics_carry_skips_labels_and_latency():
    comp = grade(
        "toy",
        RUNS,
        QRELS,
        metrics=("ndcg@10",),
        n_resamples=200,
        skipped={"hyde": "needs components ['llm']"},
        labels={"A": "dense[hash]"},
    )
    t = comp.table()
    assert list(t.index) == ["A", "B"]
    assert t.loc["A", "component"] == "dense[hash]" and t.loc["B", "component"] == "B"
    assert t.loc["A", "n"] == 2 and t.loc["A", "ndcg@10"] == pytest.approx((R2 + 1) / 2)
    assert (t.loc["A", "p50 ms"], t.loc["B", "p50 ms"]) == (2.0, 20.0)
    m = comp.to_metrics()
    assert m["hyde"] == {"not_run": "needs components ['llm']"}
    assert (m["A"]["n"], m["A"]["excluded"], m["A"]["component"]) == (2, 1, "dense[hash]")
    assert m["B"]["latency_ms"]["max"] == 30.0 and m["B"]["latency_ms"]["n"] == 3
    assert m["A"]["ndcg@10"]["mean"] == pytest.approx((R2 + 1) / 2)


def test_one_run_has_no_pairwise_table():
    comp = grade("toy", {"A": RUNS["A"]}, QRELS, metrics=("ndcg@10",), n_resamples=200)
    assert comp.pairwise.empty and list(comp.evals) == ["A"]


def test_latency_table_by_hand():
    comps = {
        "toy": grade("toy", RUNS, QRELS, metrics=("ndcg@10",), n_resamples=200),
        "other": grade("other", {"B": RUNS["B"]}, QRELS, metrics=("ndcg@10",), n_resamples=200),
    }
    rows = latency_table(comps).to_dict("records")
    assert [(r["dataset"], r["retriever"]) for r in rows] == [
        ("toy", "A"),
        ("toy", "B"),
        ("other", "B"),
    ]
    # A: 1, 2, 3 ms -> p50 2, p95 = 2 + 0.9 * (3 - 2) = 2.9 (linear interpolation), mean 2
    assert rows[0] == {"dataset": "toy", "retriever": "A", "p50": 2.0, "p95": pytest.approx(2.9),
                       "mean": 2.0, "max": 3.0, "n": 3}  # fmt: skip
    assert rows[1]["p95"] == pytest.approx(29.0) and rows[2]["p50"] == 20.0


@pytest.fixture(scope="module")
def components():
    store = make_store()
    emb = HashEmbedder()
    return Components(
        store,
        embedder=emb,
        dense_index=BruteDenseIndex(store.ids, emb.encode_passages(store.texts)),
        bm25_index=OverlapIndex(store.ids, store.texts),
    )


class PrefersP4:
    name = "prefers-p4"

    def __init__(self, store):
        self.paper = {store[c].text: store[c].paper_id for c in store}

    def score(self, query, texts):
        return [float(self.paper[t] == "p4") for t in texts]


def test_build_retrievers_reports_a_skipped_one(components):
    settings = RetrievalSettings(k=5, hybrid_pool=20, rerank_pool=6)
    built, skipped = build_retrievers(
        ["dense", "bm25", "hyde"],
        components,
        settings,
        extra_rerankers={"prefers-p4": PrefersP4(components.store)},
    )
    assert list(built) == ["dense", "bm25", "rerank:prefers-p4"]
    assert list(skipped) == ["hyde"] and "needs components ['llm']" in skipped["hyde"]
    top = built["rerank:prefers-p4"].retrieve("reranking the pool", 1)[0]
    assert top.paper_id == "p4"


def test_run_all_runs_every_retriever_on_every_query(components):
    settings = RetrievalSettings(hybrid_pool=20)
    built, skipped = build_retrievers(["dense", "bm25", "hybrid"], components, settings)
    assert skipped == {}
    queries = {"q1": "dense retrieval", "q2": "BM25 length normalisation"}
    out = run_all(built, queries, k=3)
    assert list(out) == ["dense", "bm25", "hybrid"]
    for name, r in out.items():
        assert set(r) == {"q1", "q2"} and set(r.latency_ms) == {"q1", "q2"}
        for qid, q in queries.items():
            assert r[qid] == {h.chunk_id: h.score for h in built[name].retrieve(q, 3)}
    # BM25 over term overlap: p2-c1 holds bm25, length, normalisation (3 terms)
    assert max(out["bm25"]["q2"], key=out["bm25"]["q2"].get) == "p2-c1"
    assert out["bm25"]["q2"]["p2-c1"] == 3.0


def test_subset_retrievers_keeps_order_and_lists_the_rest_as_not_run():
    from rag.errors import ConfigError
    from rag.evaluation.compare import subset_retrievers

    names = ["dense", "bm25", "hybrid", "hyde"]
    kept, skipped = subset_retrievers(names, ["hybrid", "dense"], "SciFact")
    assert kept == ["dense", "hybrid"]  # the report's order, not the subset's
    why = "not run on SciFact in this profile"
    assert skipped == {"bm25": why, "hyde": why}
    assert subset_retrievers(names, [], "SciFact") == (names, {})  # empty: all of them
    # a sweep running fewer retrievers than the profile's subset: the extra kind is ignored
    assert subset_retrievers(["dense"], ["dense", "multi-query"], "SciFact") == (["dense"], {})
    with pytest.raises(ConfigError, match="hdye"):
        subset_retrievers(names, ["dense", "hdye"], "SciFact")  # a typo is named, not dropped
