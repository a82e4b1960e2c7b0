"""The extractive answerer's threshold chosen on held-out questions (rag.answer.calibrate).

A scripted word-overlap judge (tests/test_answer_offline.py) and a fixed in-memory retriever make
every score derivable by hand.
"""

from __future__ import annotations

import pytest

from rag.answer.calibrate import (
    choose_threshold,
    held_out_questions,
    held_out_threshold,
    support_threshold,
    without_paper,
)
from rag.answer.context import ContextSettings
from rag.errors import ConfigError
from tests.test_answer_offline import OverlapJudge, hit


def test_choose_threshold_maximises_balanced_accuracy_and_breaks_ties_upwards():
    # answer side 0.9, 0.7, 0.2; decline side 0.1, 0.3, 0.8
    t, curve = choose_threshold([0.9, 0.7, 0.2], [0.1, 0.3, 0.8], grid=[0.0, 0.25, 0.5, 0.85])
    by_t = {r["threshold"]: r for r in curve}
    assert by_t[0.0]["answered"] == 1.0 and by_t[0.0]["declined"] == 0.0
    assert by_t[0.5]["answered"] == pytest.approx(2 / 3)
    assert by_t[0.5]["declined"] == pytest.approx(2 / 3)
    assert by_t[0.25]["balanced_accuracy"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    # 0.5 (2/3 answered, 2/3 declined) and 0.85 (1/3, 3/3) tie at 2/3: the higher one wins
    assert by_t[0.85]["balanced_accuracy"] == pytest.approx(by_t[0.5]["balanced_accuracy"])
    assert t == 0.85
    t2, _ = choose_threshold([0.9, 0.7, 0.2], [0.1, 0.3, 0.8], grid=[0.0, 0.25, 0.5])
    assert t2 == 0.5


def test_choose_threshold_needs_both_sides():
    with pytest.raises(ConfigError, match="0 decline"):
        choose_threshold([0.5], [])


def test_without_paper_drops_the_own_paper_then_cuts():
    hits = [hit("a", 0.9, "x", paper="p1"), hit("b", 0.8, "y", paper="p2")]
    assert [h.chunk_id for h in without_paper(hits, "p1", 1)] == ["b"]
    assert [h.chunk_id for h in without_paper(hits, "p9", 2)] == ["a", "b"]


class TableRetriever:
    """Returns the same ranked hits for a question, whatever the depth asked (cut to k)."""

    name = "table"

    def __init__(self, table):
        self.table = table
        self.depths = []

    def retrieve(self, query, k):
        self.depths.append(k)
        return self.table[query][:k]


def test_held_out_threshold_scores_each_question_with_and_without_its_paper():
    q1 = "Which n-grams do they extract?"  # declarative form keeps "n-grams ... extract"
    table = {
        q1: [
            hit("own", 0.9, "We extract character n-grams of every word.", paper="p1"),
            hit("other", 0.5, "Weather reports mention rain in spring.", paper="p2"),
        ]
    }
    retr = TableRetriever(table)
    cal = held_out_threshold(
        OverlapJudge(), retr, {"q1": (q1, "p1")}, k=1, settings=ContextSettings(), grid=[0.3, 0.6]
    )
    with_own, without_own = cal.scores["q1"]
    assert with_own > without_own  # its own paper supports the statement, the other does not
    assert retr.depths == [50]  # retrieved once, deep enough to drop the paper and keep k
    assert cal.n == 1 and cal.balanced_accuracy == 1.0
    assert cal.threshold in (0.3, 0.6) and without_own < cal.threshold <= with_own
    assert set(cal.to_metrics()) >= {"threshold", "curve", "scores", "answered", "declined"}


def test_held_out_threshold_needs_questions():
    with pytest.raises(ConfigError, match="no held-out questions"):
        held_out_threshold(OverlapJudge(), TableRetriever({}), {}, k=3, settings=ContextSettings())


def test_support_threshold_rules():
    q1 = "Which n-grams do they extract?"
    table = {q1: [hit("own", 0.9, "We extract character n-grams of every word.", paper="p1")]}
    args = (OverlapJudge(), TableRetriever(table), {"q1": (q1, "p1")})
    kw = {"k": 1, "settings": ContextSettings()}
    assert support_threshold("held-out", 0.42, *args, **kw)[:2] == (0.42, None)  # fixed wins
    t, cal, how = support_threshold("judge", -1.0, *args, **kw)
    assert (t, cal) == (0.6, None) and "judge's own" in how  # OverlapJudge.fitted.threshold
    t, cal, how = support_threshold("held-out", -1.0, *args, **kw)
    assert cal is not None and t == cal.threshold and "1 human QASPER" in how
    t, cal, how = support_threshold("held-out", -1.0, *args, **kw, source="gold")
    assert "1 single-paper answerable questions of the gold file outside" in how
    with pytest.raises(ConfigError, match="'dev'"):
        support_threshold("dev", -1.0, *args, **kw)
    with pytest.raises(ConfigError, match="held-out source 'test'"):
        support_threshold("held-out", -1.0, *args, **kw, source="test")


def _gold(qid, papers, answerable=True):
    from rag.evaluation.gold import GoldItem

    ev = [{"arxiv_id": p, "page": 1, "quote": "x"} for p in papers] if answerable else []
    kind = "single-paper" if len(papers) == 1 else "multi-paper"
    return GoldItem(
        qid=qid, question=f"question {qid}?", answerable=answerable,
        answer="a" if answerable else "", answer_type="extractive" if answerable else "none",
        kind=kind if answerable else "unanswerable",
        papers=papers if answerable else [], evidence=ev, names_method=False,
    )  # fmt: skip


def test_held_out_gold_questions_never_include_a_graded_one():
    gold = [_gold("a", ["p1"]), _gold("b", ["p2"]), _gold("c", ["p1", "p2"]), _gold("u", [], False)]
    got = held_out_questions("gold", gold=gold, in_slice=["a"])
    # "a" is graded, "c" has two papers (no single paper to remove), "u" has none
    assert got == {"b": ("question b?", "p2")}
    assert held_out_questions("gold", gold=gold, in_slice=["a", "b"]) == {}


def test_held_out_qasper_questions_are_those_on_the_corpus_papers():
    from types import SimpleNamespace as NS

    qasper = [NS(qid="x", question="qx", arxiv_id="p1"), NS(qid="y", question="qy", arxiv_id="p9")]
    assert held_out_questions("qasper", qasper=qasper, papers=["p1"]) == {"x": ("qx", "p1")}
    with pytest.raises(ConfigError, match="held-out source 'dev'"):
        held_out_questions("dev")
