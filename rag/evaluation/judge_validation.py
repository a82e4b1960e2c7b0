"""Validate a faithfulness judge against human labels (SciFact claim / abstract pairs).

SciFact (Wadden et al., 2020) labels each (claim, cited abstract) pair SUPPORT, CONTRADICT or
NOT_ENOUGH_INFO. A judge is scored on the binary question that faithfulness asks — supported or
not — by **balanced accuracy** = (recall on SUPPORT + recall on not-SUPPORT) / 2, which a judge
cannot game by always answering the majority class. Its 95 % CI resamples the pairs (2,000
bootstrap resamples, fixed seed) through :func:`rag.evaluation.stats.bootstrap_ci`. The 3 x 3
confusion matrix (human label x judge label) shows *how* it errs, e.g. whether contradictions pass
as supported. A judge that fails on a pair (an LLM judge's unreadable output) is counted in
``n_failures`` and its own confusion column, and left out of the accuracy — never scored as wrong
or right silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rag import paths
from rag.errors import ConfigError, JudgeError
from rag.evaluation.stats import bootstrap_ci
from rag.judge import VERDICT_LABELS, ClaimJudge, Verdict

logger = logging.getLogger(__name__)

HUMAN_LABELS = ("SUPPORT", "CONTRADICT", "NOT_ENOUGH_INFO")
FAILURE = "judge_failure"
DEV_PATH = "../shared/datasets/scifact/judge_dev.jsonl"


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean per-class recall of a binary decision (classes absent from ``y_true`` are skipped)."""
    recalls = [np.mean(y_pred[y_true == c] == c) for c in (True, False) if np.any(y_true == c)]
    if not recalls:
        raise ConfigError("balanced accuracy of zero pairs is undefined; pass labelled pairs")
    return float(np.mean(recalls))


def _verdicts(judge: ClaimJudge, pairs: Sequence[tuple[str, str]]) -> list[Verdict | str]:
    """Verdicts, or the failure reason for pairs the judge could not judge."""
    predict = getattr(judge, "predict", None)
    if callable(predict):
        return list(predict(pairs, desc=True))
    out: list[Verdict | str] = []
    for claim, ctx in pairs:
        try:
            out.append(judge.verdict(claim, ctx))
        except JudgeError as e:
            out.append(str(e))
    return out


def validate_judge(
    judge: ClaimJudge,
    path: str | Path | None = None,
    *,
    limit: int | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[dict, pd.DataFrame]:
    """Score ``judge`` on SciFact-format human labels (default: ``judge_dev.jsonl``).

    Args:
        judge: any claim judge (a batched ``predict(pairs)`` is used when it has one).
        path: the labelled file, a path parameter as :func:`rag.paths.resolve` reads it
            (``../shared/…`` is the shared data folder, ``$RAG_SHARED_DIR``).
        limit: judge only the first ``limit`` pairs (smoke runs).
        n_resamples: bootstrap resamples for the CI.
        seed: bootstrap seed.

    Returns:
        ``(metrics, table)``: ``metrics`` is ready for ``metrics.json`` (``balanced_accuracy``,
        ``ci_low``, ``ci_high``, ``n``, ``n_failures``, ``confusion`` as
        ``{human: {judge_label: count}}``, per-class recalls, ``seconds``); ``table`` has one row
        per pair with the human label, the judge's label, score and reason.
    """
    from rag.judge.offline import read_pairs

    p = paths.resolve(path if path is not None else DEV_PATH)
    rows = read_pairs(p)[:limit] if limit is not None else read_pairs(p)
    bad = sorted({r["label"] for r in rows} - set(HUMAN_LABELS))
    if bad:
        raise ConfigError(f"{paths.display(p)} has labels {bad}; expected {list(HUMAN_LABELS)}")
    t0 = time.perf_counter()
    verdicts = _verdicts(judge, [(r["claim"], r["abstract"]) for r in rows])
    seconds = time.perf_counter() - t0
    table = pd.DataFrame(
        {
            "claim_id": [str(r["claim_id"]) for r in rows],
            "claim": [r["claim"] for r in rows],
            "human": [r["label"] for r in rows],
            "judge": [v.label if isinstance(v, Verdict) else FAILURE for v in verdicts],
            "score": [v.score if isinstance(v, Verdict) else None for v in verdicts],
            "reason": [v.reason if isinstance(v, Verdict) else v for v in verdicts],
        }
    )
    ok = table[table["judge"] != FAILURE]
    y = (ok["human"] == "SUPPORT").to_numpy()
    yhat = (ok["judge"] == "supported").to_numpy()
    if len(ok) == 0:
        raise JudgeError(f"{judge.name} failed on all {len(rows)} pairs; see the table's reasons")
    ci = bootstrap_ci(
        np.arange(len(ok), dtype=float),
        statistic=lambda idx: balanced_accuracy(y[idx.astype(int)], yhat[idx.astype(int)]),
        n_resamples=n_resamples,
        seed=seed,
    )
    cols = [*VERDICT_LABELS, FAILURE]
    confusion = pd.crosstab(
        pd.Categorical(table["human"], HUMAN_LABELS),
        pd.Categorical(table["judge"], cols),
        dropna=False,
    ).reindex(index=list(HUMAN_LABELS), columns=cols, fill_value=0)
    confusion.index.name, confusion.columns.name = "human", "judge"
    metrics = {
        "judge": judge.name,
        "balanced_accuracy": balanced_accuracy(y, yhat),
        "ci_low": ci.low,
        "ci_high": ci.high,
        "ci_method": ci.method_used,
        "n": int(len(ok)),
        "n_failures": int(len(table) - len(ok)),
        "support_recall": float(np.mean(yhat[y])) if y.any() else None,
        "not_support_recall": float(np.mean(~yhat[~y])) if (~y).any() else None,
        "confusion": {h: {c: int(confusion.loc[h, c]) for c in cols} for h in HUMAN_LABELS},
        "data": paths.display(p),
        "seconds": round(seconds, 1),
    }
    logger.info("%s on %s: balanced accuracy %s", judge.name, metrics["data"], ci)
    return metrics, table


def format_report(metrics: dict) -> str:
    """A plain-text summary: balanced accuracy with its CI, per-class recalls and the confusion."""
    cols = [*VERDICT_LABELS, FAILURE]
    lines = [
        f"judge {metrics['judge']} on {metrics['data']} (n={metrics['n']}, "
        f"failures={metrics['n_failures']}, {metrics['seconds']} s)",
        f"balanced accuracy {metrics['balanced_accuracy']:.3f} "
        f"(95% CI {metrics['ci_low']:.3f}-{metrics['ci_high']:.3f}, {metrics['ci_method']})",
        f"recall on SUPPORT {metrics['support_recall']:.3f}, "
        f"on not-SUPPORT {metrics['not_support_recall']:.3f}",
        "human / judge".ljust(16) + "".join(f"{c:>14}" for c in cols),
    ]
    for h in HUMAN_LABELS:
        lines.append(f"{h:<16}" + "".join(f"{metrics['confusion'][h][c]:>14}" for c in cols))
    return "\n".join(lines)
