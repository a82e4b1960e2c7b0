"""Number formatting shared by every reading: 3 decimals, "95 % CI a–b", lists joined with "and".

Every reading formats its numbers here, so the notebooks' prose and the index page quote an
estimate the same way wherever it appears.
"""

from __future__ import annotations

from typing import Any

from rag.evaluation.stats import CI


def md(text: str) -> Any:
    """``text`` as an ``IPython.display.Markdown`` block (what a notebook cell displays)."""
    from IPython.display import Markdown

    return Markdown(text)


def num(v: Any, digits: int = 3) -> str:
    """A number for people: ``None`` as "–", floats to ``digits`` decimals, ints with separators."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    try:
        return f"{float(v):.{digits}f}"
    except (TypeError, ValueError):
        return str(v)


def interval(est: CI, digits: int = 3) -> str:
    """``0.975 (95 % CI 0.875–1.000)``; the estimate alone when no interval is defined."""
    if not est.defined:
        return num(est.estimate, digits)
    pct = round(est.confidence * 100)
    low, high = num(est.low, digits), num(est.high, digits)
    return f"{num(est.estimate, digits)} ({pct} % CI {low}–{high})"


def join(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
