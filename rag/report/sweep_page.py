"""A sweep's summary page: ``outputs/sweeps/<name>/index.html``.

Two figures, then the tables behind them: a heatmap of the main metric over the grid (value and
95 % CI in each cell) and a dot-and-whisker of every cell minus the base cell, paired over the same
questions (:func:`rag.report.figures.diff_to_baseline`, red when the Holm-corrected test and the
CI agree on a real difference). Then per cell: status, wall time, error, and links to its rendered
notebooks. Styled like the report's front page (:data:`rag.report.index_page.STYLE`); no script.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rag.report import figures, index_page, render
from rag.report.sweep_config import SweepSpec


def _save(fig: Any, out: Path, name: str) -> str:
    import matplotlib
    import matplotlib.pyplot as plt

    (out / "figures").mkdir(exist_ok=True)
    with matplotlib.rc_context({"svg.hashsalt": f"sweep-{name}"}):
        fig.savefig(out / "figures" / f"{name}.svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return f"figures/{name}.svg"


def main_metric_table(table: pd.DataFrame, spec: SweepSpec) -> pd.DataFrame:
    """The main metric's rows of ``results.csv`` (one per ok cell)."""
    m = spec.main
    sel = table[
        (table["notebook"] == m.notebook)
        & (table["scope"] == m.scope)
        & (table["metric"] == m.metric)
    ]
    return sel.reset_index(drop=True)


def heatmap(main: pd.DataFrame, value_cols: list[str], label: str, out: Path) -> str | None:
    """Main metric over the grid: rows = the first grid key, columns = the others combined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if main.empty or not value_cols:
        return None
    df = main.copy()
    rows_key = value_cols[0]
    df["_col"] = (
        df[value_cols[1:]].astype(str).agg(", ".join, axis=1) if len(value_cols) > 1 else ""
    )
    grid = df.pivot_table(
        index=rows_key, columns="_col", values="value", aggfunc="first", sort=False
    )
    lo = df.pivot_table(
        index=rows_key, columns="_col", values="ci_low", aggfunc="first", sort=False
    )
    hi = df.pivot_table(
        index=rows_key, columns="_col", values="ci_high", aggfunc="first", sort=False
    )
    fig, ax = plt.subplots(figsize=(1.9 * grid.shape[1] + 2.4, 0.9 * grid.shape[0] + 1.6))
    arr = grid.to_numpy(dtype=float)
    im = ax.imshow(arr, cmap="viridis", aspect="auto")
    for i, r in enumerate(grid.index):
        for j, c in enumerate(grid.columns):
            v = grid.loc[r, c]
            if pd.notna(v):  # dark text on the bright end of viridis, white on the dark end
                bright = im.norm(v) > 0.6
                ax.text(j, i, f"{v:.3f}\n[{lo.loc[r, c]:.3f}, {hi.loc[r, c]:.3f}]", ha="center",
                        va="center", fontsize=8, color="k" if bright else "w")  # fmt: skip
    ax.set_xticks(range(grid.shape[1]), [str(c) or " " for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(r) for r in grid.index])
    ax.set(xlabel=", ".join(value_cols[1:]), ylabel=rows_key, title=f"{label} (95 % CI)")
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _save(fig, out, "heatmap")


def diff_plot(paired: pd.DataFrame, base: str, label: str, out: Path) -> str | None:
    """Dot-and-whisker of each cell minus the base cell, paired over the same questions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tested = paired[paired["diff"].notna()].rename(columns={"cell": "a", "base": "b"})
    if tested.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(tested) + 1.6))
    figures.diff_to_baseline(
        ax, tested, base, metric=label, title=f"Each cell minus the base cell ({base})"
    )
    return _save(fig, out, "diff_to_base")


def _table_html(df: pd.DataFrame) -> str:
    return df.to_html(index=False, float_format=lambda x: f"{x:.3f}", na_rep="", border=0,
                      classes="meta", escape=True)  # fmt: skip


