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


def test_a_cached_rerun_keeps_the_timing_of_the_run_that_computed():
    from rag.bench.judge_nli import keep_cold_timing

    def row(seconds, n=90, judge="nli"):
        return {"judge": judge, "n": n, "seconds": seconds, "pairs_per_s": None}

    earlier = {"corpus_claims": {"nli": row(19.1) | {"pairs_per_s": 4.71}, "yes": row(0.0)}}
    doc = {"corpus_claims": {"nli": row(0.0), "yes": row(0.0), "off": row(0.01, n=80)}}
    kept = keep_cold_timing(doc, earlier)["corpus_claims"]
    assert kept["nli"]["seconds"] == 19.1 and kept["nli"]["pairs_per_s"] == 4.71
    assert "timing_from" in kept["nli"]
    assert kept["yes"]["seconds"] == 0.0 and "timing_from" not in kept["yes"]  # nothing measured
    assert "timing_from" not in kept["off"]  # no earlier row for it
    other_n = keep_cold_timing({"corpus_claims": {"nli": row(0.0, n=80)}}, earlier)
    assert "timing_from" not in other_n["corpus_claims"]["nli"]
