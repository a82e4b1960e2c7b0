"""Paired comparison of two models behind the same answerer (notebook 05's ``local_models``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rag.answer.base import Answer
from rag.evaluation.answers import MetricResult
from rag.evaluation.faithfulness import AnswererGrade
from rag.evaluation.model_pairs import paired_models, pairs_reading, per_question
from rag.evaluation.stats import paired_test

QIDS = [f"q{i}" for i in range(8)]
ANSWERABLE = dict.fromkeys(QIDS[:6], True) | dict.fromkeys(QIDS[6:], False)


def _grade(name, faith, refused, seconds, *, cached=False) -> AnswererGrade:
    answers = {
        q: Answer("x", {}, name, bool(r), tokens_in=900, tokens_out=20, latency_s=s, cached=cached)
        for q, r, s in zip(QIDS, refused, seconds, strict=True)
    }
    per_q = pd.DataFrame(
        {
            "faithfulness": faith,
            "citation_recall": [0.5] * len(QIDS),
            "answer_f1": np.linspace(0.1, 0.3, len(QIDS)),
            "refused": refused,
        },
        index=pd.Index(QIDS, name="qid"),
    )
    neg = {q: float(r) for q, r in zip(QIDS, refused, strict=True) if not ANSWERABLE[q]}
    fal = {q: float(r) for q, r in zip(QIDS, refused, strict=True) if ANSWERABLE[q]}
    quality = {
        "negative_rejection": MetricResult(
            "negative_rejection", neg, float(np.mean([*neg.values()])), len(neg)
        ),
        "false_rejection": MetricResult(
            "false_rejection", fal, float(np.mean([*fal.values()])), len(fal)
        ),
    }
    return AnswererGrade(name, answers, per_q, {}, quality)


def test_each_metric_is_compared_on_the_questions_both_rows_have():
    big = _grade("local+gbnf [big]", [1, 1, 1, 1, 1, 1, None, None], [0, 0, 0, 0, 0, 0, 1, 1],
                 [6.0, 7, 6, 7, 6, 7, 1, 1])  # fmt: skip
    small = _grade("local+gbnf", [0, 0.5, 0, 0.5, 0, 1, 0, None], [0, 0, 0, 0, 0, 1, 0, 0],
                   [1.0, 1, 1, 1, 1, 1, 1, 1])  # fmt: skip
    t = paired_models({g.name: g for g in (big, small)}, [(big.name, small.name)], seed=0)
    t = t.set_index("metric")
    assert list(t.index) == ["faithfulness", "citation_recall", "negative_rejection",
                             "false_rejection", "answer_f1", "seconds_per_answer"]  # fmt: skip
    # faithfulness: only q0..q5 are scored in both rows; the numbers are paired_test's own
    r = paired_test([1, 1, 1, 1, 1, 1], [0, 0.5, 0, 0.5, 0, 1], seed=0)
    f = t.loc["faithfulness"]
    assert f["n"] == 6 and f["diff"] == pytest.approx(r.diff) and f["p_value"] == r.p_value
    assert (f["ci_low"], f["ci_high"]) == (r.ci.low, r.ci.high)
    # negative rejection: the two unanswerable questions; false rejection: the six answerable
    assert t.loc["negative_rejection", "n"] == 2 and t.loc["negative_rejection", "diff"] == 1.0
    assert t.loc["false_rejection", "n"] == 6
    assert t.loc["false_rejection", "diff"] == pytest.approx(-1 / 6)
    # identical values: no difference, not distinguishable
    assert t.loc["citation_recall", "diff"] == 0 and t.loc["answer_f1", "p_value"] == 1.0
    assert t.loc["answer_f1", "verdict"] == "not distinguishable"
    # slower on the six answered questions: a real difference, and slower is worse
    s = t.loc["seconds_per_answer"]
    assert s["n"] == 8 and s["diff"] == pytest.approx(33 / 8)  # [5, 6, 5, 6, 5, 6, 0, 0]
    assert s["verdict"] == "baseline better" and s["p_holm"] < 0.05


def test_lower_is_better_metrics_read_the_right_way_round():
    slow = _grade("a", [1.0] * 8, [0] * 8, [9.0] * 8)
    fast = _grade("b", [1.0] * 8, [1] * 6 + [0, 0], [1.0, 2, 1, 2, 1, 2, 1, 2])
    t = paired_models(
        {"a": slow, "b": fast}, [("a", "b")], ["false_rejection", "seconds_per_answer"]
    )
    verdicts = dict(zip(t["metric"], t["verdict"], strict=True))
    # a declines no answerable question (b declines all six): a is better on false rejection
    assert verdicts == {"false_rejection": "model better", "seconds_per_answer": "baseline better"}


def test_cached_answers_have_no_model_time_to_compare():
    a = _grade("a", [1.0] * 8, [0] * 8, [6.0] * 8, cached=True)
    b = _grade("b", [0.0] * 8, [0] * 8, [1.0] * 8)
    assert per_question(a, "seconds_per_answer").empty
    t = paired_models({"a": a, "b": b}, [("a", "b")], ["seconds_per_answer", "faithfulness"])
    row = t.set_index("metric").loc["seconds_per_answer"]
    assert row["n"] == 0 and row["verdict"].startswith("not compared") and pd.isna(row["diff"])
    assert "not compared" in pairs_reading(
        t, "b"
    ) and "faithfulness 1.000 vs 0.000" in pairs_reading(t, "b")
    with pytest.raises(KeyError, match="tokens"):
        per_question(a, "tokens")


def test_a_refusal_without_a_model_call_has_no_model_time():
    g = _grade("g", [1.0] * 8, [0] * 8, [5.0] * 8)
    g.answers["q7"] = Answer("declined", {}, "g", True, latency_s=0.01)  # a gate's refusal
    assert list(per_question(g, "seconds_per_answer").index) == QIDS[:7]


def test_holm_runs_within_each_metric_over_the_pairs():
    base = _grade("base", [0.0] * 8, [0] * 8, [1.0] * 8)
    rows = {f"m{i}": _grade(f"m{i}", [1.0, 0.0] * 4 if i else [1.0] * 8, [0] * 8, [1.0] * 8)
            for i in range(2)}  # fmt: skip
    t = paired_models({"base": base, **rows}, [("m0", "base"), ("m1", "base")], ["faithfulness"])
    p, holm = t["p_value"].tolist(), t["p_holm"].tolist()
    assert sorted(holm) == sorted([min(1.0, 2 * min(p)), max(min(1.0, 2 * min(p)), max(p))])


def test_traces_of_the_published_qwen_page_reproduce_its_paired_table(capsys):
    """The post-hoc pairing reads the committed traces and gives the notebook's own table back."""
    import json
    from pathlib import Path

    from rag.evaluation.model_pairs import main, paired_from_traces

    page = Path(__file__).resolve().parents[1] / "outputs" / "qwen" / "05_faithfulness"
    traces = [json.loads(x) for x in (page / "traces.jsonl").read_text().splitlines()]
    ref = pd.read_csv(page / "tables" / "local_models_paired.csv")
    pairs = list(dict.fromkeys(zip(ref["row"], ref["baseline"], strict=True)))
    got = paired_from_traces(traces, pairs).merge(ref, on=["row", "metric"], suffixes=("", "_ref"))
    assert len(got) == len(ref) > 0
    for col in ("n", "diff", "ci_low", "ci_high", "p_value", "p_holm"):
        a, b = got[col].astype(float), got[f"{col}_ref"].astype(float)
        # traces keep latency to 0.1 ms, so seconds agree to ~1e-5, every other metric exactly
        assert ((a - b).abs() < 1e-3).sum() + (a.isna() & b.isna()).sum() == len(got), col
    assert (got["verdict"] == got["verdict_ref"]).all()
    with pytest.raises(KeyError, match="no trace of row 'local:nope'"):
        paired_from_traces(traces, [("local:nope", "local+gbnf")])
    assert main([str(page / "traces.jsonl"), "--row", pairs[0][0], "--baseline", pairs[0][1]]) == 0
    assert "faithfulness" in capsys.readouterr().out
