"""Paired comparison of two models behind the same answerer: same questions, same contexts.

Notebook 05 can run more local models (``local_models``) through the same variants as its
default ``local_model`` (plain, grammar, grammar + gate, ...). Each extra model's row is compared
with the default model's row of the same variant, question by question, on what notebook 05
reports: faithfulness, citation recall, negative rejection (declined unanswerable questions),
false rejection (declined answerable ones), token F1 and seconds per answer. Each comparison is
the paired randomisation test of :func:`rag.evaluation.stats.paired_test` on the questions both
rows were scored on, with the bootstrap 95 % CI of the mean difference, and Holm's correction
within each metric over the pairs compared.

Seconds per answer are compared only on answers for which both rows called the model in this run:
a cached answer carries the cache lookup time, not the model's, and a gate's refusal makes no call.
A gated row's passed answers are its ungated row's cached ones, so it has no seconds of its own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rag.evaluation.faithfulness import AnswererGrade
from rag.evaluation.stats import correct, paired_test

#: The compared metrics and whether a higher value is better.
HIGHER_IS_BETTER: dict[str, bool] = {
    "faithfulness": True,
    "citation_recall": True,
    "negative_rejection": True,
    "false_rejection": False,
    "answer_f1": True,
    "seconds_per_answer": False,
}


def per_question(grade: AnswererGrade, metric: str) -> pd.Series:
    """``{qid: value}`` of one metric for one row, undefined questions left out.

    Raises:
        KeyError: an unknown metric (one of :data:`HIGHER_IS_BETTER`).
    """
    if metric not in HIGHER_IS_BETTER:
        raise KeyError(f"metric {metric!r}: choose from {list(HIGHER_IS_BETTER)}")
    if metric == "seconds_per_answer":
        values = {
            q: a.latency_s
            for q, a in grade.answers.items()
            if not a.cached and (a.tokens_in or a.tokens_out)
        }
    elif metric in ("negative_rejection", "false_rejection"):
        result = grade.quality.get(metric)
        values = dict(result.per_question) if result is not None else {}
    else:
        values = grade.per_question[metric].to_dict()
    return pd.Series(values, dtype=float).dropna()


def _verdict(diff: float, low: float, high: float, p: float, higher_better: bool) -> str:
    if not (p < 0.05 and (low > 0 or high < 0)):
        return "not distinguishable"
    return "model better" if (diff > 0) == higher_better else "baseline better"


def paired_models(
    grades: Mapping[str, AnswererGrade],
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str] = tuple(HIGHER_IS_BETTER),
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (model row, baseline row, metric): means, paired difference, CI and test.

    Args:
        grades: graded rows by name.
        pairs: ``(model row, baseline row)`` names, e.g. the same variant of two models.
        metrics: which metrics (:data:`HIGHER_IS_BETTER`).
        seed: seed of the test and the bootstrap.

    Returns:
        Columns ``row``, ``baseline``, ``metric``, ``n``, ``model``, ``baseline mean``, ``diff``
        (model − baseline), ``ci_low``, ``ci_high``, ``p_value``, ``p_holm`` and ``verdict``
        ("model better", "baseline better", "not distinguishable", or why no test was run).
    """
    return _paired(lambda row, m: per_question(grades[row], m), pairs, metrics, seed)


def trace_values(traces: Sequence[Mapping[str, Any]], row: str, metric: str) -> pd.Series:
    """``{qid: value}`` of one metric for one row, read from notebook 05's ``traces.jsonl``
    records with the same definitions as :func:`per_question`.

    Raises:
        KeyError: an unknown metric, or a row no trace names.
    """
    if metric not in HIGHER_IS_BETTER:
        raise KeyError(f"metric {metric!r}: choose from {list(HIGHER_IS_BETTER)}")
    mine = [t for t in traces if t["answerer"] == row]
    if not mine:
        raise KeyError(f"no trace of row {row!r}; rows: {sorted({t['answerer'] for t in traces})}")
    if metric == "seconds_per_answer":
        values = {t["qid"]: t["latency_s"] for t in mine if _model_time(t)}
    elif metric in ("negative_rejection", "false_rejection"):
        want = metric == "false_rejection"  # answerable questions for false rejection
        values = {t["qid"]: float(t["refused"]) for t in mine if bool(t["answerable"]) == want}
    else:
        values = {t["qid"]: t[metric] for t in mine}
    return pd.Series(values, dtype=float).dropna()


def _model_time(trace: Mapping[str, Any]) -> bool:
    """True when the answer was computed in this run by a model (tokens spent, not cached)."""
    tokens = trace.get("tokens") or {}
    return not trace["cached"] and bool(tokens.get("input") or tokens.get("output"))


