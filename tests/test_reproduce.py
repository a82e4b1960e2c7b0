"""rag.bench.reproduce compares two run folders: identical numbers, estimates inside the published
CI, timings left out, and 05's answers split by whether their sources were the same."""

from __future__ import annotations

import json

import pytest

from rag.bench.reproduce import compare_metrics, reproduce
from rag.errors import ConfigError


def _run(root, metrics, traces=None):
    (root / "04_retrieval").mkdir(parents=True)
    (root / "04_retrieval" / "metrics.json").write_text(json.dumps(metrics))
    if traces is not None:
        (root / "05_faithfulness").mkdir()
        (root / "05_faithfulness" / "traces.jsonl").write_text(
            "".join(json.dumps(t) + "\n" for t in traces)
        )
    return root


def test_estimates_are_judged_against_the_published_ci_and_timings_are_left_out():
    pub = {
        "dense": {"ndcg@10": {"mean": 0.645, "ci_low": 0.60, "ci_high": 0.69}, "n": 300},
        "hyde": {"f1": {"mean": 0.10, "ci": [0.07, 0.15]}},
        "latency_ms": {"p50": 10.7},
        "embed_s": 150.0,
        "embedder": "bf16",
    }
    other = {
        "dense": {"ndcg@10": {"mean": 0.6451, "ci_low": 0.60, "ci_high": 0.69}, "n": 300},
        "hyde": {"f1": {"mean": 0.16, "ci": [0.12, 0.20]}},
        "latency_ms": {"p50": 99.0},
        "embed_s": 250.0,
        "embedder": "fp32",
    }
    r = compare_metrics(pub, other)
    assert r["estimates"] == 2 and r["within_published_ci"] == 1
    assert r["outside_published_ci"] == [
        {"metric": "hyde.f1", "published": [0.10, 0.07, 0.15], "other_mean": 0.16}
    ]
    # numbers: dense mean/ci_low/ci_high, n, hyde mean and its two ci bounds; no timing
    assert r["numbers"] == 7 and r["identical"] == 3 and r["differ"] == 4
    assert r["strings_differ"] == ["embedder"]


def test_reproduce_splits_answer_differences_by_sources(tmp_path):
    src = [{"chunk_id": "a", "n": 1}]
    pub = _run(
        tmp_path / "pub",
        {"x": 1},
        [
            {"answerer": "local", "qid": "q1", "answer": "A", "sources": src},
            {"answerer": "local", "qid": "q2", "answer": "B", "sources": src},
            {"answerer": "local", "qid": "q3", "answer": "C", "sources": src},
        ],
    )
    other = _run(
        tmp_path / "other",
        {"x": 2},
        [
            {"answerer": "local", "qid": "q1", "answer": "A", "sources": src},
            {"answerer": "local", "qid": "q2", "answer": "B2", "sources": src},
            {"answerer": "local", "qid": "q3", "answer": "C2", "sources": [{"chunk_id": "b"}]},
        ],
    )
    out = tmp_path / "rep.json"
    res = reproduce(other, published=pub, label="m2", out=str(out))
    assert res["answers"]["local"] == {"n": 3, "differ": 2, "differ_same_sources": 1}
    assert res["notebooks"]["04_retrieval"]["differ"] == 1
    saved = json.loads(out.read_text())
    assert saved["other"] == "m2" and str(tmp_path) not in out.read_text()


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(ConfigError, match="'nowhere'"):
        reproduce(tmp_path / "nowhere", published=tmp_path)
