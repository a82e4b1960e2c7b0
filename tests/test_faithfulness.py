"""rag.evaluation.faithfulness: grading answerers on shared contexts, with hand-derived values.

The judge is a real (if simple) claim judge: a claim is supported when its words appear verbatim
in the premise. That makes every faithfulness and citation score below derivable by hand.
"""

from __future__ import annotations

import math

import pytest

from rag.answer.base import Answer
from rag.answer.context import Context, Source
from rag.answer.prompts import REFUSAL
from rag.evaluation.faithfulness import (
    context_text,
    grade_answerer,
    paired_table,
    pick_examples,
    summary_table,
)
from rag.evaluation.gold import Evidence, GoldItem
from rag.judge import ClaimJudge, Verdict, judge_claims


class VerbatimJudge:
    """Supported iff the claim (lower-cased, final period dropped) is a substring of the premise."""

    name = "verbatim"
    fingerprint = "verbatim:substring"

    def verdict(self, claim: str, context: str) -> Verdict:
        found = claim.lower().rstrip(".").strip() in context.lower()
        return Verdict("supported" if found else "not_found", float(found), "substring")

    def entails(self, claim: str, premise: str) -> bool:
        return self.verdict(claim, premise).supported

    def judge_answer(self, answer: str, context: str):
        return judge_claims(self, answer, context)


JUDGE = VerbatimJudge()

A1 = "Dense retrieval uses dual encoders."
B1 = "BM25 scores terms by frequency."
X = "Unrelated text about cats."


def ctx(*chunks: tuple[str, str]) -> Context:
    sources = tuple(
        Source(n, n, cid, "P", "T", 1, "", text, 1.0 / n, 10)
        for n, (cid, text) in enumerate(chunks, start=1)
    )
    return Context(sources, "score", 1500, len(sources))


CONTEXTS = {
    "qa": ctx(("c-a1", A1), ("c-b1", B1)),
    "qb": ctx(("c-b1", B1), ("c-x", X)),
    "qc": ctx(("c-x", X)),
}


def item(qid: str, answer: str = "") -> GoldItem:
    """An extractive single-paper question, or (no answer) an unanswerable one."""
    common = {"qid": qid, "question": "?", "answer": answer, "names_method": False}
    if not answer:
        return GoldItem(**common, answerable=False, answer_type="none", kind="unanswerable",
                        papers=[], evidence=[])  # fmt: skip
    ev = [Evidence(arxiv_id="P", page=1, quote="q")]
    return GoldItem(**common, answerable=True, answer_type="extractive", kind="single-paper",
                    papers=["P"], evidence=ev)  # fmt: skip


ITEMS = [item("qa", "dual encoders"), item("qb", "term frequency"), item("qc")]


def answers(texts: dict[str, str], name: str, **usage) -> dict[str, Answer]:
    return {q: Answer(t, {}, name, refused=t == REFUSAL, **usage) for q, t in texts.items()}


GOOD = answers(
    {
        "qa": "Dense retrieval uses dual encoders [1].",  # supported, cites its source
        "qb": "BM25 scores terms by frequency [1][2].",  # supported; [2] is a needless citation
        "qc": REFUSAL,  # unanswerable: declining is right
    },
    "good",
)
BAD = answers(
    {
        "qa": "Dense retrieval uses sparse vectors [2].",  # unsupported, wrong citation
        "qb": "BM25 scores terms by frequency [1]. Cats are unrelated to ranking [2].",  # 1 of 2
        "qc": "Cats purr loudly at night [1].",  # answers an unanswerable question, unsupported
    },
    "bad",
)
# scored on qa only: never comparable with another answerer on two questions
SILENT = answers({"qa": "Dense retrieval uses dual encoders [1].", "qb": REFUSAL, "qc": REFUSAL},
                 "silent")  # fmt: skip


@pytest.fixture(scope="module")
def grades():
    return {
        name: grade_answerer(name, a, CONTEXTS, ITEMS, JUDGE)
        for name, a in (("good", GOOD), ("bad", BAD), ("silent", SILENT))
    }


def test_the_fake_judge_is_a_claim_judge():
    assert isinstance(JUDGE, ClaimJudge)


def test_context_text_joins_sources_in_prompt_order():
    assert context_text(CONTEXTS["qa"]) == f"{A1}\n\n{B1}"


