"""Fitting the offline judge: judge pairs → feature matrix → classifiers chosen by grouped CV.

The classifier family, its regularisation and the decision threshold are chosen by grouped
5-fold cross-validation on SciFact ``judge_train.jsonl`` (Wadden et al., 2020), maximising the
balanced accuracy of supported-vs-not. A second logistic regression, fitted on the non-supported
train pairs, separates ``unsupported`` (SciFact CONTRADICT) from ``not_found``
(NOT_ENOUGH_INFO). ``offline-v2`` adds a *contradiction veto*: a logistic regression fitted on the
SUPPORT and CONTRADICT pairs only, whose threshold is chosen jointly with the support threshold on
the same out-of-fold predictions. Embeddings go through
:func:`rag.index.embed_cache.embed_texts` (cached by embedder fingerprint and text hash).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag import paths
from rag.errors import ConfigError
from rag.index.embed import Embedder
from rag.index.embed_cache import embed_texts
from rag.judge.artifact import FittedJudge
from rag.judge.contrast import CONTRAST_NAMES, contrast_features, flip_claim
from rag.judge.features import (
    FEATURE_NAMES,
    ContextUnits,
    claim_features,
    compute_idf,
    context_units,
)
from rag.judge.settings import JudgeVersion, OfflineJudgeSettings

logger = logging.getLogger(__name__)


def embed(texts: Sequence[str], embedder: Embedder, desc: bool = False) -> np.ndarray:
    """Vectors of ``texts`` through the project's content-addressed embedding cache."""
    ids = [f"judge:{i}" for i in range(len(texts))]
    return embed_texts(ids, list(texts), embedder, show_progress=desc)


def read_pairs(path: Path) -> list[dict]:
    """Rows ``{claim_id, claim, abstract, label}`` of a SciFact judge file."""
    if not path.exists():
        raise ConfigError(
            f"judge training file {path} not found; set RAG_SHARED_DIR or settings.train_path"
        )
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                rows.append(
                    {k: r[k] for k in ("claim_id", "claim", "abstract", "label")}
                    | {"title": r.get("title", ""), "doc_id": str(r.get("doc_id", ""))}
                )
            except (json.JSONDecodeError, KeyError) as e:
                raise ConfigError(f"{paths.display(path)} line {n} is not a judge pair: {e}") from e
    return rows


def first_claims(rows: list[dict], limit: int) -> list[dict]:
    """The first ``limit`` rows, extended to the end of the last claim's rows (0: all rows).

    Whole claims keep the grouped CV honest: a claim never has pairs on both sides of the cut.
    """
    if limit <= 0 or limit >= len(rows):
        return rows
    end = limit
    while end < len(rows) and rows[end]["claim_id"] == rows[limit - 1]["claim_id"]:
        end += 1
    return rows[:end]


def feature_names(version: JudgeVersion) -> tuple[str, ...]:
    """Columns of a version's feature matrix."""
    return FEATURE_NAMES if version == "offline-v1" else FEATURE_NAMES + CONTRAST_NAMES


def featurize(
    pairs: Sequence[tuple[str, str]],
    embedder: Embedder,
    idf: dict[str, float],
    max_sentences: int = 200,
    desc: bool = False,
    version: JudgeVersion = "offline-v1",
) -> tuple[np.ndarray, list[dict]]:
    """Feature matrix (rows in :func:`feature_names` order) and traces for (claim, context) pairs.

    ``offline-v2`` also embeds each claim with its polarity flipped (:func:`flip_claim`) for the
    contradiction cues of :mod:`rag.judge.contrast`.
    """
    units: dict[str, ContextUnits] = {}
    for _, ctx in pairs:
        if ctx not in units:
            units[ctx] = context_units(ctx, max_sentences)
    v2 = version == "offline-v2"
    flips = [flip_claim(c) for c, _ in pairs] if v2 else []
    texts = [c for c, _ in pairs] + flips + [t for u in units.values() for t in u.texts]
    vecs = embed(texts, embedder, desc)
    claim_vecs = vecs[: len(pairs)]
    flip_vecs = vecs[len(pairs) : len(pairs) + len(flips)]
    offsets, pos = {}, len(pairs) + len(flips)
    for ctx, u in units.items():
        offsets[ctx] = (pos, pos + len(u.texts))
        pos += len(u.texts)
    names = feature_names(version)
    rows, traces = [], []
    for i, ((claim, ctx), cv) in enumerate(zip(pairs, claim_vecs, strict=True)):
        a, b = offsets[ctx]
        feats, trace = claim_features(claim, units[ctx], cv, vecs[a:b], idf)
        if v2:
            n_s = len(units[ctx].sentences)
            sent_vecs = vecs[a : a + n_s]
            cfeats, ctrace = contrast_features(
                claim, units[ctx].sentences, sent_vecs @ cv, sent_vecs @ flip_vecs[i]
            )
            feats, trace = feats | cfeats, trace | ctrace
        rows.append([feats[n] for n in names])
        traces.append(trace | {"features": feats})
    return np.asarray(rows, dtype=np.float64), traces


