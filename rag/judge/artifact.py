"""The fitted offline judge as stored: its record, and the content key of what it was fitted on.

The fitted model is stored under ``cache_dir("judge")`` keyed by :func:`artifact_key`: the training
file's hash, the feature and contrast versions, the embedder, the settings and the library
versions; :mod:`rag.judge.pinned` keeps the same record as JSON in the repository.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from rag.judge.contrast import CONTRAST_VERSION
from rag.judge.features import FEATURE_VERSION
from rag.judge.settings import OfflineJudgeSettings

#: Bump when the stored artifact's layout changes.
ARTIFACT_VERSION = "offline-judge-v2"


@dataclass
class FittedJudge:
    """The stored artifact: classifiers, threshold, IDF table and how they were chosen."""

    support_model: object
    kind_model: object
    threshold: float
    idf: dict[str, float]
    meta: dict = field(default_factory=dict)
    #: offline-v2: p(CONTRADICT | evidence pair) model and its veto threshold (None: no veto).
    contra_model: object = None
    contra_threshold: float | None = None


def library_versions() -> dict[str, str]:
    """Versions of the libraries a fitted judge depends on (part of its content key)."""
    import sklearn

    out = {"numpy": np.__version__, "sklearn": sklearn.__version__}
    try:
        import sentence_transformers

        out["sentence_transformers"] = sentence_transformers.__version__
    except ImportError:
        pass
    return out


def artifact_key(
    train_bytes: bytes, embedder_fingerprint: str, settings: OfflineJudgeSettings
) -> str:
    """Content hash of everything that changes the fitted model."""
    h = hashlib.sha256()
    for part in (
        ARTIFACT_VERSION,
        FEATURE_VERSION,
        embedder_fingerprint,
        CONTRAST_VERSION if settings.version == "offline-v2" else "",
        settings.model_dump_json(
            exclude={"threshold", "batch_size", "strict_numbers", "train_limit"}
        ),
        json.dumps(library_versions(), sort_keys=True),
        # only a limited judge adds this part: the full judge's key does not depend on it
        *([f"train_limit={settings.train_limit}"] if settings.train_limit else []),
    ):
        h.update(part.encode() + b"\0")
    h.update(hashlib.sha256(train_bytes).digest())
    return h.hexdigest()[:20]