def test_grade_answerer_per_question_by_hand(grades):
    good, bad = grades["good"].per_question, grades["bad"].per_question
    assert list(good.index) == ["qa", "qb", "qc"]
    assert good["status"].tolist() == ["scored", "scored", "refusal"]
    assert good["claims"].tolist()[:2] == [1, 1] and math.isnan(good.loc["qc", "claims"])
    assert good["faithfulness"].tolist()[:2] == [1.0, 1.0] and good["faithfulness"].isna()["qc"]
    # ALCE: qb's unit is entailed by [1] alone, and without [2] still entailed -> [2] irrelevant
    assert good["citation_recall"].tolist()[:2] == [1.0, 1.0]
    assert good["citation_precision"].tolist()[:2] == [1.0, 0.5]
    assert good["refused"].tolist() == [False, False, True]
    # token F1 (SQuAD): "dense retrieval uses dual encoders" vs "dual encoders": P 2/5, R 1
    assert good.loc["qa", "answer_f1"] == pytest.approx(2 * 0.4 * 1 / 1.4)
    # "bm25 scores terms by frequency" vs "term frequency": only "frequency" is common, P 1/5, R 1/2
    assert good.loc["qb", "answer_f1"] == pytest.approx(2 * 0.2 * 0.5 / 0.7)
    assert good["answer_f1"].isna()["qc"], "unanswerable: no F1"
    assert bad["faithfulness"].tolist() == [0.0, 0.5, 0.0]
    assert bad["claims"].tolist() == [1, 2, 1]
    assert bad["citation_recall"].tolist() == [0.0, 0.5, 0.0]
    assert bad["citation_precision"].tolist() == [0.0, 0.5, 0.0]
    assert bad["kind"].tolist() == ["single-paper", "single-paper", "unanswerable"]


def test_grade_answerer_aggregates_by_hand(grades):
    g, b = grades["good"], grades["bad"]
    assert (g.faithfulness["n_scored"], g.faithfulness["n_refusal"]) == (2, 1)
    assert g.faithfulness["answered_rate"] == pytest.approx(2 / 3)
    assert g.faithfulness["faithfulness"] == 1.0 and g.faithfulness["claims_per_answer"] == 1.0
    assert "per_answer" not in g.faithfulness
    assert b.faithfulness["answered_rate"] == 1.0
    assert b.faithfulness["faithfulness"] == pytest.approx((0 + 0.5 + 0) / 3)
    assert b.faithfulness["claims_per_answer"] == pytest.approx(4 / 3)
    assert g.quality["negative_rejection"].value == 1.0, "declined the unanswerable question"
    assert b.quality["negative_rejection"].value == 0.0
    assert g.quality["false_rejection"].value == 0.0
    assert g.quality["boolean_accuracy"].value is None, "no boolean question: undefined, not 0"


def test_summary_table_by_hand(grades):
    t = summary_table([grades["good"], grades["bad"]])
    assert list(t.index) == ["good", "bad"]
    assert t.loc["good", "faithfulness"] == 1.0 and t.loc["good", "faithfulness n"] == 2
    assert t.loc["good", "faithfulness CI"] == (1.0, 1.0), "constant data: [x, x]"
    assert t.loc["good", "citation_precision"] == pytest.approx(0.75)
    assert t.loc["bad", "faithfulness"] == pytest.approx(1 / 6)
    assert t.loc["bad", "faithfulness n"] == 3
    lo, hi = t.loc["bad", "faithfulness CI"]
    assert 0.0 <= lo <= 1 / 6 <= hi <= 0.5
    assert t.loc["bad", "citation_recall"] == pytest.approx(1 / 6)
    assert t.loc["good", "answer_f1 n"] == 2
    assert (t.loc["good", "negative_rejection"], t.loc["bad", "negative_rejection"]) == (1.0, 0.0)
    assert t.loc["good", "answered_rate"] == pytest.approx(2 / 3)
    assert t.loc["good", "cost_usd"] == 0.0 and t.loc["good", "calls_fresh"] == 3


