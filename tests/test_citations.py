"""ALCE citation precision / recall and faithfulness on hand-built answers.

The fake entailment: a premise supports a claim when it contains every word of the claim
(lower-cased), so joint support from two sources is possible and every value can be derived by
hand.
"""

from __future__ import annotations

import re

import pytest

from rag.answer.claims import parse_answer
from rag.evaluation.citations import (
    CitedUnit,
    citation_metrics,
    citation_scores,
    cited_units,
    faithfulness,
    faithfulness_metrics,
    mean_defined,
)
from rag.judge import AnswerJudgement, Verdict, judge_claims


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def entails(claim: str, premise: str) -> bool:
    return _words(claim) <= _words(premise)


class WordJudge:
    """A claim judge with the fake entailment rule."""

    name = "word-judge"
    fingerprint = "word-judge:subset"

    def verdict(self, claim: str, context: str) -> Verdict:
        ok = entails(claim, context)
        return Verdict("supported" if ok else "unsupported", float(ok), "word containment")


SOURCES = {
    1: "Dense retrieval beats sparse retrieval on NQ.",
    2: "The index is exact and fast.",
    3: "Unrelated text about cooking pasta.",
}


def _scores(answer: str):
    return citation_scores(cited_units(parse_answer(answer)), SOURCES, entails)


def test_correctly_cited_answer_scores_one_and_one():
    s = _scores("Dense retrieval beats sparse retrieval [1]. The index is exact [2].")
    assert (s.recall, s.precision, s.n_units, s.n_citations) == (1.0, 1.0, 2, 2)


def test_wrong_citation_plus_uncited_sentence():
    # Sentence 1 cites the wrong source (unsupported, its citation irrelevant); sentence 2 is
    # correct; sentence 3 cites nothing (a recall miss, no citation to count).
    # recall = 1/3 (only sentence 2), precision = 1 relevant / 2 citations = 1/2.
    s = _scores(
        "Dense retrieval beats sparse retrieval [2]. The index is fast [2]. "
        "Dense retrieval beats sparse retrieval on NQ."
    )
    assert s.recall == pytest.approx(1 / 3)
    assert s.precision == pytest.approx(1 / 2)
    assert [u.supported for u in s.units] == [False, True, False]
    assert [u.relevant for u in s.units] == [(False,), (True,), ()]


def test_over_citation_is_irrelevant_but_needed_joint_citations_are_not():
    # [1][3]: 1 alone supports -> relevant; 3 alone does not and 1 without it still does ->
    # irrelevant. [1, 2]: neither alone supports, neither remainder does -> both relevant.
    over = _scores("Dense retrieval beats sparse retrieval [1][3].")
    assert (over.recall, over.precision) == (1.0, 0.5)
    assert over.units[0].relevant == (True, False)
    joint = _scores("Dense retrieval is exact and fast [1, 2].")
    assert (joint.recall, joint.precision) == (1.0, 1.0)


def test_unknown_source_id_counts_as_empty_source():
    s = _scores("The index is exact [9].")
    assert (s.recall, s.precision) == (0.0, 0.0)
    assert s.units[0].unknown == (9,)
    # Supported through the known id; the unknown one is an irrelevant extra citation.
    s2 = _scores("The index is exact [2][9].")
    assert (s2.recall, s2.precision) == (1.0, 0.5)


def test_undefined_cases_are_none_with_reason():
    refusal = _scores("The sources do not contain the answer.")
    assert (refusal.recall, refusal.precision, refusal.reason) == (
        None,
        None,
        "no claim-bearing unit",
    )
    uncited = _scores("The index is exact and fast.")
    assert (uncited.recall, uncited.precision, uncited.reason) == (0.0, None, "no citation")


def test_claim_level_units_inherit_sentence_citations():
    parsed = parse_answer("The index is exact, and it cooks pasta [2].")
    units = cited_units(parsed, level="claim")
    assert units == [CitedUnit("The index is exact", (2,)), CitedUnit("it cooks pasta", (2,))]
    s = citation_scores(units, SOURCES, entails)
    assert (s.recall, s.precision) == (0.5, 0.5)


def test_citation_metrics_aggregate_skips_undefined():
    answers = [
        (cited_units(parse_answer(a)), SOURCES)
        for a in (
            "Dense retrieval beats sparse retrieval [1]. The index is exact [2].",
            "Dense retrieval beats sparse retrieval [2]. The index is fast [2]. "
            "Dense retrieval beats sparse retrieval on NQ.",
            "I cannot find the answer in the sources.",
        )
    ]
    m = citation_metrics(answers, entails)
    # recall: (1 + 1/3) / 2 = 2/3; precision: (1 + 1/2) / 2 = 3/4; the refusal is undefined.
    assert m["citation_recall"]["mean"] == pytest.approx(2 / 3)
    assert m["citation_precision"]["mean"] == pytest.approx(3 / 4)
    assert (m["citation_recall"]["n"], m["citation_recall"]["n_undefined"]) == (2, 1)


def test_faithfulness_counts_refusals_and_failures_apart():
    context = "\n".join(SOURCES.values())
    judge = WordJudge()
    js = [
        judge_claims(
            judge, "Dense retrieval beats sparse retrieval [1]. The index is exact [2].", context
        ),
        judge_claims(judge, "The index is exact [2]. Cats fly over the moon.", context),
        judge_claims(judge, "The sources do not contain the answer.", context),
        judge_claims(judge, "Yes.", context),
        AnswerJudgement(status="judge_failure", reason="malformed JSON", judge="llm"),
    ]
    assert [faithfulness(j) for j in js] == [1.0, 0.5, None, None, None]
    m = faithfulness_metrics(js)
    assert m["faithfulness"] == pytest.approx(0.75)  # (1 + 0.5) / 2, nothing else averaged
    assert (m["n_scored"], m["n_refusal"], m["n_no_claims"], m["n_judge_failure"]) == (2, 1, 1, 1)
    assert m["answered_rate"] == pytest.approx(3 / 5)  # 2 scored + 1 judged-but-failed
    assert m["claims_per_answer"] == 2.0


def test_empty_inputs_are_explicit():
    assert mean_defined([]) == {"mean": None, "n": 0, "n_undefined": 0}
    assert faithfulness_metrics([])["answered_rate"] is None
