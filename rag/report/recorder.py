"""What a notebook writes: figures, tables and ``metrics.json`` under the run's output folder.

Notebooks call a :class:`Recorder` instead of building paths themselves, so every notebook lays its
outputs out the same way: ``<output_dir>/<notebook>/{metrics.json, summary.json, figures/*.png,
figures/*.svg, tables/*.csv}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rag import paths


def _jsonable(x: Any) -> Any:
    """Plain JSON types; NaN/inf become ``None`` so metrics.json stays valid JSON."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and callable(x.item):  # numpy scalars
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, Path):
        return paths.display(x)
    return x


class Recorder:
    """Writes one notebook's artefacts.

    Args:
        output_dir: the run's folder (``outputs/<profile>``), relative to the project root.
        notebook: the notebook stem, e.g. ``"01_ingest"``.
        params: the notebook's namespace (``globals()``): its parameter values are checked against
            the parameters cell's annotations first, so a bad ``papermill -p`` value is an error
            naming the parameter, before any cell uses it.

    Raises:
        ConfigError: a parameter value does not fit its declared type or names an unknown model.
    """

    def __init__(
        self, output_dir: str, notebook: str, params: dict[str, Any] | None = None
    ) -> None:
        if params is not None:
            from rag.report.profiles import check_notebook_globals

            check_notebook_globals(notebook, params)
        self.dir = paths.resolve(output_dir) / notebook
        (self.dir / "figures").mkdir(parents=True, exist_ok=True)
        (self.dir / "tables").mkdir(parents=True, exist_ok=True)
        self.notebook = notebook

    def figure(self, fig: Any, name: str) -> None:
        """Save a matplotlib figure as ``figures/<name>.png`` and ``.svg`` (the notebook shows it).

        Returns ``None`` so that a cell ending with this call echoes nothing; the inline backend
        still displays the figure. The SVG is deterministic (fixed hash salt, no date).
        """
        import matplotlib

        fig.savefig(
            self.dir / "figures" / f"{name}.png",
            dpi=110,
            bbox_inches="tight",
            metadata={"Software": None},
        )
        with matplotlib.rc_context({"svg.hashsalt": f"rag-{name}"}):
            fig.savefig(
                self.dir / "figures" / f"{name}.svg",
                bbox_inches="tight",
                metadata={"Date": None, "Creator": None},
            )
        return None

    def table(self, df: Any, name: str, *, index: bool = False) -> Any:
        """Save a DataFrame as ``tables/<name>.csv`` and return it for display."""
        df.to_csv(self.dir / "tables" / f"{name}.csv", index=index, float_format="%.6g")
        return df

    def metrics(self, metrics: dict[str, Any], *, headline: dict[str, Any] | None = None) -> None:
        """Write ``metrics.json``; ``headline`` (a few named numbers, or groups of them as nested
        dicts) is shown on the index page. Returns ``None``: a record cell echoes nothing."""
        payload = _jsonable({**metrics, "headline": headline or {}})
        path = self.dir / "metrics.json"
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return None

    def summary(self, answer: str, *, figure: str | None = None) -> None:
        """Write ``summary.json``: the notebook's answer in one sentence (computed from the same
        numbers as ``metrics.json``) and the name of its key figure, for the index page."""
        payload = {"answer": answer, "figure": figure}
        (self.dir / "summary.json").write_text(
            json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        return None


def read_metrics(output_dir: str | Path, notebook: str) -> dict[str, Any]:
    """Read back one notebook's ``metrics.json`` (tests and the index page use it)."""
    path = paths.resolve(output_dir) / notebook / "metrics.json"
    return json.loads(path.read_text(encoding="utf-8"))
