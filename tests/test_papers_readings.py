"""Notebook 07's readings: stated from the measurement dicts, and honest when n is too small."""

from __future__ import annotations

import json

import pytest

from rag import paths
from rag.report.readings import papers as readings

BENCH = json.loads(paths.resolve("outputs/bench/citations.json").read_text())
SUMMARIES = json.loads(paths.resolve("outputs/bench/summaries.json").read_text())


def test_related_reading_quotes_the_best_method_and_its_paired_test_against_text():
    rel = BENCH["related_work"]
    text = readings.related_reading(rel).data
    best = rel["best_by_recall@10"]
    r10 = rel["methods"][best]["recall@10"]
    assert f"**{best} ranks best, recall@10 {r10['mean']:.3f} (95 % CI {r10['ci_low']:.3f}–" in text
    pair = next(t for t in rel["paired_tests"]["recall@10"] if {t["a"], t["b"]} == {best, "text"})
    sign = 1 if pair["a"] == best else -1
    assert f"paired difference is {sign * pair['diff']:+.3f}" in text
    assert ("a real difference" in text) == pair["significant"]


def test_resolution_reading_and_ratio_read_the_held_out_half():
    res = BENCH["title_resolution"]
    held = res["held_out"]
    text = readings.resolution_reading(res).data
    assert f"({held['precision']['k']}/{held['precision']['n']}; exact 95 % CI" in text
    assert readings.ratio(held["recall"]) == f"{held['recall']['k']}/{held['recall']['n']}"


def test_too_few_papers_is_said_not_computed():
    empty = {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    half = {"papers": 1, "entries": 0, "entries_citing_corpus": 0, "precision": empty,
            "recall": empty}  # fmt: skip
    res = {"probes": 0, "threshold": 75.0, "tied_range": [50.0, 100.0], "tuning": half,
           "held_out": half}  # fmt: skip
    assert "Too few references" in readings.resolution_reading(res).data
    assert readings.ratio(empty) == "none measured" and readings.proportion(empty) == "no items"
    rel = {"queries": 1, "note": "fewer than two papers cite another corpus paper"}
    assert "not measured on this selection" in readings.related_reading(rel).data
    assert "too few" in readings.summaries_reading({"n_papers": 1, "skipped": []}).data
    split = {"papers": 0, "overall": {"found": 0, "true": 0, "ratio": None}}
    assert "unmeasured" in readings.splitting_reading(split, None).data
    graph = {"papers": 5, "edges_in_corpus": 0}
    assert "no network to draw" in readings.graph_reading(graph, {}, {}).data
    answer = readings.answer_papers(graph, res, rel, {"n_papers": 1})
    assert answer == "The references of 5 papers resolve to 0 in-corpus citations."


def test_summaries_reading_and_methods_table_from_the_bench_files():
    summ = {"n_papers": SUMMARIES["n_papers"], "metrics": SUMMARIES["metrics"]}
    text = readings.summaries_reading(summ).data
    e = SUMMARIES["metrics"]["extractive"]["rouge_l"]
    assert f"extractive ROUGE-L **{e['mean']:.3f} (95 % CI {e['ci_low']:.3f}–" in text
    table = readings.methods_compared(BENCH, summ, None)
    assert list(table["task"].unique()) == [
        "split references", "resolve a reference", "related work", "summarise"
    ]  # fmt: skip
    assert (table["source"] == "this run").all()
    row = table[(table["task"] == "related work") & (table["method"] == "fusion")].iloc[0]
    assert row["n"] == BENCH["related_work"]["queries"]


def test_llm_rows_come_from_the_bench_file_and_are_named_as_such():
    from rag.papers.summary_eval import llm_aggregate

    rows = [
        {"paper_id": f"p{i}", "extractive": {"rouge_l": 0.2, "faithfulness": 1.0, "words": 150},
         "llm:local:tiny": {"rouge_l": 0.1 + i / 100, "faithfulness": 0.5, "words": 90,
                            "seconds": 2.0, "cached": False}}
        for i in range(4)
    ]  # fmt: skip
    # the committed file's own LLM rows set aside, so only the scripted one is read
    plain = {"metrics": {k: v for k, v in SUMMARIES["metrics"].items() if not k.startswith("llm:")}}
    bench = {"metrics": {**plain["metrics"], **llm_aggregate(rows, "llm:local:tiny")}}
    assert list(readings.llm_rows(bench)) == ["llm:local:tiny"]
    text = readings.llm_summaries_reading(bench).data
    assert "`llm:local:tiny` on 4 papers: ROUGE-L 0.115 (95 % CI" in text
    assert "-0.085 ROUGE-L against extractive" in text and "not this run" in text
    assert "adds one" in readings.llm_summaries_reading(plain).data
    summ = {"n_papers": SUMMARIES["n_papers"], "metrics": SUMMARIES["metrics"]}
    table = readings.methods_compared(BENCH, summ, None, bench)
    llm = table[table["method"] == "llm:local:tiny"].iloc[0]
    assert llm["source"] == "outputs/bench/summaries.json" and llm["n"] == 4


def test_a_sampled_run_says_so_and_shows_the_whole_corpus_beside_it():
    from rag.papers.summary_eval import sample_papers

    ids = [f"p{i:02d}" for i in range(20)]
    five, ten = sample_papers(ids, 5, seed=0), sample_papers(ids, 10, seed=0)
    assert len(five) == 5 and set(five) < set(ten)  # a smaller draw is a subset of a larger one
    assert sample_papers(ids, 5, seed=1) != five and sample_papers(ids, 5, seed=0) == five
    assert sample_papers(ids, 0) == ids == sample_papers(ids, 50)
    summ = {"n_papers": 5, "metrics": SUMMARIES["metrics"], "sample": "5 of 20 at random, seed 0"}
    assert "papers (5 of 20 at random, seed 0): extractive" in readings.summaries_reading(summ).data
    table = readings.methods_compared(BENCH, summ, None, SUMMARIES)
    whole = table[table["method"] == "extractive (every paper)"].iloc[0]
    assert whole["n"] == SUMMARIES["n_papers"] and whole["source"] == "outputs/bench/summaries.json"
    # a run over every paper lists no second copy of the same measurement
    every = readings.methods_compared(
        BENCH, {**summ, "sample": readings.EVERY_PAPER}, None, SUMMARIES
    )
    assert not every["method"].str.contains("every paper").any()


def test_a_negative_sample_is_refused_naming_it():
    from rag.errors import ConfigError
    from rag.papers.summary_eval import sample_papers

    with pytest.raises(ConfigError, match="-3"):
        sample_papers(["a", "b"], -3)