def cv_groups(rows: Sequence[dict], how: str) -> np.ndarray:
    """Group label per row: its claim, or the connected component of claims and documents."""
    if how == "claim":
        return np.array([str(r["claim_id"]) for r in rows])
    parent: dict[str, str] = {}

    def find(a: str) -> str:
        while parent.setdefault(a, a) != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for r in rows:
        doc = r.get("doc_id") or r["abstract"]
        parent[find(f"c:{r['claim_id']}")] = find(f"d:{doc}")
    return np.array([find(f"c:{r['claim_id']}") for r in rows])


def make_model(kind: str, c: float, seed: int):
    """An unfitted classifier: standardised balanced logistic regression, or gradient boosting."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "logreg":
        return make_pipeline(
            StandardScaler(), LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
        )
    return HistGradientBoostingClassifier(
        max_depth=3,
        learning_rate=0.05,
        max_iter=200,
        l2_regularization=1.0,
        class_weight="balanced",
        early_stopping=False,
        random_state=seed,
    )


def best_threshold(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """The threshold on ``p`` maximising balanced accuracy (ties: the one closest to 0.5)."""
    from sklearn.metrics import balanced_accuracy_score

    cands = np.unique(np.round(p, 6))
    best = (-1.0, 0.5)
    for t in sorted(cands, key=lambda t: (abs(t - 0.5), t)):
        ba = balanced_accuracy_score(y, p >= t)
        if ba > best[0] + 1e-12:
            best = (ba, float(t))
    return best[1], best[0]


def fit_judge(
    rows: Sequence[dict], embedder: Embedder, settings: OfflineJudgeSettings
) -> FittedJudge:
    """Fit the offline judge on SciFact-format rows, choosing model and threshold by grouped CV."""
    from sklearn.model_selection import StratifiedGroupKFold

    t0 = time.perf_counter()
    idf = compute_idf([r["abstract"] for r in rows])
    x, _ = featurize(
        [(r["claim"], r["abstract"]) for r in rows],
        embedder,
        idf,
        settings.max_sentences,
        desc=True,
        version=settings.version,
    )
    y = np.array([r["label"] == "SUPPORT" for r in rows])
    groups = cv_groups(rows, settings.cv_groups)
    if len(set(groups)) < settings.cv_folds:
        raise ConfigError(
            f"{len(set(groups))} CV group(s) by {settings.cv_groups!r} for {settings.cv_folds} "
            "folds; use cv_groups='claim' or fewer cv_folds"
        )
    folds = list(
        StratifiedGroupKFold(
            n_splits=settings.cv_folds, shuffle=True, random_state=settings.seed
        ).split(x, y, groups)
    )
    contra = np.array([r["label"] == "CONTRADICT" for r in rows])
    fit = fit_classifiers(x, y, contra, folds, settings)
    best, cv, veto_cv = fit["best"], fit["cv"], fit["veto_cv"]
    meta = {
        "version": settings.version,
        "cv": cv,
        "chosen": best,
        "veto_cv": veto_cv,
        "cv_groups": settings.cv_groups,
        "n_groups": int(len(set(groups))),
        "n_train": len(rows),
        "train_seconds": round(time.perf_counter() - t0, 1),
        "features": list(feature_names(settings.version)),
    }
    return FittedJudge(
        fit["support"],
        fit["kind"],
        fit["threshold"],
        idf,
        meta,
        fit["contra"],
        fit["contra_threshold"],
    )


def fit_classifiers(
    x: np.ndarray, y: np.ndarray, contra: np.ndarray, folds: list, settings: OfflineJudgeSettings
) -> dict:
    """The judge's classifiers on a feature matrix: the support model and its threshold chosen by
    grouped CV over ``folds``, the unsupported/not-found model, and (offline-v2) the contradiction
    veto. :func:`fit_judge` uses it on the judge's own features; experiments pass extra columns."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    candidates = [("logreg", c) for c in settings.logreg_c if "logreg" in settings.classifiers]
    if "hgb" in settings.classifiers:
        candidates.append(("hgb", 0.0))
    veto = settings.version == "offline-v2" and settings.contradiction_veto and contra.any()
    cv, oofs = [], {}
    for kind, c in candidates:
        oof = np.zeros(len(y))
        for tr, te in folds:
            m = make_model(kind, c, settings.seed).fit(x[tr], y[tr])
            oof[te] = m.predict_proba(x[te])[:, 1]
        t, ba = best_threshold(y, oof)
        ba_half = balanced_accuracy_score(y, oof >= 0.5)
        cv.append({"model": kind, "C": c, "cv_ba": ba, "cv_ba_at_0.5": ba_half, "threshold": t})
        oofs[(kind, c)] = oof
        logger.info("judge CV %s C=%s: BA %.3f (t=%.3f), BA@0.5 %.3f", kind, c, ba, t, ba_half)
    best = max(cv, key=lambda r: (round(r["cv_ba"], 6), r["model"] == "logreg", -r["C"]))
    support = make_model(best["model"], best["C"], settings.seed).fit(x, y)
    threshold = settings.threshold if settings.threshold is not None else best["threshold"]
    neg = ~y
    kind_y = contra[neg]
    kind_model = make_pipeline(
        StandardScaler(), LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
    ).fit(x[neg], kind_y)
    contra_model, contra_t, veto_cv = None, None, None
    if veto:
        contra_model, contra_t, threshold, veto_cv = _fit_veto(
            x, y, contra, folds, oofs[(best["model"], best["C"])], best, settings
        )
    return {
        "best": best,
        "cv": cv,
        "veto_cv": veto_cv,
        "support": support,
        "kind": kind_model,
        "threshold": float(threshold),
        "contra": contra_model,
        "contra_threshold": contra_t,
    }


