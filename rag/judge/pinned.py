"""Pinned offline judges: a fitted judge kept in ``data/judge/`` as JSON, loaded by a fresh clone.

Fitting ``offline-v2`` embeds ~7,300 SciFact train texts with fp32 MiniLM, minutes of CPU per
cache. The fitted judge is small (three standardised logistic regressions, two thresholds and an
IDF table), so it is pinned in the repository like the corpus manifest: ``python -m
rag.judge.pin`` (``make judge``) fits it from the shared SciFact train file and writes the JSON; a
run loads it when the file records exactly the inputs the run would fit on (train file sha256,
feature and contrast versions, embedder fingerprint, settings) and fits as before otherwise,
saying which input differs.

JSON, not pickle: readable in a diff, no code executed on load, and independent of the installed
scikit-learn (the numbers are coefficients; the estimators are rebuilt from them). Floats are
written with Python's shortest round-trip ``repr``, so a loaded judge predicts bit-identically to
the one that was written (``tests/test_judge_pinned.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from rag import paths
from rag.atomic import write_atomic
from rag.errors import ConfigError
from rag.judge.artifact import FittedJudge
from rag.judge.settings import OfflineJudgeSettings

logger = logging.getLogger(__name__)

#: Bump when the JSON layout changes.
PIN_FORMAT = "pinned-judge-v1"

#: Where pinned judges live, relative to the project root.
PIN_DIR = "data/judge"


def pin_inputs(
    train_bytes: bytes,
    embedder_fingerprint: str,
    settings: OfflineJudgeSettings,
    versions: dict[str, str],
) -> dict[str, str]:
    """What a pinned judge must have been fitted on to stand in for a fit of these inputs.

    ``versions`` are the feature-code versions (artifact, features, contrast cues); library
    versions are left out on purpose: the pinned numbers do not depend on them.
    """
    return {
        "format": PIN_FORMAT,
        **versions,
        "embedder": embedder_fingerprint,
        "settings": settings.model_dump_json(exclude={"threshold", "batch_size", "strict_numbers"}),
        "train_sha256": hashlib.sha256(train_bytes).hexdigest(),
    }


def pin_path(settings: OfflineJudgeSettings, root: Path | None = None) -> Path:
    """``data/judge/<version>.json``; a judge fitted on a train subset adds ``-train<N>``."""
    name = settings.version + (f"-train{settings.train_limit}" if settings.train_limit else "")
    return (root or paths.project_root()) / PIN_DIR / f"{name}.json"


def _logreg_pipeline_to_dict(model: Any) -> dict[str, Any]:
    steps = getattr(model, "named_steps", None)
    if not steps or set(steps) != {"standardscaler", "logisticregression"}:
        raise ConfigError(
            f"only StandardScaler + LogisticRegression judges can be pinned, not {model!r}"
        )
    sc, lr = steps["standardscaler"], steps["logisticregression"]
    return {
        "mean": sc.mean_.tolist(),
        "scale": sc.scale_.tolist(),
        "coef": lr.coef_.tolist(),
        "intercept": lr.intercept_.tolist(),
        "classes": [bool(c) for c in lr.classes_],
        "C": float(lr.C),
    }


def _logreg_pipeline_from_dict(d: dict[str, Any]) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler()
    sc.mean_ = np.asarray(d["mean"], dtype=np.float64)
    sc.scale_ = np.asarray(d["scale"], dtype=np.float64)
    sc.var_ = sc.scale_**2
    sc.n_features_in_ = len(sc.mean_)
    lr = LogisticRegression(C=d["C"], class_weight="balanced", max_iter=2000)
    lr.coef_ = np.asarray(d["coef"], dtype=np.float64)
    lr.intercept_ = np.asarray(d["intercept"], dtype=np.float64)
    lr.classes_ = np.asarray(d["classes"], dtype=bool)
    lr.n_features_in_ = lr.coef_.shape[1]
    return make_pipeline(sc, lr)


def to_json(fitted: FittedJudge, inputs: dict[str, str]) -> dict[str, Any]:
    """The JSON document of a fitted judge and the inputs it was fitted on."""
    meta = {k: v for k, v in fitted.meta.items() if k not in ("versions", "train_seconds")}
    return {
        "inputs": inputs,
        "threshold": float(fitted.threshold),
        "contra_threshold": (
            None if fitted.contra_threshold is None else float(fitted.contra_threshold)
        ),
        "support_model": _logreg_pipeline_to_dict(fitted.support_model),
        "kind_model": _logreg_pipeline_to_dict(fitted.kind_model),
        "contra_model": (
            None if fitted.contra_model is None else _logreg_pipeline_to_dict(fitted.contra_model)
        ),
        "idf": dict(sorted(fitted.idf.items())),
        "meta": meta,
    }


def write(fitted: FittedJudge, inputs: dict[str, str], path: Path) -> Path:
    """Write ``fitted`` as JSON to ``path`` atomically (temporary file, then rename)."""
    return write_atomic(path, json.dumps(to_json(fitted, inputs), indent=1) + "\n")


def load(path: Path, inputs: dict[str, str]) -> FittedJudge | None:
    """The pinned judge at ``path`` if it was fitted on exactly ``inputs``, else ``None``.

    A missing file is silent; a file fitted on other inputs is logged with the first input that
    differs, so a user who changed the judge knows why it is being fitted.

    Raises:
        ConfigError: the file exists but is not a pinned judge (the message names it).
    """
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        have = doc["inputs"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"{paths.display(path)} is not a pinned judge: {e}") from e
    differ = [k for k in sorted(set(inputs) | set(have)) if inputs.get(k) != have.get(k)]
    if differ:
        logger.info(
            "pinned judge %s was fitted on other inputs (%s differ); fitting instead",
            paths.display(path),
            ", ".join(differ),
        )
        return None
    try:
        contra = doc["contra_model"]
        return FittedJudge(
            support_model=_logreg_pipeline_from_dict(doc["support_model"]),
            kind_model=_logreg_pipeline_from_dict(doc["kind_model"]),
            threshold=float(doc["threshold"]),
            idf={k: float(v) for k, v in doc["idf"].items()},
            meta=dict(doc["meta"]) | {"pinned": paths.display(path)},
            contra_model=None if contra is None else _logreg_pipeline_from_dict(contra),
            contra_threshold=doc["contra_threshold"],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{paths.display(path)} is not a pinned judge: {e}") from e