def write_page(
    out: Path, summary: dict[str, Any], table: pd.DataFrame, paired: pd.DataFrame, spec: SweepSpec
) -> Path:
    """Write ``out/index.html`` from the sweep's summary, results and paired tables."""
    name, base = summary["name"], summary["base"]
    m = spec.main
    label = f"{m.metric} ({m.scope})"
    cells = summary["cells"]
    value_cols = [c for c in table.columns if c not in _FIXED_COLS] or list(
        cells[0].get("values", {}) if cells else []
    )
    main = main_metric_table(table, spec)
    figs = [
        f for f in (heatmap(main, value_cols, label, out), diff_plot(paired, base, label, out)) if f
    ]
    fig_html = "".join(
        f"<figure><img src='{html.escape(f)}' alt='{html.escape(f)}'></figure>" for f in figs
    )
    real = paired[paired["significant"].astype(bool)]["cell"].tolist() if len(paired) else []
    reading = (
        f"Real differences from the base cell on {html.escape(label)}: "
        + (", ".join(html.escape(c) for c in real) if real else "none")
        + " (Holm-corrected paired randomisation test and bootstrap CI agree)."
    )
    rows = []
    for c in cells:
        cell = html.escape(c["name"])
        links = " · ".join(
            f"<a href='{cell}/{html.escape(n['name'])}.html'>{html.escape(n['name'])}</a>"
            f" (<a href='{cell}/{html.escape(render.code_name(n['name']))}'>code</a>)"
            for n in c.get("notebooks", [])
        )
        rows.append(
            f"<tr><td>{html.escape(c['name'])}{' (base)' if c['name'] == base else ''}</td>"
            f"<td>{html.escape(str(c.get('status', 'not run')))}</td>"
            f"<td>{float(c.get('wall_s') or 0):,.1f} s</td><td>{links}</td>"
            f"<td>{html.escape(str(c.get('error') or ''))}</td></tr>"
        )
    spec_yaml = yaml.safe_dump(spec.model_dump(), sort_keys=False).strip()
    main_cols = ["cell", "value", "ci_low", "ci_high", "n"]
    sf_note = (
        " SciFact rows (<code>scifact/…</code> in results.csv) index whole abstracts: no chunker "
        "applies there, so they move with the other parameters only."
        if table["scope"].astype(str).str.startswith("scifact/").any()
        else ""
    )
    main_html = _table_html(main[main_cols]) if not main.empty else "<p>No cell finished.</p>"
    command = (
        f"rag sweep params/sweeps/{name}.yaml --engine {summary['engine']} "
        f"--workers {summary['workers']}"
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sweep {html.escape(name)} — arXiv RAG Lab</title>
<style>{index_page.STYLE}</style></head><body>
<nav class="post-nav"><a href="../../{html.escape(spec.profile)}/index.html">arXiv RAG Lab</a> ·
sweep <code>{html.escape(name)}</code></nav>
<h1>Sweep <code>{html.escape(name)}</code>: {html.escape(", ".join(value_cols))}</h1>
<p>{len(cells)} cells of notebooks {html.escape(", ".join(spec.grid))} on the
<code>{html.escape(spec.profile)}</code> profile; base cell <code>{html.escape(base)}</code>;
main metric {html.escape(label)}. Engine {html.escape(summary["engine"])},
{summary["workers"]} workers, {summary["wall_s"]:,.1f} s for the {len(summary["ran"])} cells run
this time ({len(summary["skipped"])} resumed from earlier runs).</p>
<p class="answer">{reading}</p>
{fig_html}
<section class="nb"><h2>Main metric per cell</h2>{main_html}</section>
<section class="nb"><h2>Each cell against the base cell (paired over the same questions)</h2>
{_table_html(paired)}
<p>Cells with another chunker have other chunk qrels for the same question; the pairing is over
question ids, each value being that question's score under its own cell's configuration.{sf_note}
</p></section>
<section class="nb"><h2>Cells</h2><table class="meta"><tr><th>cell</th><th>status</th>
<th>wall time</th><th>notebooks</th><th>error</th></tr>{"".join(rows)}</table>
<p><a href="results.csv">results.csv</a> (every metric of every cell, tidy) ·
<a href="paired.csv">paired.csv</a> · <a href="sweep.json">sweep.json</a></p></section>
<section class="nb"><h2>Reproduce</h2>
<pre>{html.escape(command)}</pre>
<details><summary>sweep file</summary><pre>{html.escape(spec_yaml)}</pre></details></section>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


_FIXED_COLS = {"cell", "notebook", "scope", "metric", "value", "ci_low", "ci_high", "n", "status",
               "wall_s"}  # fmt: skip
