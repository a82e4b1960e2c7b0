"""Settings of the offline judge and the named judges (``offline-v1``, ``offline-v2``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

JudgeVersion = Literal["offline-v1", "offline-v2"]


class OfflineJudgeSettings(BaseModel):
    """Settings of the offline judge (the judge stage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: JudgeVersion = Field(
        "offline-v2",
        description="offline-v1: alignment features; offline-v2: plus contradiction cues.",
    )
    cv_groups: Literal["claim", "claim+document"] = Field(
        "claim+document",
        description="What a CV fold keeps together: claims, or claims and the abstracts they "
        "share (connected components), so no abstract is seen in two folds.",
    )
    contradiction_veto: bool = Field(
        True,
        description="Fit a SUPPORT-vs-CONTRADICT model and label pairs above its CV-chosen "
        "threshold unsupported (offline-v2).",
    )
    train_path: str = Field(
        "datasets/scifact/judge_train.jsonl",
        description="Training pairs, relative to the shared folder (or absolute).",
    )
    classifiers: tuple[Literal["logreg", "hgb"], ...] = Field(
        ("logreg",),
        min_length=1,
        description="Classifier families compared by grouped CV on train; gradient boosting "
        "is opt-in.",
    )
    logreg_c: tuple[float, ...] = Field(
        (0.01, 0.03, 0.1, 0.3, 1.0),
        min_length=1,
        description="Inverse regularisation strengths tried.",
    )
    train_limit: int = Field(
        0,
        ge=0,
        description="Fit on the first N training pairs, extended to whole claims (0: all 919). "
        "For the smoke profile, so a fresh clone's test run does not fit the full judge; a "
        "limited judge is a different artifact and says so in its name.",
    )
    cv_folds: int = Field(5, ge=2, le=10, description="Grouped CV folds on train.")
    seed: int = Field(0, ge=0, description="Seed for gradient boosting and fold shuffling.")
    max_sentences: int = Field(200, ge=1, le=5000, description="Context sentences considered.")
    batch_size: int = Field(32, ge=1, le=512, description="Embedding batch size (MiniLM).")
    threshold: float | None = Field(
        None, ge=0.0, le=1.0, description="Fixed p(supported) threshold; None = chosen by CV."
    )
    strict_numbers: bool = Field(
        False,
        description="Never label a claim supported when it has a number the context lacks "
        "(off by default; RAG answers with invented figures may warrant it).",
    )


#: The offline judges by name; ``offline-v2`` is the default everywhere.
JUDGES: dict[str, OfflineJudgeSettings] = {
    "offline-v1": OfflineJudgeSettings(
        version="offline-v1", cv_groups="claim", contradiction_veto=False
    ),
    "offline-v2": OfflineJudgeSettings(),
}
DEFAULT_JUDGE = "offline-v2"
