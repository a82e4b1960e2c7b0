"""The entailment judge beside offline-v2 on human labels: SciFact dev and the lab's own claims.

``python -m rag.bench.judge_nli`` scores the pre-registered candidates (docs/experiments.md lists
them, written before SciFact dev was read) on the same pairs:

* ``offline-v2`` — the current default (alignment features, contradiction cues, logistic
  regression);
* ``nli-minilm-v1`` — the lab's entailment cross-encoder (:mod:`rag.judge.nli`), thresholds from
  SciFact train's held-out fold;
* ``yesno-qwen1.5b`` (``--yesno``, needs ``rag models fetch qwen2.5-coder-1.5b``) — the local
  instruct model's P("yes") (:mod:`rag.judge.yesno`), threshold from the same held-out fold;
* ``stack`` — a logistic regression over offline-v2's p(supported) and the cross-encoder's
  p(supported) and p(contradicted) (plus P("yes") with ``--yesno``), fitted on the held-out fold.

Each gets balanced accuracy (supported vs not) with a bootstrap CI, CONTRADICT recall, the 3 x 3
confusion matrix, pairs/s, and the paired difference to offline-v2 (bootstrap CI, permutation p)
on both sets: the 340 SciFact dev pairs and the 90 hand-labelled corpus claims
(``data/judge/corpus_claims.jsonl``, reported only: never used to train or tune). Writes
``outputs/bench/judge_nli.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.bench import write_json
from rag.bench.judges import _summary
from rag.verdicts import Verdict


class ScoreJudge:
    """A judge from a score function and a threshold (the stacked candidate)."""

    def __init__(self, name: str, score, threshold: float) -> None:
        self.name = self.fingerprint = name
        self._score, self.threshold = score, threshold

    def predict(self, pairs: Sequence[tuple[str, str]], desc: bool = False) -> list[Verdict]:
        s = self._score(pairs)
        return [
            Verdict(
                "supported" if v >= self.threshold else "unsupported",
                float(v),
                f"stacked score {v:.2f}",
            )
            for v in s
        ]

    def verdict(self, claim: str, context: str) -> Verdict:
        return self.predict([(claim, context)])[0]


def held_out_rows() -> list[dict]:
    from rag.judge.nli_pin import held_out_split, train_rows

    rows = train_rows()
    return [rows[i] for i in held_out_split(rows)[1]]


def build_candidates(yesno: bool) -> dict[str, Any]:
    """The pre-registered judges, thresholds and stack fitted on SciFact train's held-out fold."""
    from sklearn.linear_model import LogisticRegression

    from rag.judge.fit import best_threshold
    from rag.judge.nli import NliJudge
    from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge

    offline, nli = make_offline_judge(DEFAULT_JUDGE), NliJudge()
    held = held_out_rows()
    pairs = [(r["claim"], r["abstract"]) for r in held]
    y = np.array([r["label"] == "SUPPORT" for r in held])
    judges: dict[str, Any] = {DEFAULT_JUDGE: offline, nli.name: nli}
    cols = [
        lambda p: np.array([v.score for v in offline.predict(p)]),
        lambda p: nli.scores(p)[:, :2],
    ]
    notes: dict[str, Any] = {"held_out_pairs": len(held)}
    if yesno:
        from rag.judge.yesno import YesNoJudge

        yn = YesNoJudge()
        t, ba = best_threshold(y, yn.scores(pairs, desc=True))
        yn.threshold = t
        judges["yesno-qwen1.5b"] = yn
        cols.append(lambda p: yn.scores(p)[:, None])
        notes["yesno_threshold"] = {"threshold": t, "held_out_ba": round(ba, 4)}

    def features(p: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.column_stack([c(p) for c in cols])

    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit(features(pairs), y)
    t, ba = best_threshold(y, lr.predict_proba(features(pairs))[:, 1])
    judges["stack"] = ScoreJudge("stack", lambda p: lr.predict_proba(features(p))[:, 1], t)
    notes["stack"] = {
        "columns": ["offline-v2 p", "nli p_supported", "nli p_contradicted"]
        + (["yes/no P(yes)"] if yesno else []),
        "coef": np.round(lr.coef_[0], 4).tolist(),
        "threshold": t,
        "held_out_ba_in_sample": round(ba, 4),
    }
    return {"judges": judges, "notes": notes}


def compare(
    judges: dict[str, Any], path: str | Path, baseline: str, kinds: Sequence[str] | None = None
) -> dict[str, Any]:
    """Every judge on the labelled file ``path``, with the paired difference to ``baseline`` (and
    the pairs right by kind when ``kinds`` names each pair's kind)."""
    from rag.evaluation.judge_validation import validate_judges

    _, metrics = validate_judges(judges, path, baseline=baseline, groups=kinds)
    out = {}
    for name, m in metrics.items():
        judge = judges[name]
        s = _summary(m, m["n"] + m["n_failures"])
        s["pairs_per_s"] = round(m["n"] / m["seconds"], 2) if m["seconds"] else None
        if getattr(judge, "pairs_computed", 0):
            s["model_seconds_per_pair"] = round(judge.seconds_computed / judge.pairs_computed, 2)
        if "paired" in m:
            s["paired_minus_" + baseline] = {
                k: round(v, 4) for k, v in m["paired"].items() if k != "baseline"
            }
        if "right_by_group" in m:
            s["right_by_kind"] = m["right_by_group"]
        out[name] = s
    return out


def run(yesno: bool = False) -> dict[str, Any]:
    from rag.evaluation.judge_validation import DEV_PATH, lab_claims
    from rag.judge.offline import DEFAULT_JUDGE

    t0 = time.perf_counter()
    claims, kinds = lab_claims()
    built = build_candidates(yesno)
    judges = built["judges"]
    return {
        "what": "supported vs not, the entailment judge's candidates beside offline-v2",
        "candidates_fitted_on": "SciFact judge_train's held-out grouped fold (fold 1 of 5)",
        "notes": built["notes"],
        "scifact_dev": compare(judges, paths.resolve(DEV_PATH), DEFAULT_JUDGE),
        "corpus_claims": compare(judges, claims, DEFAULT_JUDGE, kinds),
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python -m rag.bench.judge_nli" + (" --yesno" if yesno else ""),
    }


#: The timing fields of a judge's row, kept from an earlier run when this one computed nothing.
TIMING = ("seconds", "seconds_per_pair", "pairs_per_s", "model_seconds_per_pair")


def keep_cold_timing(doc: dict[str, Any], earlier: dict[str, Any] | None) -> dict[str, Any]:
    """Keep an earlier run's timings for a judge that read every pair from its cache this time.

    Only for the same judge on the same number of pairs, and only an earlier timing that measured
    something (its ``seconds`` above zero); the row then says where its timing comes from."""
    for part in ("scifact_dev", "corpus_claims"):
        for name, row in doc.get(part, {}).items():
            held = (earlier or {}).get(part, {}).get(name, {})
            if (
                row.get("seconds", 1.0) < 0.05
                and held.get("seconds", 0.0) > 0.0
                and held.get("n") == row.get("n")
                and held.get("judge") == row.get("judge")
            ):
                row.update({k: held[k] for k in TIMING if k in held})
                row["timing_from"] = (
                    "an earlier run of the same command (this one read every pair from the cache)"
                )
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rag.bench.judge_nli", description=__doc__)
    ap.add_argument("--yesno", action="store_true", help="include the Qwen 1.5B yes/no judge")
    ap.add_argument("--out", default="outputs/bench/judge_nli.json")
    a = ap.parse_args(argv)
    out = paths.resolve(a.out)
    earlier = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
    doc = keep_cold_timing(run(a.yesno), earlier)
    write_json(doc, a.out)
    for part in ("scifact_dev", "corpus_claims"):
        for name, s in doc[part].items():
            print(
                f"{part:14s} {name:24s} BA {s['balanced_accuracy']:.3f} "
                f"({s['ci_low']:.3f}-{s['ci_high']:.3f}) contradict {s['contradict_recall']} "
                f"{s['pairs_per_s']} pairs/s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
