"""Parameter profiles (``params/<name>.yaml``) and their validation against the notebooks.

A profile holds only deltas from the notebooks' own defaults::

    all:            # passed to every notebook that declares the key
      max_papers: 5
    01_ingest:      # passed to this notebook only; each key must be declared by it
      parse_timeout_s: 30

Papermill only warns about a parameter that a notebook does not declare; here it is an error that
names the key and the notebook, checked with ``papermill.inspect_notebook``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from rag import paths
from rag.errors import ConfigError

PARAMS_DIR = "params"
NOTEBOOKS_DIR = "notebooks"
#: Keys the runner itself injects into every notebook (each notebook must declare them).
RUNNER_KEYS = ("profile", "output_dir")


def notebook_paths() -> list[Path]:
    """The numbered notebooks, in execution order."""
    nbs = sorted(paths.resolve(NOTEBOOKS_DIR).glob("[0-9][0-9]_*.ipynb"))
    if not nbs:
        raise ConfigError(f"no notebooks found under {NOTEBOOKS_DIR}/")
    return nbs


@cache
def _declared(path: str, mtime: float) -> dict[str, dict[str, Any]]:
    import papermill

    return papermill.inspect_notebook(path)


def declared_parameters(notebook: Path) -> dict[str, dict[str, Any]]:
    """Parameters declared in a notebook's ``parameters`` cell (name → papermill's description)."""
    params = _declared(str(notebook), notebook.stat().st_mtime)
    if not params:
        raise ConfigError(f"{notebook.name} has no cell tagged 'parameters'")
    return params


def list_profiles() -> list[str]:
    return sorted(p.stem for p in paths.resolve(PARAMS_DIR).glob("*.yaml"))


def load_profile(name: str) -> dict[str, dict[str, Any]]:
    """Read ``params/<name>.yaml`` as ``{"all": {...}, "NN_name": {...}}`` (sections optional)."""
    path = paths.resolve(PARAMS_DIR) / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(
            f"unknown profile {name!r}: no {PARAMS_DIR}/{name}.yaml "
            f"(have: {', '.join(list_profiles())})"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{PARAMS_DIR}/{name}.yaml is not valid YAML: {e}") from e
    if not isinstance(data, dict) or any(not isinstance(v, dict) for v in data.values()):
        raise ConfigError(
            f"{PARAMS_DIR}/{name}.yaml must map section names ('all' or a notebook stem) "
            "to mappings"
        )
    return data


def resolve_parameters(profile: str, output_dir: str) -> dict[str, dict[str, Any]]:
    """Per-notebook parameters for a profile, validated against what each notebook declares.

    Raises:
        ConfigError: a section names no notebook, a key is declared by no notebook (``all``), or a
            notebook section holds a key that notebook does not declare — naming key and notebook.
    """
    data = load_profile(profile)
    nbs = {nb.stem: nb for nb in notebook_paths()}
    declared = {stem: declared_parameters(nb) for stem, nb in nbs.items()}
    unknown_sections = set(data) - set(nbs) - {"all"}
    if unknown_sections:
        raise ConfigError(
            f"{PARAMS_DIR}/{profile}.yaml: section(s) {sorted(unknown_sections)} name no notebook "
            f"(notebooks: {sorted(nbs)})"
        )
    common = data.get("all", {})
    for key in common:
        if not any(key in d for d in declared.values()):
            raise ConfigError(
                f"{PARAMS_DIR}/{profile}.yaml: key 'all.{key}' is declared by no notebook's "
                "parameters cell"
            )
    out: dict[str, dict[str, Any]] = {}
    for stem, decl in declared.items():
        missing = [k for k in RUNNER_KEYS if k not in decl]
        if missing:
            raise ConfigError(f"{stem}.ipynb must declare {missing} in its parameters cell")
        own = data.get(stem, {})
        for key in own:
            if key not in decl:
                raise ConfigError(
                    f"{PARAMS_DIR}/{profile}.yaml: key '{key}' is not a parameter of notebook "
                    f"{stem} (it declares: {', '.join(sorted(decl))})"
                )
        params = {k: v for k, v in common.items() if k in decl}
        params.update(own)
        params.update({"profile": profile, "output_dir": output_dir})
        out[stem] = params
    return out
