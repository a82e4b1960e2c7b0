"""The entailment-judge bench: the corpus claims in SciFact's format, and the paired comparison."""

from __future__ import annotations

import json

from rag.bench.judge_nli import ScoreJudge, compare
from rag.evaluation.judge_validation import lab_claims
from rag.verdicts import Verdict


def test_the_corpus_claims_become_a_scifact_judge_file(tmp_cache):
    path, kinds = lab_claims()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(rows) >= 90
    assert {r["label"] for r in rows} == {"SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"}
    assert not any("\ufb01" in r["abstract"] for r in rows), "ligatures expanded as chunks are"
    assert all(r["claim"] and r["claim_id"].startswith("cc-") for r in rows)
    assert len(kinds) == len(rows) and all(kinds) and len(set(kinds)) >= 9


class Always:
    def __init__(self, label: str) -> None:
        self.name = self.fingerprint = label

    def verdict(self, claim: str, context: str) -> Verdict:
        return Verdict(self.name, 1.0 if self.name == "supported" else 0.0, "fixed")


def test_compare_scores_every_judge_and_pairs_them_with_the_baseline(tmp_path):
    path = tmp_path / "pairs.jsonl"
    labels = ["SUPPORT", "SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO"]
    path.write_text("".join(json.dumps({"claim_id": str(i), "claim": f"claim {i}",
                                        "abstract": "a passage.", "label": lab}) + "\n"
                            for i, lab in enumerate(labels)))  # fmt: skip
    oracle = ScoreJudge("oracle", lambda pairs: [1.0, 1.0, 0.0, 0.0], 0.5)
    kinds = ["k" + lab[0] for lab in labels]
    out = compare({"yes": Always("supported"), "oracle": oracle}, path, "yes", kinds)
    assert out["yes"]["balanced_accuracy"] == 0.5 and out["oracle"]["balanced_accuracy"] == 1.0
    assert out["yes"]["contradict_recall"] == "0/1" and out["oracle"]["contradict_recall"] == "1/1"
    assert out["oracle"]["paired_minus_yes"]["diff"] == 0.5
    assert out["oracle"]["right_by_kind"] == {"kC": "1/1", "kN": "1/1", "kS": "2/2"}
    assert out["yes"]["right_by_kind"]["kS"] == "2/2" and out["yes"]["right_by_kind"]["kC"] == "0/1"
