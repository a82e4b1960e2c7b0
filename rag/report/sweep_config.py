"""A sweep file (``params/sweeps/<name>.yaml``): base profile, notebooks, grid, and its cells.

::

    profile: default             # the params/<profile>.yaml the cells start from
    notebooks: ["04"]            # stems or NN prefixes, run in order in every cell
    grid:                        # per notebook: parameter -> values; cells = their product
      04_retrieval:
        chunk_strategy: [fixed, sentence, section]
        embedder: [minilm, e5-small]
    fixed:                       # optional overrides shared by every cell
      04_retrieval:
        retrievers: [dense, bm25, hybrid]
    base: {chunk_strategy: fixed, embedder: minilm}   # the reference cell (default: the first)
    main:                        # the metric of the heatmap and of the paired tests
      notebook: 04_retrieval
      scope: corpus_gold/chunk/hybrid
      metric: ndcg@10

Grid and fixed keys are validated like a profile's (:func:`rag.report.profiles.resolve_parameters`
plus :func:`~rag.report.profiles.check_values`): a key a notebook does not declare is a
:class:`~rag.errors.ConfigError` naming key and notebook, before anything runs. A cell's name is
derived from its grid values only (``chunk_strategy=sentence,embedder=e5-small``), so it is stable
across runs and safe as a folder name.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rag import paths
from rag.errors import ConfigError
from rag.report import profiles

SWEEPS_DIR = "params/sweeps"
#: Characters kept in a cell name; anything else becomes ``_``.
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]")


class MainMetric(BaseModel):
    """Where the sweep's main metric lives in each cell's ``metrics.json``."""

    model_config = ConfigDict(extra="forbid")
    notebook: str = Field("04_retrieval", description="notebook stem whose metrics.json holds it")
    scope: str = Field(
        "corpus_gold/chunk/hybrid", description="path to the metric's parent, '/'-joined"
    )
    metric: str = Field("ndcg@10", description="metric name under the scope")
    per_question_table: str = Field(
        "per_question", description="tables/<name>.csv with scope, qid, metric, value columns"
    )


class SweepSpec(BaseModel):
    """A parsed sweep file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    profile: str = Field("default", description="base params profile")
    notebooks: list[str] = Field(min_length=1, description="notebook stems or NN prefixes")
    grid: dict[str, dict[str, list[Any]]] = Field(min_length=1, description="notebook -> grid")
    fixed: dict[str, dict[str, Any]] = Field(default_factory=dict, description="shared overrides")
    base: dict[str, Any] | None = Field(None, description="grid values of the reference cell")
    main: MainMetric = Field(default_factory=MainMetric)
    seed: int = Field(0, description="seed of the paired tests")


class Cell(BaseModel):
    """One point of the grid: its name, grid values, and every notebook's full parameters."""

    name: str
    values: dict[str, Any]
    parameters: dict[str, dict[str, Any]]


def _fmt(v: Any) -> str:
    return "+".join(map(str, v)) if isinstance(v, list | tuple) else str(v)


def cell_name(values: dict[str, Any]) -> str:
    """``k=v,k2=v2`` in grid order; list values joined by ``+``; filesystem-safe."""
    raw = ",".join(f"{k}={_fmt(v)}" for k, v in values.items())
    return _UNSAFE.sub("_", raw)[:200]


def sweep_path(name_or_path: str | Path) -> Path:
    """``params/sweeps/<name>.yaml`` for a bare name, else the path itself (project-relative)."""
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = Path(SWEEPS_DIR) / f"{p}.yaml"
    return paths.resolve(p)


def load_spec(path: Path) -> SweepSpec:
    """Parse a sweep file; every shape problem in one ConfigError naming the file."""
    if not path.exists():
        have = sorted(x.stem for x in paths.resolve(SWEEPS_DIR).glob("*.yaml"))
        raise ConfigError(f"no sweep file {paths.display(path)} (have: {', '.join(have)})")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=profiles._UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        return SweepSpec.model_validate(data or {})
    except (yaml.YAMLError, ValidationError) as e:
        raise ConfigError(f"{paths.display(path)} is not a valid sweep file: {e}") from e


def _notebook_stems(spec: SweepSpec, known: list[str]) -> list[str]:
    out = []
    for want in spec.notebooks:
        match = [s for s in known if s == want or s.split("_")[0] == want]
        if not match:
            raise ConfigError(f"sweep notebook {want!r}: no such notebook (have: {known})")
        out.append(match[0])
    return out


def expand(spec: SweepSpec, name: str, output_root: str = "outputs/sweeps") -> list[Cell]:
    """The sweep's cells, each with every listed notebook's validated parameters.

    Raises:
        ConfigError: unknown notebook, a grid/fixed key a notebook does not declare, a value that
            does not fit the declared type, an empty grid axis, or a ``base`` that is no cell —
            all problems at once, each naming the key and the notebook.
    """
    where = f"sweep {name!r}"
    nbs = {nb.stem: nb for nb in profiles.notebook_paths()}
    stems = _notebook_stems(spec, list(nbs))
    base_params = profiles.resolve_parameters(spec.profile, f"{output_root}/{name}")
    declared = {s: profiles.declared_parameters(nbs[s]) for s in stems}
    problems: list[str] = []
    axes: list[tuple[str, str, list[Any]]] = []  # (notebook, key, values)
    for section, kind in ((spec.grid, "grid"), (spec.fixed, "fixed")):
        for nb, keys in section.items():
            if nb not in stems:
                problems.append(
                    f"{kind} section {nb!r} is not one of the sweep's notebooks {stems}"
                )
                continue
            for key, value in keys.items():
                if key not in declared[nb] or key in profiles.RUNNER_KEYS:
                    problems.append(
                        f"{kind} key {key!r} is not a parameter of notebook {nb} "
                        f"(it declares: {', '.join(sorted(declared[nb]))})"
                    )
                    continue
                values = value if kind == "grid" else [value]
                if kind == "grid" and not values:
                    problems.append(f"grid key {key!r} of {nb} has no values")
                for v in values:
                    problems += profiles.check_values(nb, {key: v}, declared[nb])
                if kind == "grid":
                    axes.append((nb, key, values))
    if problems:
        raise ConfigError(f"{where}:\n  " + "\n  ".join(dict.fromkeys(problems)))
    keys = [k for _, k, _ in axes]
    label = {(nb, k): (k if keys.count(k) == 1 else f"{nb.split('_')[0]}.{k}") for nb, k, _ in axes}
    cells: list[Cell] = []
    for combo in itertools.product(*(vals for _, _, vals in axes)):
        values = {label[(nb, k)]: v for (nb, k, _), v in zip(axes, combo, strict=True)}
        cname = cell_name(values)
        params: dict[str, dict[str, Any]] = {}
        for stem in stems:
            p = dict(base_params[stem])
            p.update(spec.fixed.get(stem, {}))
            p.update({k: v for (nb, k, _), v in zip(axes, combo, strict=True) if nb == stem})
            p["output_dir"] = f"{output_root}/{name}/{cname}"
            params[stem] = p
        cells.append(Cell(name=cname, values=values, parameters=params))
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: two cells map to the same folder name; simplify the values")
    return cells


def base_cell(spec: SweepSpec, cells: list[Cell]) -> Cell:
    """The reference cell: the one matching ``spec.base`` (default: the first)."""
    if spec.base is None:
        return cells[0]
    for c in cells:
        if all(c.values.get(k) == v for k, v in spec.base.items()):
            return c
    raise ConfigError(f"sweep base {spec.base} matches no cell (cells: {[c.name for c in cells]})")
