"""Bootstrap CIs, the paired randomisation test and p-value corrections, on hand-derived cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag.errors import EvaluationError
from rag.evaluation.stats import (
    CI,
    PairedResult,
    bonferroni,
    bootstrap_ci,
    correct,
    describe_difference,
    holm,
    paired_test,
)


def test_constant_data_gives_explicit_point_interval():
    ci = bootstrap_ci([0.4, 0.4, 0.4, 0.4], n_resamples=200)
    assert (ci.estimate, ci.low, ci.high, ci.n) == (0.4, 0.4, 0.4, 4)
    assert ci.method_used == "constant"
    assert ci.to_dict() == {"mean": 0.4, "ci_low": 0.4, "ci_high": 0.4, "n": 4}


def test_single_value_has_no_interval_rather_than_nan():
    ci = bootstrap_ci([0.7], n_resamples=200)
    assert ci.estimate == 0.7 and ci.n == 1
    assert ci.low is None and ci.high is None and not ci.defined
    assert ci.method_used == "undefined (n=1)"
    assert ci.to_dict()["ci_low"] is None


@pytest.mark.parametrize("bad", [[], [0.1, float("nan")], [float("inf"), 1.0]])
def test_empty_or_non_finite_values_raise(bad):
    with pytest.raises(EvaluationError):
        bootstrap_ci(bad, n_resamples=100)


def test_percentile_interval_of_two_values_spans_both():
    # Resamples of {0, 1} of size 2 have means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the
    # 2.5 % and 97.5 % quantiles of 2,000 resamples are 0 and 1.
    ci = bootstrap_ci([0.0, 1.0], method="percentile", n_resamples=2000)
    assert (ci.estimate, ci.low, ci.high) == (0.5, 0.0, 1.0)
    assert ci.method_used == "percentile"


def test_bca_matches_normal_theory_on_a_large_symmetric_sample():
    # 0..99: mean 49.5, population sd sqrt((100^2 - 1) / 12) = 28.866, se 2.8866,
    # so the interval is about 49.5 -/+ 1.96 * 2.8866 = [43.84, 55.16].
    ci = bootstrap_ci(np.arange(100), n_resamples=2000)
    assert ci.method_used == "BCa"
    assert ci.estimate == 49.5
    assert ci.low == pytest.approx(43.84, abs=0.7)
    assert ci.high == pytest.approx(55.16, abs=0.7)


def test_bootstrap_is_reproducible_with_a_seed_and_changes_without():
    values = [0.1, 0.5, 0.2, 0.9, 0.3, 0.6, 0.0, 1.0]
    a = bootstrap_ci(values, n_resamples=500, seed=3)
    b = bootstrap_ci(values, n_resamples=500, seed=3)
    c = bootstrap_ci(values, n_resamples=500, seed=4)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)


def test_degenerate_bca_falls_back_to_percentile():
    # For the median of 0,0,0,0,1 every resample's median is 0 or 1 and the jackknife medians are
    # all 0, so BCa's acceleration is 0/0: scipy returns NaN and the percentile interval is used.
    ci = bootstrap_ci([0.0, 0.0, 0.0, 0.0, 1.0], statistic=np.median, n_resamples=500)
    assert ci.method_used == "percentile (BCa degenerate)"
    assert ci.estimate == 0.0
    assert math.isfinite(ci.low) and math.isfinite(ci.high)
    assert ci.low <= ci.estimate <= ci.high


def test_paired_test_exact_p_value_by_hand():
    # d = a - b = (1, 1, 1): of the 2^3 sign flips only all-plus and all-minus reach |mean| >= 1,
    # so the exact two-sided p-value is 2/8.
    r = paired_test([1.0, 1.0, 1.0], [0.0, 0.0, 0.0], n_resamples=1000, ci_resamples=200)
    assert r.p_value == pytest.approx(0.25)
    assert (r.diff, r.mean_a, r.mean_b, r.n) == (1.0, 1.0, 0.0, 3)
    # five equal differences: 2 / 2^5
    r5 = paired_test([2.0] * 5, [1.0] * 5, n_resamples=1000, ci_resamples=200)
    assert r5.p_value == pytest.approx(2 / 32)


def test_paired_test_detects_a_real_difference():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.2, 0.8, size=60)
    better = base + 0.08 + rng.normal(0.0, 0.05, size=60)
    real = paired_test(better, base, n_resamples=2000, ci_resamples=500)
    assert real.p_value < 0.001
    assert real.ci.low > 0.05 and real.ci.high < 0.11


def test_paired_test_is_calibrated_under_the_null():
    # Two exchangeable systems: about 5 % of 200 seeded experiments may reject at alpha = 0.05
    # (binomial sd 1.5 %), and the p-values spread over [0, 1] instead of piling up near 0.
    rng = np.random.default_rng(11)
    ps = []
    for _ in range(200):
        base = rng.uniform(0.2, 0.8, size=30)
        a = base + rng.normal(0.0, 0.05, size=30)
        b = base + rng.normal(0.0, 0.05, size=30)
        ps.append(paired_test(a, b, n_resamples=500, ci_resamples=50).p_value)
    rejection = np.mean(np.asarray(ps) < 0.05)
    assert 0.01 <= rejection <= 0.10
    assert 0.4 <= np.median(ps) <= 0.6


def test_paired_test_identical_systems_have_p_one():
    r = paired_test([0.1, 0.5, 0.9], [0.1, 0.5, 0.9], n_resamples=100, ci_resamples=100)
    assert r.p_value == 1.0 and r.diff == 0.0
    assert r.ci.method_used == "constant"


def test_paired_test_refuses_misaligned_inputs():
    with pytest.raises(EvaluationError, match="align"):
        paired_test([0.1, 0.2], [0.1, 0.2, 0.3])


def test_holm_and_bonferroni_by_hand():
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert bonferroni([0.01, 0.04, 0.5]) == pytest.approx([0.03, 0.12, 1.0])
    assert holm([]) == []
    with pytest.raises(EvaluationError):
        holm([0.2, 1.5])


def _result(diff: float, low: float, high: float, p: float, n: int = 40) -> PairedResult:
    return PairedResult(0.5 + diff, 0.5, diff, CI(diff, low, high, n, "BCa"), p, n)


def test_correct_fills_adjusted_p_values():
    rs = correct([_result(0.1, 0.0, 0.2, 0.01), _result(0.1, 0.0, 0.2, 0.04)], "holm")
    assert [r.p_adjusted for r in rs] == pytest.approx([0.02, 0.04])
    assert [r.p for r in rs] == pytest.approx([0.02, 0.04])
    with pytest.raises(EvaluationError):
        correct(rs, "sidak")  # type: ignore[arg-type]


def test_describe_difference_readings():
    real = describe_difference("dense", "bm25", _result(0.07, 0.03, 0.11, 0.001), metric="nDCG@10")
    assert (
        real == "dense beats bm25 by 0.070 nDCG@10 (95% CI 0.030–0.110, p=0.001): a real difference"
    )
    worse = describe_difference("dense", "bm25", _result(-0.07, -0.11, -0.03, 0.0001))
    assert worse.startswith("bm25 beats dense by 0.070") and worse.endswith("a real difference")
    assert "95% CI 0.030–0.110" in worse  # the interval of the leader's advantage, sign flipped
    null = describe_difference("a", "b", _result(0.01, -0.02, 0.04, 0.4, n=30))
    assert null.startswith("a and b are not distinguishable on n=30 questions")
    mixed = describe_difference("a", "b", _result(0.02, -0.001, 0.04, 0.03))
    assert "borderline" in mixed


@pytest.mark.parametrize(
    ("stored", "mean_key"),
    [
        ({"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}, "mean"),  # metrics.py, 04, 06
        ({"mean": 0.5, "ci": [0.4, 0.6], "n": 10}, "mean"),  # notebook 05's answerer blocks
        ({"mean": 0.5, "ci": [0.4, 0.6], "n_scored": 10}, "mean"),  # 05's faithfulness block
        (
            {"found_rate": 0.5, "n": 10, "ci": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}},
            "found_rate",
        ),  # notebook 01's evidence found
        ({"rate": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10}, "rate"),  # notebook 02
    ],  # fmt: skip
)
def test_every_stored_interval_layout_reads_back_to_one_record(stored, mean_key):
    ci = CI.from_dict(stored, mean_key)
    assert (ci.estimate, ci.low, ci.high, ci.n) == (0.5, 0.4, 0.6, 10)
    assert ci.defined and ci.method_used == "stored"


def test_the_two_written_layouts_round_trip():
    ci = CI(0.25, 0.125, 0.375, 8, "BCa")
    assert ci.to_dict() == {"mean": 0.25, "ci_low": 0.125, "ci_high": 0.375, "n": 8}
    assert ci.to_pair_dict() == {"mean": 0.25, "ci": [0.125, 0.375], "n": 8}
    for d in (ci.to_dict(), ci.to_pair_dict()):
        assert CI.from_dict(d).bounds == (0.125, 0.375)
    assert CI.from_dict({"balanced_accuracy": 0.7, "ci_low": 0.6, "ci_high": 0.8, "n": 3,
                         "ci_method": "BCa"}, "balanced_accuracy").method_used == "BCa"  # fmt: skip


def test_a_malformed_stored_pair_is_named():
    with pytest.raises(EvaluationError, match=r"ci=\[0\.4\]"):
        CI.from_dict({"mean": 0.5, "ci": [0.4]})


def test_missing_values_are_an_explicit_record_not_nan():
    ci = CI.missing()
    assert (ci.estimate, ci.bounds, ci.n, ci.defined) == (None, (None, None), 0, False)
    assert ci.to_dict() == {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    assert ci.to_pair_dict() == {"mean": None, "ci": [None, None], "n": 0}
    assert str(ci) == "– (no values, n=0)"


def test_rounded_and_overlaps():
    a = CI(0.123456, 0.1, 0.149999, 5, "BCa").rounded(4)
    assert (a.estimate, a.low, a.high, a.n) == (0.1235, 0.1, 0.15, 5)
    assert a.overlaps(CI(0.2, 0.15, 0.3, 5, "BCa")), "sharing the end point 0.15 overlaps"
    assert not a.overlaps(CI(0.2, 0.1501, 0.3, 5, "BCa"))
