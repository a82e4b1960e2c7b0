"""Honest uncertainty for per-query metrics: bootstrap CIs, paired tests, multiple-comparison fixes.

Every retrieval or answer metric in this project is a mean over questions, and the questions are a
small sample. This module says how much that mean could move with another sample of questions:

* :class:`CI` — the one interval record (estimate, bounds, n, method) every metric, table and
  reading uses; it writes and reads back the ``metrics.json`` layouts.
* :func:`bootstrap_ci` — a 95 % bootstrap confidence interval (Efron & Tibshirani 1993, *An
  Introduction to the Bootstrap*), BCa by default (Efron 1987, "Better bootstrap confidence
  intervals", JASA 82), through :func:`scipy.stats.bootstrap`. The undefined cases are explicit:
  ``n == 0`` raises, ``n == 1`` has no interval, constant data gives the interval ``[x, x]`` and a
  degenerate BCa falls back to the percentile method, and the result says which method it used.
* :func:`paired_test` — a paired randomisation (sign-flip permutation) test on per-query values
  (Smucker, Allan & Carterette 2007, "A comparison of statistical significance tests for
  information retrieval evaluation", CIKM) through :func:`scipy.stats.permutation_test`, plus the
  bootstrap CI of the mean difference.
* :func:`holm` / :func:`bonferroni` — family-wise error control for all-pairs comparisons (Holm
  1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statistics 6).
* :func:`describe_difference` — the plain-language reading printed under comparison tables.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

from rag.errors import EvaluationError

logger = logging.getLogger(__name__)

BootstrapMethod = Literal["BCa", "percentile", "basic"]
Statistic = Callable[..., float]


@dataclass(frozen=True, slots=True)
class CI:
    """A point estimate with its confidence interval: the project's one interval record.

    Bootstrap CIs of retrieval metrics, answer metrics, judge accuracy and SciFact scores are all
    this record; :meth:`to_dict` and :meth:`to_pair_dict` write the two ``metrics.json`` layouts
    and :meth:`from_dict` reads any stored layout back, so no reader unpacks bounds by hand.

    Attributes:
        estimate: the statistic on the observed values (the mean, for metrics); ``None`` only
            when there are no values (:meth:`missing`).
        low: lower bound, or ``None`` when no interval is defined (``n <= 1``).
        high: upper bound, or ``None`` when no interval is defined.
        n: number of values (questions) behind the estimate.
        method_used: how the interval was obtained: ``"BCa"``, ``"percentile"``, ``"basic"``,
            ``"percentile (BCa degenerate)"``, ``"constant"`` (all values equal, interval
            ``[x, x]``), ``"undefined (n=1)"``, ``"undefined (n=0)"`` or ``"stored"`` (read
            back from a file that did not record the method).
        confidence: the confidence level, e.g. 0.95.
    """

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    method_used: str
    confidence: float = 0.95

    @classmethod
    def missing(cls, confidence: float = 0.95) -> CI:
        """The record of no values at all: no estimate, no interval, ``n == 0``."""
        return cls(None, None, None, 0, "undefined (n=0)", confidence)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], mean_key: str = "mean") -> CI:
        """Read an interval back from a stored record (a dict or a table row).

        The bounds are read from ``ci_low``/``ci_high``, from a ``ci`` pair ``[low, high]``, or
        from a ``ci`` record holding ``ci_low``/``ci_high``; the estimate from ``mean_key`` (e.g.
        ``"found_rate"``, ``"balanced_accuracy"``); ``n`` from ``n`` or ``n_scored``. Values are
        kept as stored, so a reading formats exactly the numbers the file holds.
        """
        inner = d.get("ci")
        if isinstance(inner, Mapping):
            low, high = inner.get("ci_low"), inner.get("ci_high")
        elif isinstance(inner, list | tuple):
            if len(inner) != 2:
                raise EvaluationError(f"a stored interval needs [low, high], got ci={inner!r}")
            low, high = inner
        else:
            low, high = d.get("ci_low"), d.get("ci_high")
        n = d.get("n", d.get("n_scored"))
        return cls(
            d.get(mean_key),
            low,
            high,
            int(n) if n is not None else 0,
            str(d.get("ci_method", "stored")),
        )

    @property
    def defined(self) -> bool:
        """Whether an interval exists (false for a single value or none)."""
        return self.low is not None and self.high is not None

    @property
    def mean(self) -> float | None:
        """Alias of :attr:`estimate` for the common case where the statistic is the mean."""
        return self.estimate

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """``(low, high)``."""
        return self.low, self.high

    def overlaps(self, other: CI) -> bool:
        """Whether the two intervals share a point (both must be defined)."""
        return self.low <= other.high and other.low <= self.high

    def rounded(self, digits: int) -> CI:
        """The same record with estimate and bounds rounded to ``digits`` decimals."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, digits)

        return replace(self, estimate=r(self.estimate), low=r(self.low), high=r(self.high))

    def to_dict(self) -> dict:
        """The ``metrics.json`` shape ``{"mean", "ci_low", "ci_high", "n"}`` (None: undefined)."""
        return {"mean": self.estimate, "ci_low": self.low, "ci_high": self.high, "n": self.n}

    def to_pair_dict(self) -> dict:
        """The answerer blocks' shape ``{"mean", "ci": [low, high], "n"}`` (notebook 05)."""
        return {"mean": self.estimate, "ci": [self.low, self.high], "n": self.n}

    def __str__(self) -> str:
        if self.estimate is None:
            return f"– (no values, n={self.n})"
        if not self.defined:
            return f"{self.estimate:.3f} (no CI, n={self.n})"
        pct = round(self.confidence * 100)
        return f"{self.estimate:.3f} ({pct}% CI {self.low:.3f}–{self.high:.3f}, n={self.n})"


