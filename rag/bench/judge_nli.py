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
from rag.bench.judges import _summary, paired_balanced_accuracy
from rag.verdicts import Verdict

CORPUS_CLAIMS = "data/judge/corpus_claims.jsonl"
#: The corpus set's labels in SciFact's vocabulary.
TO_SCIFACT = {"supported": "SUPPORT", "contradicted": "CONTRADICT", "not_said": "NOT_ENOUGH_INFO"}


def corpus_claims_file(src: str = CORPUS_CLAIMS) -> Path:
    """The hand-labelled corpus claims as a SciFact-format judge file (ligatures expanded, as the
    chunk text a judge sees in use is)."""
    from rag.text.normalize import expand_ligatures

    out = paths.cache_dir("judge_corpus_claims") / "corpus_claims.scifact.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for line in paths.resolve(src).read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            lines.append(
                json.dumps(
                    {
                        "claim_id": r["id"],
                        "claim": r["claim"],
                        "abstract": expand_ligatures(r["passage"]),
                        "label": TO_SCIFACT[r["label"]],
                        "kind": r["kind"],
                    }
                )
            )
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


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


def compare(judges: dict[str, Any], path: str | Path, baseline: str) -> dict[str, Any]:
    """Every judge on the labelled file ``path``, with the paired difference to ``baseline``."""
    from rag.evaluation.judge_validation import validate_judge

    out, tables = {}, {}
    for name, judge in judges.items():
        metrics, tables[name] = validate_judge(judge, path)
        s = _summary(metrics, len(tables[name]))
        s["pairs_per_s"] = round(len(tables[name]) / max(metrics["seconds"], 1e-9), 2)
        if hasattr(judge, "pairs_computed") and judge.pairs_computed:
            s["model_seconds_per_pair"] = round(judge.seconds_computed / judge.pairs_computed, 2)
        out[name] = s
    human = (tables[baseline]["human"] == "SUPPORT").to_numpy()
    base = (tables[baseline]["judge"] == "supported").to_numpy()
    for name, table in tables.items():
        if name != baseline:
            paired = paired_balanced_accuracy(
                human, (table["judge"] == "supported").to_numpy(), base
            )
            out[name]["paired_minus_" + baseline] = {k: round(v, 4) for k, v in paired.items()}
    if "kind" in json.loads(Path(path).read_text().splitlines()[0]):
        kinds = [json.loads(x)["kind"] for x in Path(path).read_text().splitlines() if x.strip()]
        for name, table in tables.items():
            right = np.where(
                table["human"] == "SUPPORT",
                table["judge"] == "supported",
                table["judge"] != "supported",
            )
            per: dict[str, list[int]] = {}
            for k, ok in zip(kinds, right, strict=True):
                per.setdefault(k, [0, 0])
                per[k][0] += int(ok)
                per[k][1] += 1
            out[name]["right_by_kind"] = {k: f"{a}/{b}" for k, (a, b) in sorted(per.items())}
    return out


def run(yesno: bool = False) -> dict[str, Any]:
    from rag.evaluation.judge_validation import DEV_PATH
    from rag.judge.offline import DEFAULT_JUDGE

    t0 = time.perf_counter()
    built = build_candidates(yesno)
    judges = built["judges"]
    return {
        "what": "supported vs not, the entailment judge's candidates beside offline-v2",
        "candidates_fitted_on": "SciFact judge_train's held-out grouped fold (fold 1 of 5)",
        "notes": built["notes"],
        "scifact_dev": compare(judges, paths.resolve(DEV_PATH), DEFAULT_JUDGE),
        "corpus_claims": compare(judges, corpus_claims_file(), DEFAULT_JUDGE),
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python -m rag.bench.judge_nli" + (" --yesno" if yesno else ""),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rag.bench.judge_nli", description=__doc__)
    ap.add_argument("--yesno", action="store_true", help="include the Qwen 1.5B yes/no judge")
    ap.add_argument("--out", default="outputs/bench/judge_nli.json")
    a = ap.parse_args(argv)
    doc = run(a.yesno)
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
