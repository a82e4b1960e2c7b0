"""Per-run cost meter: tokens and dollars by provider and model, cached vs fresh calls.

Fresh calls are what the run spent; cache hits cost nothing now and are reported separately as
``saved_usd`` (the stored cost of the original call), so a warm re-run shows ``cost_usd == 0``.
Each model's row says how its cost is known (``price``): a list price with its date, "$0 (local)"
/ "$0 (self-hosted)", or "price unknown" for a model the price table does not list, whose dollars
are then not counted rather than counted as $0.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from rag.llm.base import Completion

if TYPE_CHECKING:
    import pandas as pd


@dataclass(slots=True)
class _Row:
    calls: int = 0
    fresh_calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    saved_usd: float = 0.0
    latency_s: float = 0.0


class CostMeter:
    """Thread-safe tally of completions; one per run, injected into every model."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], _Row] = {}
        self._prices: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def record(self, c: Completion) -> None:
        """Count one completion (fresh or cached)."""
        with self._lock:
            row = self._rows.setdefault((c.provider, c.model), _Row())
            if c.price:
                self._prices[(c.provider, c.model)] = c.price
            row.calls += 1
            row.input_tokens += c.input_tokens
            row.output_tokens += c.output_tokens
            row.latency_s += c.latency_s
            if c.cached:
                row.cached_calls += 1
                row.saved_usd += c.cost_usd
            else:
                row.fresh_calls += 1
                row.cost_usd += c.cost_usd

    @property
    def total_cost_usd(self) -> float:
        """Dollars spent on fresh calls in this run."""
        with self._lock:
            return sum(r.cost_usd for r in self._rows.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary for metrics.json: totals plus one entry per provider/model."""
        with self._lock:
            items = sorted(self._rows.items())
            prices = dict(self._prices)
        by_model = [
            {
                "provider": p,
                "model": m,
                **asdict(r),
                **({"price": prices[p, m]} if (p, m) in prices else {}),
            }
            for (p, m), r in items
        ]
        totals = _Row()
        for _, r in items:
            for f in totals.__slots__:
                setattr(totals, f, getattr(totals, f) + getattr(r, f))
        return {"total": asdict(totals), "by_model": by_model}

    @property
    def unpriced_models(self) -> list[str]:
        """Models whose calls have no known price (their dollars are not in the totals)."""
        with self._lock:
            return sorted(m for (_, m), label in self._prices.items() if label == "price unknown")

    def to_frame(self) -> pd.DataFrame:
        """One row per provider/model plus a ``total`` row, for a notebook table."""
        import pandas as pd

        d = self.to_dict()
        rows = d["by_model"] + [{"provider": "total", "model": "", **d["total"]}]
        return pd.DataFrame(rows)
