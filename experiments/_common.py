"""What the judge experiments share: SciFact judge rows, the offline judge's folds and its fitting.

Every judge experiment fits the offline judge's logistic regression the judge's own way (C grid
and threshold maximising balanced accuracy on grouped out-of-fold predictions) and scores SciFact
dev with the same card, so a difference between two columns sets is the columns', not the
procedure's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.errors import ConfigError
from rag.jsonl import iter_jsonl

TRAIN_PATH = "../shared/datasets/scifact/judge_train.jsonl"
DEV_PATH = "../shared/datasets/scifact/judge_dev.jsonl"


def norm(text: str) -> str:
    """``text`` with runs of whitespace collapsed to one space (how rationales are compared)."""
    return " ".join(text.split())


def read_rows(path: str | Path) -> list[dict]:
    """SciFact judge rows with their rationale sentences flattened into ``rationales``."""
    rows = []
    for _, r in iter_jsonl(paths.resolve(str(path)), ConfigError):
        rows.append(
            {
                "claim_id": r["claim_id"],
                "claim": r["claim"],
                "abstract": r["abstract"],
                "label": r["label"],
                "doc_id": str(r.get("doc_id", "")),
                "title": r.get("title", ""),
                "rationales": [norm(s) for group in r.get("rationales") or [] for s in group],
            }
        )
    if not rows:
        raise ConfigError(f"{path}: no judge pairs")
    return rows


def grouped_folds(rows: Sequence[dict], settings: Any, n_splits: int) -> tuple[np.ndarray, list]:
    """SUPPORT labels and the offline judge's grouped, stratified folds of ``rows``."""
    from sklearn.model_selection import StratifiedGroupKFold

    from rag.judge.offline import cv_groups

    y = np.array([r["label"] == "SUPPORT" for r in rows])
    split = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=settings.seed)
    return y, list(split.split(np.zeros(len(rows)), y, cv_groups(rows, settings.cv_groups)))


def train_setup(
    train_path: str, *, limit: int = 0, n_splits: int = 0, embedder: Any = None
) -> tuple[list[dict], Any, Any, np.ndarray, list]:
    """What every judge experiment starts from: the train rows (the first ``limit``), the judge's
    settings, its fp32 MiniLM (unless ``embedder``), SUPPORT labels and the grouped folds."""
    from rag.index.embed import minilm
    from rag.judge.offline import OfflineJudgeSettings

    rows = read_rows(train_path)
    if limit:
        rows = rows[:limit]
    settings = OfflineJudgeSettings()
    embedder = embedder or minilm(passage_backend="torch")  # the judge's own fp32 features
    y, folds = grouped_folds(rows, settings, n_splits or settings.cv_folds)
    return rows, settings, embedder, y, folds


def stack_cv(
    x: np.ndarray, y: np.ndarray, x_dev: np.ndarray, folds: Sequence, settings: Any
) -> tuple[dict, np.ndarray, np.ndarray]:
    """The offline judge's logistic-regression choice (C grid, threshold maximising balanced
    accuracy) on grouped out-of-fold predictions of train: (chosen C, threshold and CV BA; the
    chosen model's out-of-fold train probabilities; its dev probabilities, fitted on all train)."""
    from rag.judge.fit import best_threshold, make_model

    best, best_oof = None, None
    for c in settings.logreg_c:
        oof = np.zeros(len(y))
        for tr, te in folds:
            oof[te] = (
                make_model("logreg", c, settings.seed).fit(x[tr], y[tr]).predict_proba(x[te])[:, 1]
            )
        t, ba = best_threshold(y, oof)
        if best is None or ba > best["cv_ba"] + 1e-12:
            best, best_oof = {"C": c, "threshold": t, "cv_ba": round(ba, 4)}, oof
    model = make_model("logreg", best["C"], settings.seed).fit(x, y)
    return best, best_oof, model.predict_proba(x_dev)[:, 1]


def dev_card(rows: Sequence[dict], supported: np.ndarray) -> dict:
    """Balanced accuracy of SUPPORT-vs-not on ``rows``, its bootstrap CI and per-label recall."""
    from rag.evaluation.judge_validation import balanced_accuracy, class_recall
    from rag.evaluation.stats import bootstrap_ci

    y = np.array([r["label"] == "SUPPORT" for r in rows])
    ci = bootstrap_ci(
        np.arange(len(y), dtype=float),
        statistic=lambda idx: balanced_accuracy(y[idx.astype(int)], supported[idx.astype(int)]),
    )
    return {
        "balanced_accuracy": round(balanced_accuracy(y, supported), 4),
        "ci": [round(ci.low, 4), round(ci.high, 4)],
        "n": len(y),
        "class_recall": class_recall(np.array([r["label"] for r in rows]), supported),
    }
