"""A sweep's numbers: one tidy table of every recorded metric, and each cell against the base cell.

``results.csv`` has one row per cell x metric: the cell's grid values (one column each), then
``notebook``, ``scope`` (the path to the metric in the notebook's ``metrics.json``, ``/``-joined,
e.g. ``corpus_gold/chunk/hybrid``), ``metric``, ``value``, ``ci_low``, ``ci_high``, ``n``, and the
cell's ``status`` and ``wall_s`` (its only timing column). A metric is any ``metrics.json`` node
of the shape ``{mean, ci_low, ci_high, n}`` (what :class:`rag.evaluation.stats.CI` writes), so the
table needs no per-notebook code.

``paired.csv`` compares each cell with the base cell on the main metric, paired over the questions
both cells scored (their ``tables/<per_question_table>.csv``): mean difference with a bootstrap 95 %
CI and a paired randomisation test (:func:`rag.evaluation.stats.paired_test`), Holm-corrected over
the cells. A difference is called real when the corrected p < 0.05 and the CI excludes 0. Cells with
a different chunker have different chunk qrels for the same question; pairing is over question ids,
each cell's value being that question's score under its own chunking, so the comparison is of what a
user of each configuration would get, question by question.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from rag.evaluation.stats import holm, paired_test
from rag.report.sweep_config import SweepSpec

_CI_KEYS = {"mean", "ci_low", "ci_high", "n"}
ALPHA = 0.05


def metric_leaves(tree: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str, dict]]:
    """``(scope, metric, node)`` for every ``{mean, ci_low, ci_high, n}`` node of a metrics tree."""
    if not isinstance(tree, dict):
        return
    if _CI_KEYS <= set(tree) and path:
        yield "/".join(path[:-1]), path[-1], tree
        return
    for k, v in tree.items():
        if k != "headline":
            yield from metric_leaves(v, (*path, str(k)))


def _value_columns(manifests: list[dict[str, Any]]) -> list[str]:
    cols: list[str] = []
    for m in manifests:
        cols += [k for k in m.get("values", {}) if k not in cols]
    return cols


def results_table(out_root: Path, manifests: list[dict[str, Any]], spec: SweepSpec) -> pd.DataFrame:
    """The tidy table of every cell's recorded metrics (see the module docstring)."""
    value_cols = _value_columns(manifests)
    rows = []
    for m in manifests:
        values = {k: _cell_value(m.get("values", {}).get(k)) for k in value_cols}
        for stem in _stems(spec, m):
            path = out_root / m["name"] / stem / "metrics.json"
            if m.get("status") != "ok" or not path.exists():
                continue
            tree = json.loads(path.read_text(encoding="utf-8"))
            for scope, metric, node in metric_leaves(tree):
                rows.append(
                    {
                        "cell": m["name"],
                        **values,
                        "notebook": stem,
                        "scope": scope,
                        "metric": metric,
                        "value": node["mean"],
                        "ci_low": node["ci_low"],
                        "ci_high": node["ci_high"],
                        "n": node["n"],
                        "status": m.get("status"),
                        "wall_s": m.get("wall_s"),
                    }
                )
    cols = ["cell", *value_cols, "notebook", "scope", "metric", "value", "ci_low", "ci_high", "n"]
    df = pd.DataFrame(rows, columns=[*cols, "status", "wall_s"])
    return df.sort_values(["cell", "notebook", "scope", "metric"], kind="stable").reset_index(
        drop=True
    )


def _cell_value(v: Any) -> Any:
    return "+".join(map(str, v)) if isinstance(v, list | tuple) else v


def _stems(spec: SweepSpec, manifest: dict[str, Any]) -> list[str]:
    done = [n["name"] for n in manifest.get("notebooks", [])]
    return done or list(spec.grid)


def per_question(out_root: Path, cell: str, spec: SweepSpec) -> pd.Series | None:
    """The main metric's per-question values of one cell (index ``qid``), or None if absent."""
    main = spec.main
    path = out_root / cell / main.notebook / "tables" / f"{main.per_question_table}.csv"
    if not path.exists():
        return None
    df = pd.read_csv(path, dtype={"qid": str})
    sel = df[(df["scope"] == main.scope) & (df["metric"] == main.metric)]
    return None if sel.empty else sel.set_index("qid")["value"].sort_index()


def paired_vs_base(
    out_root: Path, manifests: list[dict[str, Any]], base: str, spec: SweepSpec
) -> pd.DataFrame:
    """Each ok cell minus the base cell on the main metric, paired over shared questions."""
    cols = ["cell", "base", "n", "mean_cell", "mean_base", "diff", "ci_low", "ci_high", "p_value",
            "p_adjusted", "significant", "note"]  # fmt: skip
    ok = {m["name"] for m in manifests if m.get("status") == "ok"}
    ref = per_question(out_root, base, spec) if base in ok else None
    rows: list[dict[str, Any]] = []
    for m in manifests:
        name = m["name"]
        if name == base:
            continue
        cur = per_question(out_root, name, spec) if name in ok else None
        if ref is None or cur is None:
            why = (
                "base cell has no per-question values" if ref is None else "no per-question values"
            )
            rows.append({"cell": name, "base": base, "note": why})
            continue
        shared = ref.index.intersection(cur.index)
        if len(shared) < 2:
            rows.append(
                {"cell": name, "base": base, "n": len(shared), "note": "< 2 shared questions"}
            )
            continue
        res = paired_test(cur.loc[shared].to_numpy(), ref.loc[shared].to_numpy(), seed=spec.seed)
        rows.append(
            {
                "cell": name,
                "base": base,
                "n": res.n,
                "mean_cell": res.mean_a,
                "mean_base": res.mean_b,
                "diff": res.diff,
                "ci_low": res.ci.low,
                "ci_high": res.ci.high,
                "p_value": res.p_value,
                "note": f"{len(ref) - len(shared)} base / {len(cur) - len(shared)} cell questions "
                "unshared"
                if len(shared) < max(len(ref), len(cur))
                else "",
            }
        )
    df = pd.DataFrame(rows, columns=cols)
    tested = df["p_value"].notna()
    if tested.any():
        df.loc[tested, "p_adjusted"] = holm(df.loc[tested, "p_value"].tolist())
        df["significant"] = (
            tested & (df["p_adjusted"] < ALPHA) & ((df["ci_low"] > 0) | (df["ci_high"] < 0))
        )
    else:
        df["significant"] = False
    return df
