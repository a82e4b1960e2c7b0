"""Readings are computed from the numbers: hand-made inputs, expected sentences derived by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rag.report import figures, readings
from rag.report.index_page import fmt_value


def _survival(rates, lows, highs, n=20):
    idx = ["fixed", "sentence", "section"]
    return pd.DataFrame(
        {"quotes": n, "intact": [round(r * n) for r in rates], "intact_rate": rates,
         "ci_low": lows, "ci_high": highs},
        index=idx,
    )  # fmt: skip


SIZES = pd.DataFrame({"chunks": [100, 120, 150]}, index=["fixed", "sentence", "section"])


def test_overlapping_intervals_are_a_tie_broken_by_the_fewest_chunks():
    s = _survival([0.95, 0.96, 0.97], [0.90, 0.91, 0.92], [0.99, 0.99, 1.0])
    pick, why, tied = readings.chunk_choice(s, SIZES, "fixed")
    assert pick == "fixed" and set(tied) == {"fixed", "sentence", "section"}
    assert "not distinguishable" in why
    text = readings.evidence_intact(s, SIZES, "fixed").data
    assert "0.970 (95 % CI 0.920–1.000)" in text and "the same choice" in text


def test_a_clear_winner_is_picked_and_a_different_indexed_strategy_is_said():
    s = _survival([0.70, 0.72, 0.97], [0.60, 0.62, 0.93], [0.80, 0.82, 1.0])
    pick, _, tied = readings.chunk_choice(s, SIZES, "fixed")
    assert pick == "section" and tied == ["section"]
    assert "not `section`" in readings.evidence_intact(s, SIZES, "fixed").data


def _pairwise():
    return pd.DataFrame(
        [
            {"a": "dense", "b": "hybrid", "diff": -0.05, "ci_low": -0.08, "ci_high": -0.02,
             "significant": True, "p_adjusted": 0.02, "n": 158},
            {"a": "hybrid", "b": "rerank", "diff": -0.003, "ci_low": -0.02, "ci_high": 0.01,
             "significant": False, "p_adjusted": 1.0, "n": 158},
        ]
    )  # fmt: skip


def test_pairwise_reading_names_only_the_real_differences():
    text = readings.pairwise_reading(_pairwise()).data
    assert "1 of 2 pairs differ" in text
    assert "hybrid > dense by 0.050 (95 % CI 0.020–0.080, Holm p = 0.020)" in text
    assert "rerank >" not in text


def test_difference_to_baseline_is_other_minus_baseline():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    drawn = figures.diff_to_baseline(ax, _pairwise(), "hybrid")
    plt.close(fig)
    assert drawn == ["dense", "rerank"]  # dense − hybrid = −0.05 sorts below rerank − hybrid


def test_gold_ranking_says_who_is_ahead_and_what_is_not_distinguishable():
    def block(m, lo, hi):
        return {"n": 158, "ndcg@10": {"mean": m, "ci_low": lo, "ci_high": hi}}

    chunk = {"dense": block(0.27, 0.22, 0.32), "hybrid": block(0.317, 0.27, 0.37),
             "rerank": block(0.320, 0.27, 0.38)}  # fmt: skip
    text = readings.gold_ranking(chunk, {}, _pairwise()).data
    assert "**rerank** scores highest, nDCG@10 0.320 (95 % CI 0.270–0.380)" in text
    assert "beats no other retriever by a real difference" in text
    assert "3 rows" not in text and "3 retrievers" in text


def test_qasper_check_says_whether_it_passed():
    def block(r, lo, hi, nd):
        return {"n": 14, "recall@10": {"mean": r, "ci_low": lo, "ci_high": hi},
                "ndcg@10": {"mean": nd, "ci_low": 0, "ci_high": 1}}  # fmt: skip

    gold = {"hybrid": block(0, 0, 0, 0.32), "bm25": block(0, 0, 0, 0.30)}
    passed = {"hybrid": block(0.40, 0.2, 0.6, 0), "bm25": block(0.45, 0.25, 0.65, 0)}
    failed = {"hybrid": block(0.05, 0.0, 0.1, 0), "bm25": block(0.60, 0.45, 0.75, 0)}
    assert "**The check passes**" in readings.qasper_check(passed, gold).data
    assert "**The check fails**" in readings.qasper_check(failed, gold).data


@pytest.mark.parametrize(
    ("total", "label"),
    [
        ({"calls": 0}, "gold questions (no LLM calls)"),
        ({"calls": 10, "fresh_calls": 0}, "gold questions (LLM cache warm)"),
        ({"calls": 10, "fresh_calls": 4}, "gold questions (4 fresh LLM calls in this notebook)"),
    ],
)
def test_the_latency_legend_says_whether_llm_calls_were_cache_hits(total, label):
    assert readings.llm_cache_label({"total": total}) == label


def test_the_latency_reading_names_the_questions_it_timed():
    lat = pd.DataFrame(
        {"dataset": ["q", "q", "scifact"], "retriever": ["dense", "bm25", "dense"],
         "p50": [12.04, 0.21, 3.0]}
    )  # fmt: skip
    gold = readings.latency_reading(lat, {"total": {"calls": 0}}).data
    assert "Median latency per query on the gold questions: bm25 0.2 ms and dense 12.0 ms." in gold
    own = readings.latency_reading(lat, {"total": {"calls": 0}}, "your questions").data
    assert "on your questions: bm25 0.2 ms and dense 12.0 ms." in own


def test_faithfulness_is_never_shown_without_answered_rate_and_f1():
    a = {"faithfulness": {"mean": 1.0, "ci": [1.0, 1.0], "n_scored": 31, "answered_rate": 0.5167},
         "answer_f1": {"mean": 0.0831, "ci": [0.057, 0.121], "n": 42}}  # fmt: skip
    head = readings.headline_faithfulness({"extractive": a})["extractive"]
    assert head == "faithfulness 1.00 · answered 0.52 · answer F1 0.083"
    text = readings.faithfulness_reading({"extractive": a}, 0.75).data
    assert "answered rate 0.52" in text and "answer F1 0.083 (95 % CI 0.057–0.121)" in text
    assert "+filter" not in text
    both = readings.faithfulness_reading({"extractive": a, "local+gbnf+filter": a}, 0.75).data
    assert "(local+gbnf+filter) kept only the sentences this judge supports" in both


def test_answers_are_shortened_and_repeated_lines_collapsed():
    text = "The answer is 4.\n" + "The previous answer is:\n" * 20 + "done"
    assert readings.trim_answer(text) == "The answer is 4. The previous answer is: done"


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [("dense p50 ms (1x)", 8.5512, "8.6"), ("evidence found (all)", 0.99688, "0.997"),
     ("chunks indexed", 5193, "5,193"), ("embedding chunks/s", 23.951, "24.0"),
     ("rate", 0.0831, "0.083")],
)  # fmt: skip
def test_headline_numbers_are_rounded_for_people(key, value, shown):
    assert fmt_value(key, value) == shown


def test_scifact_reading_skips_rows_not_run_on_scifact():
    # the default profile leaves HyDE off SciFact: its block is {"not_run": why}, with no metrics
    m = lambda v: {"ndcg@10": {"mean": v, "ci_low": v - 0.04, "ci_high": v + 0.04}}  # noqa: E731
    block = {"bm25": m(0.667), "dense": m(0.645), "hybrid": m(0.685), "hyde": {"not_run": "x"}}
    text = readings.scifact_reproduction(block, 300, {"bm25": 0.665, "dense": 0.645}).data
    assert "the measurement is reproduced" in text and "Highest row: hybrid 0.685" in text


def _chunk_block():
    m = lambda v: {"ndcg@10": {"mean": v, "ci_low": v - 0.05, "ci_high": v + 0.05}, "n": 40}  # noqa: E731
    return {"bm25": m(0.30), "hybrid": m(0.32), "_skipped": {}}


def test_context_choice_quotes_notebook_04_from_its_chunk_block():
    best = readings.context_choice_reading("hybrid", _chunk_block()).data
    assert best == (
        "**Retrieval held constant:** `hybrid`, the highest chunk nDCG@10 in notebook 04, "
        "0.320 (95 % CI 0.270–0.370)."
    )
    other = readings.context_choice_reading("bm25", _chunk_block()).data
    assert "chunk nDCG@10 0.300 (95 % CI 0.250–0.350) in notebook 04; hybrid scored" in other
    assert "(0.320, CI 0.270–0.370)" in other
    assert "has not recorded" in readings.context_choice_reading("bm25", {}).data


def test_context_choice_loader_reads_the_run_folder(tmp_path):
    (tmp_path / "04_retrieval").mkdir()
    m04 = {"corpus_gold": {"chunk": _chunk_block()}}
    (tmp_path / "04_retrieval" / "metrics.json").write_text(json.dumps(m04), encoding="utf-8")
    assert readings.retrieval_chunk_metrics(str(tmp_path)) == _chunk_block()
    assert readings.context_choice("hybrid", str(tmp_path)).data == (
        readings.context_choice_reading("hybrid", _chunk_block()).data
    )
    assert readings.retrieval_chunk_metrics(str(tmp_path / "nowhere")) == {}


def test_conversation_answer_names_each_condition_and_the_real_differences():
    idx = ["follow-up (raw)", "original (upper bound)", "rewrite: rules"]
    cis = ["[0.05, 0.15]", "[0.3, 0.5]", "[0.2, 0.4]"]
    table = pd.DataFrame({"n": [12, 12, 12], "ndcg@10": [0.1, 0.4, 0.3], "ndcg@10 CI": cis}, idx)
    restoration = pd.DataFrame({"n": [12], "restored": [9]}, index=["rewrite: rules"])
    pairs = pd.DataFrame({"significant": [True, False], "reading": ["rules beats raw", "tie"]})
    text = readings.answer_conversation(table, pairs, restoration)
    assert text == (
        "On 12 follow-ups, retrieving with the raw follow-up gives nDCG@10 0.100 [0.05, 0.15] "
        "against 0.400 [0.3, 0.5] for the original standalone question. rewrite: rules: 0.300 "
        "[0.2, 0.4], entity restored in 9/12. 1 of 2 paired differences are significant after "
        "Holm correction: rules beats raw"
    )
    assert readings.answer_conversation(table.iloc[0:0], pairs, restoration).startswith(
        "The construction rule yields no follow-up"
    )


def test_every_public_reading_has_a_docstring():
    import inspect

    for name in readings.__all__:
        obj = getattr(readings, name)
        assert inspect.getdoc(obj), f"readings.{name} has no docstring"


def _judge_run(ba, diff=None, low=None, high=None, p=0.5, contradict=(10, 20)):
    m = {"balanced_accuracy": ba, "ci_low": ba - 0.05, "ci_high": ba + 0.05, "n": 40,
         "class_recall": {"CONTRADICT": {"k": contradict[0], "n": contradict[1]}}}  # fmt: skip
    if diff is not None:
        m["paired"] = {"baseline": "base", "diff": diff, "ci_low": low, "ci_high": high, "p": p}
    return m


def test_the_candidate_reading_applies_the_rule_to_candidates_only():
    dev = {
        "old": _judge_run(0.70, -0.02, -0.05, 0.01),  # a previous judge, not a candidate
        "base": _judge_run(0.72),
        "cand": _judge_run(0.75, 0.03, -0.01, 0.07, p=0.0002),
    }
    text = readings.judge_candidates(dev, {}, "base", ["cand"], {"yes": "not run: fetch"}).data
    assert "`old`" not in text and "`cand` scores 0.750" in text
    assert "+0.030 against base" in text and "p = 0.0002" in text
    assert "none does, so `base` grades every answer below" in text
    assert "`yes`: not run: fetch" in text
    dev["cand"]["paired"]["ci_low"] = 0.004  # the whole CI above zero: it clears the rule
    claims = {"base": _judge_run(0.5, contradict=(6, 30)), "cand": _judge_run(0.6, 0.1, 0.0, 0.2)}
    text = readings.judge_candidates(dev, claims, "base", ["cand"], {}).data
    assert "`cand` clears it on these pairs" in text
    assert "passes 24 of 30 that contradict their passage" in text
    assert "on the claims about the corpus papers 0.600" in text