def paired_from_traces(
    traces: Sequence[Mapping[str, Any]],
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str] = tuple(HIGHER_IS_BETTER),
    *,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`paired_models` over the rows of a rendered 05's traces: any two rows, e.g. two extra
    models against each other, compared after the run."""
    return _paired(lambda row, m: trace_values(traces, row, m), pairs, metrics, seed)


def _paired(
    values: Callable[[str, str], pd.Series],
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str],
    seed: int,
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    tested: dict[str, list[tuple[int, Any]]] = {}
    for a, b in pairs:
        for metric in metrics:
            both = pd.concat([values(a, metric), values(b, metric)], axis=1, keys=["a", "b"])
            both = both.dropna()
            row: dict[str, Any] = {"row": a, "baseline": b, "metric": metric, "n": len(both)}
            if len(both) < 2:
                why = (
                    "with a model call in this run (cached or declined answers have no model time)"
                    if metric == "seconds_per_answer"
                    else "scored"
                )
                row["verdict"] = f"not compared: {len(both)} question(s) {why} in both rows"
                rows.append(row)
                continue
            r = paired_test(both["a"].to_numpy(float), both["b"].to_numpy(float), seed=seed)
            row.update(
                {
                    "model": r.mean_a,
                    "baseline mean": r.mean_b,
                    "diff": r.diff,
                    "ci_low": r.ci.low,
                    "ci_high": r.ci.high,
                    "p_value": r.p_value,
                }
            )
            tested.setdefault(metric, []).append((len(rows), r))
            rows.append(row)
    for metric, found in tested.items():
        for (i, _), r in zip(found, correct([r for _, r in found], "holm"), strict=True):
            row = rows[i]
            row["p_holm"] = r.p_adjusted
            row["verdict"] = _verdict(
                row["diff"], row["ci_low"], row["ci_high"], r.p, HIGHER_IS_BETTER[metric]
            )
    cols = ["row", "baseline", "metric", "n", "model", "baseline mean", "diff", "ci_low",
            "ci_high", "p_value", "p_holm", "verdict"]  # fmt: skip
    return pd.DataFrame(rows).reindex(columns=cols)


def pairs_reading(table: pd.DataFrame, baseline: str) -> str:
    """A markdown reading of :func:`paired_models`: one line per compared row."""
    lines = []
    for row, part in table.groupby("row", sort=False):
        bits = []
        for _, r in part.iterrows():
            if pd.isna(r["diff"]):
                bits.append(f"{r['metric']}: {r['verdict']}")
                continue
            bits.append(
                f"{r['metric']} {r['model']:.3f} vs {r['baseline mean']:.3f} "
                f"(diff {r['diff']:+.3f}, 95% CI {r['ci_low']:+.3f}–{r['ci_high']:+.3f}, "
                f"n={int(r['n'])}, Holm p={r['p_holm']:.3g}: {r['verdict']})"
            )
        lines.append(f"- **{row}** vs `{part['baseline'].iloc[0]}`: " + "; ".join(bits))
    return (
        f"**Reading.** Each extra local model against {baseline} behind the same answerer, "
        "question by question on the same contexts (paired randomisation test, Holm-corrected "
        "within each metric; a difference counts when p < 0.05 and the CI excludes 0):\n\n"
        + "\n".join(lines)
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rag.evaluation.model_pairs",
        description="Pair two rows of a rendered notebook 05 question by question, from its "
        "traces.jsonl (the test and CI of the notebook's paired-models table).",
    )
    p.add_argument("traces", help="e.g. outputs/qwen/05_faithfulness/traces.jsonl")
    p.add_argument("--row", required=True, help="the row compared, as the traces name it")
    p.add_argument("--baseline", required=True, help="the row it is compared with")
    p.add_argument("--seed", type=int, default=0, help="the notebook's seed (default 0)")
    args = p.parse_args(argv)
    text = Path(args.traces).read_text(encoding="utf-8")
    traces = [json.loads(line) for line in text.splitlines() if line.strip()]
    table = paired_from_traces(traces, [(args.row, args.baseline)], seed=args.seed)
    print(table.drop(columns=["row", "baseline"]).to_string(index=False, float_format="%.4g"))
    return 0


__all__ = [
    "HIGHER_IS_BETTER",
    "paired_from_traces",
    "paired_models",
    "pairs_reading",
    "per_question",
    "trace_values",
]


if __name__ == "__main__":
    raise SystemExit(main())
