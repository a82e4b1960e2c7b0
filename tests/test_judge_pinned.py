"""Pinned offline judges (``data/judge/*.json``): exact round trip, only for the same inputs."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from rag.errors import ConfigError
from rag.judge import offline, pinned
from tests.fakeembed import BowEmbedder
from tests.test_judge_v2 import _rows, _write


@pytest.fixture()
def fitted_v2(tmp_path, tmp_cache):
    train = _write(tmp_path, _rows())
    settings = offline.OfflineJudgeSettings(
        train_path=str(train), logreg_c=(1.0,), cv_folds=2, cv_groups="claim"
    )
    return offline.OfflineJudge(settings, embedder=BowEmbedder())


def test_round_trip_predicts_bit_identically(fitted_v2, tmp_path):
    path = pinned.write(fitted_v2.fitted, fitted_v2.pin_inputs, tmp_path / "j" / "offline-v2.json")
    got = pinned.load(path, fitted_v2.pin_inputs)
    assert got is not None and got.meta["pinned"].endswith("offline-v2.json")
    x = np.random.default_rng(0).normal(size=(50, len(fitted_v2.fitted.meta["features"])))
    for attr in ("support_model", "kind_model", "contra_model"):
        want = getattr(fitted_v2.fitted, attr).predict_proba(x)
        assert np.array_equal(getattr(got, attr).predict_proba(x), want), attr
    assert (got.threshold, got.contra_threshold) == (
        fitted_v2.fitted.threshold,
        fitted_v2.fitted.contra_threshold,
    )
    assert got.idf == fitted_v2.fitted.idf
    # The judge built on the loaded numbers gives the same verdicts, reasons and scores.
    judge = offline.OfflineJudge(fitted_v2.settings, embedder=BowEmbedder(), fitted=got)
    pairs = [(r["claim"], r["abstract"]) for r in _rows()]
    assert [(v.label, v.score, v.reason) for v in judge.predict(pairs)] == [
        (v.label, v.score, v.reason) for v in fitted_v2.predict(pairs)
    ]


def test_other_inputs_mean_fit_and_say_which(fitted_v2, tmp_path, caplog):
    path = pinned.write(fitted_v2.fitted, fitted_v2.pin_inputs, tmp_path / "offline-v2.json")
    changed = fitted_v2.pin_inputs | {"features": "judge-features-v999"}
    with caplog.at_level(logging.INFO, logger="rag.judge.pinned"):
        assert pinned.load(path, changed) is None
    assert "features differ" in caplog.text
    assert pinned.load(tmp_path / "missing.json", fitted_v2.pin_inputs) is None


def test_broken_file_is_named(tmp_path):
    bad = tmp_path / "offline-v2.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="offline-v2.json is not a pinned judge"):
        pinned.load(bad, {})
    bad.write_text(json.dumps({"inputs": {}, "threshold": 0.5}), encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a pinned judge"):
        pinned.load(bad, {})


def test_a_judge_loads_its_pinned_file_instead_of_fitting(fitted_v2, tmp_path, monkeypatch):
    root = tmp_path / "project"
    monkeypatch.setattr(pinned.paths, "project_root", lambda: root)
    pinned.write(fitted_v2.fitted, fitted_v2.pin_inputs, pinned.pin_path(fitted_v2.settings))
    monkeypatch.setattr(
        offline, "fit_judge", lambda *a, **k: pytest.fail("fitted despite a pinned judge")
    )
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path / "empty-cache"))
    judge = offline.OfflineJudge(fitted_v2.settings, embedder=BowEmbedder())
    assert judge.fitted.meta["pinned"].endswith("data/judge/offline-v2.json")
    assert judge.name == fitted_v2.name


def test_smoke_subset_pins_under_its_own_name():
    s = offline.JUDGES["offline-v2"].model_copy(update={"train_limit": 240})
    assert pinned.pin_path(s).name == "offline-v2-train240.json"
    assert pinned.pin_path(offline.JUDGES["offline-v1"]).name == "offline-v1.json"


@pytest.mark.parametrize("name", sorted(offline.JUDGES))
@pytest.mark.parametrize("limit", [0, 240])
def test_committed_pins_match_the_current_code_and_data(name, limit, shared_dir, monkeypatch):
    """Each committed judge was fitted on exactly what this checkout would fit on: after a change
    to the features, settings or train file, this fails until `make judge` re-pins them."""
    settings = offline.JUDGES[name].model_copy(update={"train_limit": limit})
    monkeypatch.setattr(
        offline, "fit_judge", lambda *a, **k: pytest.fail(f"{name}/{limit}: pinned file is stale")
    )
    monkeypatch.setenv("RAG_CACHE_DIR", "/nonexistent-cache-for-this-test")
    judge = offline.OfflineJudge(settings)
    assert judge.fitted.meta["pinned"] == f"data/judge/{pinned.pin_path(settings).name}"
    n = judge.fitted.meta["n_train"]
    assert n == 919 if not limit else limit <= n < 919  # a subset is extended to whole claims


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(offline.JUDGES))
def test_refitting_reproduces_the_pinned_judge(name, shared_dir):
    """`make judge` is a reproduction, not a one-off: a fresh fit gives the pinned numbers."""
    settings = offline.JUDGES[name]
    fresh = offline.OfflineJudge(settings, fit_only=True)
    doc = json.loads(pinned.pin_path(settings).read_text(encoding="utf-8"))
    assert fresh.fitted.threshold == doc["threshold"]
    assert fresh.fitted.meta["chosen"] == doc["meta"]["chosen"]
    # rtol 1e-4, not 1e-6: on an AVX2-only CPU the MiniLM features differ in their last bits and
    # lbfgs lands 1.5e-5 (relative) away from the pins fitted on an AVX-512 machine, with the same
    # thresholds and CV scores, and (offline-v2) the same SciFact dev BA and class recalls
    np.testing.assert_allclose(
        fresh.fitted.support_model.named_steps["logisticregression"].coef_,
        doc["support_model"]["coef"],
        rtol=1e-4,
        atol=1e-9,
    )
