"""Figures that make their point: dots zoomed to the data, differences to a baseline with CIs.

When values cluster (found rates near 0.99, nDCG@10 within 0.05 of each other), bars on a 0–1 axis
hide the comparison; these plots zoom to the data and, for paired comparisons, plot the difference
to a baseline with its 95 % CI so "is it real?" is read off the zero line. Legends never sit on
data: they go below the axes or labels go on the points.
"""

from __future__ import annotations

from typing import Any

import numpy as np

REAL = "#c44e52"
NOT_REAL = "#4c72b0"


def rate_dots(
    ax: Any,
    labels: list[str],
    values: list[float],
    lows: list[float],
    highs: list[float],
    *,
    target: float | None = None,
    xlabel: str = "",
    title: str = "",
    bounds: tuple[float, float] = (0.0, 1.0),
) -> None:
    """Point estimates with 95 % CIs, one row per label, the axis zoomed to the data and target."""
    y = np.arange(len(labels))
    v, lo, hi = (np.asarray(a, dtype=float) for a in (values, lows, highs))
    ax.errorbar(v, y, xerr=[v - lo, hi - v], fmt="o", color="#333", ecolor="#888", capsize=4)
    for yi, vi in zip(y, v, strict=True):
        ax.annotate(f"{vi:.3f}", (vi, yi), xytext=(0, 7), textcoords="offset points",
                    ha="center", fontsize=8)  # fmt: skip
    pts = np.concatenate([lo, hi] + ([np.array([target])] if target is not None else []))
    span = max(float(pts.max() - pts.min()), 0.02)
    left = max(bounds[0], float(pts.min()) - 0.15 * span)
    right = min(bounds[1] + 0.04 * span, float(pts.max()) + 0.15 * span)
    if right - left < 0.02:
        left, right = right - 0.02, right
    ax.set_xlim(left, right)
    if target is not None:
        ax.axvline(target, ls="--", color="k", lw=1)
        ax.annotate(f"target {target:g}", (target, len(labels) - 0.5), xytext=(3, 0),
                    textcoords="offset points", fontsize=8, va="top")  # fmt: skip
    ax.set_yticks(y, labels)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set(xlabel=xlabel + "  (axis zoomed to the data)", title=title)
    ax.grid(axis="x", alpha=0.3)


def diff_to_baseline(
    ax: Any, pairwise: Any, baseline: str, *, metric: str = "nDCG@10", title: str = ""
) -> list[str]:
    """Dot-and-whisker of (retriever − ``baseline``) with its 95 % CI from a paired table.

    ``pairwise`` has columns ``a, b, diff (= a − b), ci_low, ci_high, significant``. Returns the
    retrievers drawn, top to bottom. Red: a real difference (corrected test and CI agree).
    """
    rows = []
    for _, r in pairwise.iterrows():
        if baseline not in (r["a"], r["b"]):
            continue
        sign = 1.0 if r["b"] == baseline else -1.0
        other = r["a"] if r["b"] == baseline else r["b"]
        lo, hi = sorted((sign * r["ci_low"], sign * r["ci_high"]))
        rows.append((other, sign * r["diff"], lo, hi, bool(r["significant"])))
    rows.sort(key=lambda t: t[1])
    y = np.arange(len(rows))
    for yi, (_, d, lo, hi, sig) in zip(y, rows, strict=True):
        c = REAL if sig else NOT_REAL
        ax.errorbar([d], [yi], xerr=[[d - lo], [hi - d]], fmt="o", color=c, ecolor=c, capsize=4)
        ax.annotate(f"{d:+.3f}", (d, yi), xytext=(0, 7), textcoords="offset points",
                    ha="center", fontsize=8, color=c)  # fmt: skip
    ax.axvline(0, color="k", lw=1)
    ax.set_yticks(y, [r[0] for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set(xlabel=f"{metric} minus {baseline} (95 % CI); red = a real difference", title=title)
    ax.grid(axis="x", alpha=0.3)
    return [r[0] for r in rows]