def test_cost_counts_fresh_calls_only():
    paid = answers({"qa": GOOD["qa"].text, "qb": GOOD["qb"].text}, "paid",
                   tokens_in=100, tokens_out=20, cost_usd=0.01, latency_s=2.0)  # fmt: skip
    paid["qb"] = Answer(paid["qb"].text, {}, "paid", False, 100, 20, 0.01, 0.0, cached=True)
    c = grade_answerer("paid", paid, CONTEXTS, ITEMS, JUDGE).cost()
    assert c == {
        "cost_usd": 0.01,  # the cached answer cost nothing this run
        "tokens": {"input": 200, "output": 40},
        "calls_fresh": 1,
        "calls_cached": 1,
        "latency_s_fresh_mean": 2.0,
    }


def test_to_metrics_is_the_summary_row(grades):
    t = summary_table([grades["good"]])
    m = grades["good"].to_metrics(t.loc["good"])
    assert m["faithfulness"] == {
        "mean": 1.0,
        "ci": [1.0, 1.0],
        "n_scored": 2,
        "answered_rate": pytest.approx(2 / 3),
        "n_refusal": 1,
        "n_no_claims": 0,
        "n_judge_failure": 0,
    }
    assert m["citation_precision"]["mean"] == pytest.approx(0.75)
    assert m["citation_precision"]["n"] == 2 and isinstance(m["citation_precision"]["n"], int)
    assert m["citation_recall"] == {"mean": 1.0, "ci": [1.0, 1.0], "n": 2}
    assert m["negative_rejection"] == 1.0 and m["boolean_accuracy"] is None
    assert m["claims_per_answer"] == 1.0
    assert m["cost_usd"] == 0.0 and m["tokens"] == {"input": 0, "output": 0}
    assert set(m) == {"faithfulness", "citation_precision", "citation_recall", "answer_f1",
                      "boolean_accuracy", "negative_rejection", "false_rejection",
                      "claims_per_answer", "cost_usd", "tokens", "exact_match", "repeated_lines",
                      "boolean_n", "boolean_answers", "negative_rejection_n"}  # fmt: skip


def test_paired_table_with_a_pair_that_is_not_comparable(grades):
    t = paired_table([grades["good"], grades["bad"], grades["silent"]])
    rows = {(r["a"], r["b"]): r for r in t.to_dict("records")}
    assert list(rows) == [("good", "bad"), ("good", "silent"), ("bad", "silent")]
    gb = rows[("good", "bad")]
    # both scored qa and qb: differences 1 - 0 and 1 - 0.5
    assert gb["n"] == 2 and gb["diff"] == pytest.approx(0.75)
    # exact randomisation test over the 2^2 sign flips of (1, 0.5): means 0.75, 0.25, -0.25,
    # -0.75, of which two are as extreme as 0.75 -> p = 2/4; resampled means lie in [0.5, 1]
    assert gb["p_value"] == pytest.approx(0.5)
    assert gb["p_adjusted"] == pytest.approx(0.5), "one comparable pair: Holm changes nothing"
    assert (gb["ci_low"], gb["ci_high"]) == pytest.approx((0.5, 1.0))
    assert gb["reading"].startswith("good beats bad by 0.750 faithfulness")
    for pair in (("good", "silent"), ("bad", "silent")):
        assert rows[pair]["n"] == 1
        assert rows[pair]["reading"] == "not comparable: 1 question(s) scored by both"
        assert math.isnan(rows[pair]["p_adjusted"])


def test_pick_examples_by_rule(grades):
    relevant = {"qa": {"c-a1": 1}, "qb": {"c-b9": 1, "c-b1": 0}, "qc": {}}
    got = pick_examples(grades, CONTEXTS, relevant, ITEMS, "good")
    # qa's relevant chunk is source [1]; qb's only relevant chunk (grade 0 does not count) is not
    # in its context -> the first retrieval miss; good declined qc, whose context holds nothing
    # relevant -> a faithful non-answer
    assert got == {"retrieval_miss": "qb", "faithful_non_answer": "qc"}
    assert pick_examples(grades, CONTEXTS, relevant, ITEMS, "bad") == {
        "retrieval_miss": "qb",
        "faithful_non_answer": None,  # bad never declined
    }
    # silent declined qb, a retrieval miss, before qc
    assert pick_examples(grades, CONTEXTS, relevant, ITEMS, "silent")["faithful_non_answer"] == "qb"
    # questions without a context or an answer are skipped, in gold order
    only_qc = pick_examples(grades, {"qc": CONTEXTS["qc"]}, relevant, ITEMS, "good")
    assert only_qc == {"retrieval_miss": None, "faithful_non_answer": "qc"}