def _as_values(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise EvaluationError(
            f"{what} must be a flat sequence of per-query numbers, got shape {arr.shape}"
        )
    if arr.size == 0:
        raise EvaluationError(
            f"{what} is empty: there is nothing to estimate. Check that the qrels and the run "
            "share questions with relevant documents."
        )
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise EvaluationError(
            f"{what} holds non-finite values at positions {bad[:5].tolist()} "
            f"(e.g. {arr[bad[0]]!r}); undefined per-query values must be excluded before "
            "aggregation, not averaged in."
        )
    return arr


def _check_settings(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise EvaluationError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise EvaluationError(f"confidence must lie strictly between 0 and 1, got {confidence}")


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    statistic: Statistic = np.mean,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: BootstrapMethod = "BCa",
) -> CI:
    """Bootstrap confidence interval of ``statistic`` over per-query ``values``.

    Resamples the questions with replacement ``n_resamples`` times (fixed ``seed``, so the interval
    is reproducible) via :func:`scipy.stats.bootstrap`. BCa corrects the percentile interval for
    bias and skew (Efron 1987); it is undefined when the resampled statistics carry no spread
    (e.g. one odd question among many equal ones can make the acceleration 0/0), where scipy
    returns NaN — we then fall back to the percentile interval and say so in ``method_used``.

    Args:
        values: one number per question.
        statistic: a reduction of a 1-D array (``np.mean``, ``np.median``, ...).
        n_resamples: bootstrap resamples (2,000 by default, as in the retrieval report).
        confidence: confidence level.
        seed: seed of the resampling generator.
        method: ``"BCa"``, ``"percentile"`` or ``"basic"``.

    Returns:
        The estimate and its interval. Constant data gives ``[x, x]`` with method ``"constant"``;
        a single value gives no interval (``low = high = None``, method ``"undefined (n=1)"``).

    Raises:
        EvaluationError: no values, non-finite values or invalid settings.
    """
    _check_settings(n_resamples, confidence)
    arr = _as_values(values, "bootstrap values")
    estimate = float(statistic(arr))
    n = int(arr.size)
    if n == 1:
        return CI(estimate, None, None, 1, "undefined (n=1)", confidence)
    if np.all(arr == arr[0]):
        # Every resample equals the sample, so the interval collapses; scipy's BCa would say NaN.
        return CI(estimate, estimate, estimate, n, "constant", confidence)

    def _run(m: str) -> tuple[float, float]:
        with warnings.catch_warnings():
            # DegenerateDataWarning is the NaN case handled below; keep the output clean.
            warnings.simplefilter("ignore", category=sps.DegenerateDataWarning)
            warnings.simplefilter("ignore", category=RuntimeWarning)
            res = sps.bootstrap(
                (arr,),
                statistic,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method=m,
                rng=np.random.default_rng(seed),
            )
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    low, high = _run(method)
    used = method
    if method == "BCa" and not (math.isfinite(low) and math.isfinite(high)):
        logger.info("BCa interval degenerate on n=%d values; using the percentile interval", n)
        low, high = _run("percentile")
        used = "percentile (BCa degenerate)"
    if not (math.isfinite(low) and math.isfinite(high)):
        raise EvaluationError(
            f"the {used} bootstrap interval is undefined for these {n} values "
            f"(estimate {estimate!r}); check the statistic or use more questions"
        )
    return CI(estimate, low, high, n, used, confidence)


@dataclass(frozen=True, slots=True)
class PairedResult:
    """The outcome of a paired comparison of system A against system B on the same questions.

    Attributes:
        mean_a: mean of A's per-query values.
        mean_b: mean of B's per-query values.
        diff: mean of (A - B); positive means A is better for a higher-is-better metric.
        ci: bootstrap CI of the mean difference.
        p_value: two-sided p-value of the paired randomisation test.
        n: number of paired questions.
        p_adjusted: p-value after multiple-comparison correction (``None`` until corrected).
        method: the test that produced ``p_value``.
    """

    mean_a: float
    mean_b: float
    diff: float
    ci: CI
    p_value: float
    n: int
    p_adjusted: float | None = None
    method: str = "paired randomisation"

    @property
    def p(self) -> float:
        """The p-value to read: the corrected one when a correction was applied."""
        return self.p_value if self.p_adjusted is None else self.p_adjusted

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = self.ci.to_dict()
        return d


def paired_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    ci_resamples: int = 2000,
) -> PairedResult:
    """Paired randomisation test of mean(A - B) over the same questions.

    Under the null hypothesis the two systems are exchangeable on every question, so each pair
    (a_i, b_i) can be swapped — equivalently the sign of d_i = a_i - b_i flipped — without changing
    the distribution of mean(d). :func:`scipy.stats.permutation_test` with
    ``permutation_type="samples"`` enumerates all 2^n swaps when that is at most ``n_resamples``
    (exact test) and samples them otherwise; the p-value is two-sided. Smucker et al. (CIKM 2007)
    recommend this test for IR evaluation.

    Args:
        a: per-query values of system A.
        b: per-query values of system B, aligned with ``a`` (same questions, same order).
        n_resamples: random sign flips (exact enumeration when 2^n is smaller).
        confidence: level of the CI of the difference.
        seed: seed for the test and for the CI.
        ci_resamples: bootstrap resamples for the CI of the difference.

    Raises:
        EvaluationError: the inputs are empty, non-finite, or not aligned.
    """
    _check_settings(n_resamples, confidence)
    x = _as_values(a, "paired values of A")
    y = _as_values(b, "paired values of B")
    if x.shape != y.shape:
        raise EvaluationError(
            f"paired test needs one value per question for both systems, got {x.size} and "
            f"{y.size}; align them on the same question ids first"
        )
    d = x - y
    ci = bootstrap_ci(d, n_resamples=ci_resamples, confidence=confidence, seed=seed)
    if np.all(d == 0.0):
        # Every permutation gives the same statistic: no evidence of any difference.
        p = 1.0
    else:

        def mean_diff(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
            return np.mean(u - v, axis=axis)

        res = sps.permutation_test(
            (x, y),
            mean_diff,
            permutation_type="samples",
            vectorized=True,
            n_resamples=n_resamples,
            alternative="two-sided",
            rng=np.random.default_rng(seed),
        )
        p = float(min(1.0, res.pvalue))
    return PairedResult(
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        diff=float(d.mean()),
        ci=ci,
        p_value=p,
        n=int(d.size),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (Holm 1979), in the input order.

    Sort the m p-values ascending, multiply the i-th smallest (0-based) by (m - i), take the running
    maximum so adjusted values never decrease, and cap at 1. Rejecting where the adjusted p is below
    alpha controls the family-wise error rate at alpha, and is never less powerful than Bonferroni.
    """
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return []
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise EvaluationError(f"p-values must lie in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    out = np.empty(m)
    out[order] = adjusted_sorted
    return out.tolist()


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni adjusted p-values: each p times the number of tests m, capped at 1."""
    p = np.asarray(p_values, dtype=float)
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise EvaluationError(f"p-values must lie in [0, 1], got {p.tolist()}")
    return np.minimum(p * p.size, 1.0).tolist()


Correction = Literal["holm", "bonferroni", "none"]


def correct(results: Sequence[PairedResult], method: Correction = "holm") -> list[PairedResult]:
    """Return the results with ``p_adjusted`` filled by ``method`` over the whole family."""
    ps = [r.p_value for r in results]
    if method == "holm":
        adj = holm(ps)
    elif method == "bonferroni":
        adj = bonferroni(ps)
    elif method == "none":
        adj = ps
    else:
        raise EvaluationError(f"unknown correction {method!r}; use 'holm', 'bonferroni' or 'none'")
    return [replace(r, p_adjusted=float(q)) for r, q in zip(results, adj, strict=True)]


def _fmt_p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def describe_difference(
    name_a: str,
    name_b: str,
    result: PairedResult,
    alpha: float = 0.05,
    *,
    metric: str = "",
) -> str:
    """One sentence saying whether A and B differ, by how much, and how sure we are.

    A difference is called real only when the (corrected, if available) p-value is below
    ``alpha`` *and* the CI of the difference excludes 0; when the two disagree the reading says the
    evidence is borderline. Example: ``"dense beats bm25 by 0.070 nDCG@10 (95% CI 0.030–0.110,
    p=0.001): a real difference"``.
    """
    if not 0.0 < alpha < 1.0:
        raise EvaluationError(f"alpha must lie strictly between 0 and 1, got {alpha}")
    unit = f" {metric}" if metric else ""
    p = result.p
    ptxt = _fmt_p(p) + (" corrected" if result.p_adjusted is not None else "")
    ci = result.ci
    pct = round(ci.confidence * 100)
    # The interval is stated for the leader's advantage, so its sign matches "X beats Y by d".
    lo, hi = (ci.low, ci.high) if result.diff >= 0 or not ci.defined else (-ci.high, -ci.low)
    citxt = f"{pct}% CI {lo:.3f}–{hi:.3f}" if ci.defined else "no CI"
    if result.diff == 0.0:
        return (
            f"{name_a} and {name_b} score the same{unit} on n={result.n} questions "
            f"({citxt}, {ptxt}): not distinguishable"
        )
    better, worse = (name_a, name_b) if result.diff > 0 else (name_b, name_a)
    size = abs(result.diff)
    ci_excludes_zero = ci.defined and (ci.low > 0 or ci.high < 0)
    head = f"{better} beats {worse} by {size:.3f}{unit} ({citxt}, {ptxt})"
    if p < alpha and ci_excludes_zero:
        return f"{head}: a real difference"
    if p < alpha or ci_excludes_zero:
        return f"{head}: borderline — the test and the interval disagree on n={result.n}"
    return (
        f"{name_a} and {name_b} are not distinguishable on n={result.n} questions "
        f"({better} ahead by {size:.3f}{unit}, {citxt}, {ptxt})"
    )