def _fit_veto(x, y, contra, folds, oof_support, best, settings):
    """The contradiction veto: a SUPPORT-vs-CONTRADICT model and both thresholds, chosen jointly
    on out-of-fold predictions of the same grouped folds (train only)."""
    evidence = y | contra
    oof_c = np.zeros(len(y))
    for tr, te in folds:
        tr_e = tr[evidence[tr]]
        m = make_model("logreg", best["C"] if best["model"] == "logreg" else 0.1, settings.seed)
        oof_c[te] = m.fit(x[tr_e], contra[tr_e]).predict_proba(x[te])[:, 1]
    grid_s = np.round(np.arange(0.30, 0.701, 0.02), 2)
    grid_c = np.round(np.arange(0.30, 1.001, 0.02), 2)  # 1.0 = no veto
    best_v = (-1.0, 0.5, 1.0)
    for ts in sorted(grid_s, key=lambda t: (abs(t - 0.5), t)):
        if settings.threshold is not None:
            ts = settings.threshold
        for tc in grid_c[::-1]:  # ties: the milder veto
            pred = (oof_support >= ts) & (oof_c < tc)
            ba = float(np.mean([np.mean(pred[y]), np.mean(~pred[~y])]))
            if ba > best_v[0] + 1e-12:
                best_v = (ba, float(ts), float(tc))
    ba, ts, tc = best_v
    pred = (oof_support >= ts) & (oof_c < tc)
    veto_cv = {
        "cv_ba": ba,
        "support_threshold": ts,
        "contra_threshold": tc,
        "cv_contradict_recall": float(np.mean(~pred[contra])),
    }
    logger.info("judge CV veto: BA %.3f (t_support=%.2f, t_contra=%.2f)", ba, ts, tc)
    ev = np.flatnonzero(evidence)
    model = make_model(
        "logreg", best["C"] if best["model"] == "logreg" else 0.1, settings.seed
    ).fit(x[ev], contra[ev])
    return model, tc, ts, veto_cv
