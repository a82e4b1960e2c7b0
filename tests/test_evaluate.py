"""Retrieval metrics through ranx on tiny hand-computed cases, exclusions, comparisons, proxies."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
import ranx

from rag.errors import EvaluationError
from rag.evaluation.metrics import (
    category_precision_at_k,
    compare_runs,
    evaluate_by_group,
    evaluate_run,
    per_query_scores,
    pool_recall,
    pretty_metric,
    wins_losses,
)
from rag.ir import latency_summary

LOG2_3 = math.log2(3)

QRELS = {
    "q1": {"d1": 1, "d3": 1},  # two relevant
    "q2": {"d5": 1},
    "q3": {"d9": 0},  # judged but nothing relevant -> excluded
    "q4": {"d7": 1},  # the run returns nothing for it -> scores 0
}
RUN = {
    "q1": {"d2": 0.9, "d1": 0.8, "d4": 0.7, "d3": 0.6},
    "q2": {"d5": 2.0, "d6": 1.0},
    "q3": {"d9": 1.0},
    "q5": {"d1": 1.0},  # not in the qrels -> unjudged
}
METRICS = ("ndcg@3", "recall@3", "recall@5", "mrr@3")


def test_metric_values_by_hand():
    ev = evaluate_run(QRELS, RUN, METRICS, n_resamples=200)
    pq = ev.per_query
    assert list(pq.index) == ["q1", "q2", "q4"]
    # q1 ranking d2, d1, d4, d3: one relevant in the top 3 at rank 2.
    # DCG@3 = 1/log2(3); IDCG@3 = 1 + 1/log2(3).
    assert pq.loc["q1", "ndcg@3"] == pytest.approx((1 / LOG2_3) / (1 + 1 / LOG2_3))
    assert pq.loc["q1", "recall@3"] == 0.5
    assert pq.loc["q1", "recall@5"] == 1.0
    assert pq.loc["q1", "mrr@3"] == 0.5
    assert pq.loc["q2"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert pq.loc["q4"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert ev.excluded == ["q3"]
    assert ev.missing_from_run == ["q4"]
    assert ev.unjudged == ["q5"]
    assert ev.n == 3
    assert ev.aggregate["mrr@3"].estimate == pytest.approx((0.5 + 1 + 0) / 3)
    assert ev.aggregate["mrr@3"].n == 3


def test_graded_ndcg_uses_grade_as_gain_with_log2_discount():
    # ranking b (grade 1), a (grade 2): DCG = 1/1 + 2/log2(3); ideal a, b: 2/1 + 1/log2(3)
    df, *_ = per_query_scores({"q": {"a": 2, "b": 1}}, {"q": {"b": 0.9, "a": 0.1}}, ["ndcg@2"])
    assert df.loc["q", "ndcg@2"] == pytest.approx((1 + 2 / LOG2_3) / (2 + 1 / LOG2_3))


def test_ties_are_broken_by_doc_id_whatever_the_dict_order():
    qrels = {"q": {"y": 1}}
    for run in ({"q": {"x": 1.0, "y": 1.0}}, {"q": {"y": 1.0, "x": 1.0}}):
        df, *_ = per_query_scores(qrels, run, ["mrr@10"])
        assert df.loc["q", "mrr@10"] == 0.5  # x before y


def test_metrics_json_shape():
    ev = evaluate_run(QRELS, RUN, ("recall@5",), n_resamples=200)
    m = ev.to_metrics()
    assert set(m) == {"recall@5"}
    assert set(m["recall@5"]) == {"mean", "ci_low", "ci_high", "n"}
    assert m["recall@5"]["n"] == 3
    assert m["recall@5"]["ci_low"] <= m["recall@5"]["mean"] <= m["recall@5"]["ci_high"]
    assert list(ev.table().columns) == ["mean", "ci_low", "ci_high", "n", "ci_method"]


def test_no_relevant_documents_anywhere_raises_instead_of_scoring_zero():
    with pytest.raises(EvaluationError, match="relevant"):
        evaluate_run({"q1": {"d1": 0}, "q2": {}}, {"q1": {"d1": 1.0}}, ("recall@5",))


def test_integer_ids_are_refused():
    with pytest.raises(EvaluationError, match="string"):
        evaluate_run({1: {"d1": 1}}, {1: {"d1": 1.0}}, ("recall@5",))  # type: ignore[dict-item]


def test_ranx_oracle_on_random_runs():
    rng = random.Random(5)
    docs = [f"d{i}" for i in range(40)]
    qrels = {f"q{i}": {d: rng.choice([1, 2]) for d in rng.sample(docs, 3)} for i in range(25)}
    run = {f"q{i}": {d: rng.random() for d in rng.sample(docs, 30)} for i in range(25)}
    metrics = ["ndcg@10", "recall@5", "recall@20", "mrr@10"]
    ours = evaluate_run(qrels, run, metrics, n_resamples=100)
    oracle = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), metrics)
    for m in metrics:
        assert ours.aggregate[m].estimate == pytest.approx(oracle[m], abs=1e-12)


def _runs_for_comparison():
    qrels = {f"q{i}": {f"rel{i}": 1} for i in range(20)}
    good = {f"q{i}": {f"rel{i}": 1.0, "x": 0.5} for i in range(20)}  # relevant first everywhere
    bad = {f"q{i}": {"x": 1.0, f"rel{i}": 0.5} for i in range(20)}  # relevant second everywhere
    mixed = {f"q{i}": (good if i % 2 else bad)[f"q{i}"] for i in range(20)}
    return qrels, {"good": good, "bad": bad, "mixed": mixed}


def test_compare_runs_all_pairs_with_holm_and_readings():
    qrels, runs = _runs_for_comparison()
    table = compare_runs(qrels, runs, "mrr@10", n_resamples=2000, ci_resamples=200)
    assert [(r.a, r.b) for r in table.itertuples()] == [
        ("good", "bad"),
        ("good", "mixed"),
        ("bad", "mixed"),
    ]
    row = table.iloc[0]
    # MRR 1 vs 1/2 on all 20 questions: diff 0.5 everywhere, so no random sign flip reaches it and
    # the sampled two-sided p is its floor 2 * 1 / (2000 + 1).
    assert row["diff"] == 0.5 and row["n"] == 20
    assert row["p_value"] == pytest.approx(2 / 2001)
    assert (table["p_adjusted"] >= table["p_value"]).all()
    assert bool(row["significant"])
    assert row["reading"].startswith("good beats bad by 0.500 MRR@10")
    assert row["reading"].endswith("a real difference")


def test_compare_runs_needs_two_runs():
    qrels, runs = _runs_for_comparison()
    with pytest.raises(EvaluationError):
        compare_runs(qrels, {"good": runs["good"]}, "mrr@10")


def test_wins_losses_per_question():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 1}, "q4": {}}
    run_a = {"q1": {"a": 1.0}, "q2": {"b": 1.0, "a": 0.5}, "q3": {"b": 1.0, "a": 0.5}}
    run_b = {"q1": {"b": 1.0, "a": 0.5}, "q2": {"a": 1.0}, "q3": {"b": 1.0, "a": 0.5}}
    t = wins_losses(qrels, run_a, run_b, "mrr@10", names=("A", "B"))
    assert list(t.index) == ["q1", "q3", "q2"]  # largest win first, q4 excluded
    assert t["outcome"].tolist() == ["win", "tie", "loss"]
    assert t["diff"].tolist() == [0.5, 0.0, -0.5]
    assert t.loc["q1", "A"] == 1.0 and t.loc["q1", "B"] == 0.5


def test_pool_recall_by_hand():
    qrels = {"q1": {"a": 1, "b": 1, "c": 0}, "q2": {"z": 1}, "q3": {"n": 0}}
    pool = {"q1": {"a": 0.1, "c": 0.9, "x": 0.5}, "q2": {"y": 1.0}}
    pr = pool_recall(qrels, pool)
    assert list(pr.index) == ["q1", "q2"]
    assert pr.loc["q1", "pool_recall"] == 0.5 and pr.loc["q1", "n_in_pool"] == 1
    assert bool(pr.loc["q1", "any_in_pool"]) and not bool(pr.loc["q1", "all_in_pool"])
    assert pr.loc["q2", "pool_recall"] == 0.0 and not bool(pr.loc["q2", "any_in_pool"])


def test_category_precision_is_share_of_top_k_in_expected_category():
    cats = {"p1": "cs.CL", "p2": "cs.LG", "p3": "cs.CL", "p4": "cs.IR"}
    run = {"q1": {"p1": 0.9, "p2": 0.8, "p3": 0.7, "p4": 0.6}, "q2": {"p2": 1.0}}
    cp = category_precision_at_k(run, {"q1": "cs.CL", "q2": "cs.LG"}, cats, k=3)
    assert cp.name == "category_precision@3"
    assert cp.loc["q1"] == pytest.approx(2 / 3)  # p1, p3 of the top 3 (p4 is 4th)
    assert cp.loc["q2"] == pytest.approx(1 / 3)  # one result for k=3 -> two misses
    chunk_run = {"q1": {"c1": 0.9, "c2": 0.8}}
    cp2 = category_precision_at_k(
        chunk_run, "cs.IR", cats, k=2, doc_to_paper={"c1": "p4", "c2": "p1"}
    )
    assert cp2.loc["q1"] == 0.5
    with pytest.raises(EvaluationError, match="category"):
        category_precision_at_k({"q": {"unknown": 1.0}}, "cs.CL", cats, k=1)


def test_latency_summary_percentiles_by_hand():
    s = latency_summary([float(i) for i in range(1, 101)])
    # numpy linear interpolation: p50 at rank 49.5 -> 50.5; p95 at 94.05 -> 95.05
    assert s["p50"] == pytest.approx(50.5)
    assert s["p95"] == pytest.approx(95.05)
    assert s["n"] == 100 and s["max"] == 100.0
    assert latency_summary({"q1": 3.0, "q2": 5.0})["mean"] == 4.0
    # no latencies is undefined, not 0 ms: NaN statistics and n = 0
    empty = latency_summary([])
    assert empty["n"] == 0 and all(math.isnan(empty[k]) for k in ("p50", "p95", "mean", "max"))
    with pytest.raises(EvaluationError, match="non-negative"):
        latency_summary([1.0, -2.0])
    with pytest.raises(EvaluationError, match="finite"):
        latency_summary([float("nan")])


def test_evaluate_by_group_splits_scored_questions():
    ev = evaluate_run(QRELS, RUN, ("mrr@3",), n_resamples=100)
    groups = {"q1": "single", "q2": "single", "q4": "multi", "q3": "unanswerable"}
    t = evaluate_by_group(ev, groups, n_resamples=100)
    single = t[(t.group == "single") & (t.metric == "mrr@3")].iloc[0]
    assert single["mean"] == pytest.approx(0.75) and single["n"] == 2
    multi = t[t.group == "multi"].iloc[0]
    assert multi["n"] == 1 and pd.isna(multi["ci_low"])
    assert multi["ci_method"] == "undefined (n=1)"
    with pytest.raises(EvaluationError, match="group"):
        evaluate_by_group(ev, {"q1": "single"})


def test_pretty_metric():
    assert pretty_metric("ndcg@10") == "nDCG@10"
    assert pretty_metric("recall@5") == "Recall@5"
    assert pretty_metric("mrr@10") == "MRR@10"


def test_evaluation_and_comparison_are_deterministic():
    qrels, runs = _runs_for_comparison()
    a = compare_runs(qrels, runs, "ndcg@10", n_resamples=500, ci_resamples=100)
    b = compare_runs(qrels, runs, "ndcg@10", n_resamples=500, ci_resamples=100)
    pd.testing.assert_frame_equal(a, b)
    ea = evaluate_run(qrels, runs["mixed"], ("ndcg@10",), n_resamples=300).table()
    eb = evaluate_run(qrels, runs["mixed"], ("ndcg@10",), n_resamples=300).table()
    pd.testing.assert_frame_equal(ea, eb)
