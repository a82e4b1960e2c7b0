"""Parameter profiles (``params/<name>.yaml``) and their validation against the notebooks.

A profile holds only deltas from the notebooks' own defaults::

    all:            # passed to every notebook that declares the key
      max_papers: 5
    01_ingest:      # passed to this notebook only; each key must be declared by it
      parse_timeout_s: 30

Papermill only warns about a parameter that a notebook does not declare; here it is an error that
names the key and the notebook, checked against the parameters cell (read as papermill reads it,
:mod:`rag.report.parameters_cell`). Papermill does not check types either (a string where a list is
declared is then read letter by letter), so every value is checked against the annotation in the
notebook's parameters cell (:func:`type_problem`), model names against the LLM registry
(:data:`MODEL_KEYS`), and a duplicated YAML key is an error rather than a silent last-one-wins.
Every problem of a profile is reported at once.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from rag import paths
from rag.errors import ConfigError
from rag.report.parameters_cell import read_parameters

PARAMS_DIR = "params"
NOTEBOOKS_DIR = "notebooks"
#: Keys the runner itself injects into every notebook (each notebook must declare them).
RUNNER_KEYS = ("profile", "output_dir")
#: Parameters naming models of :mod:`rag.llm.registry` (one name, or a list of names).
MODEL_KEYS = ("local_model", "local_models", "llm_model", "api_models", "llm_judges")
#: Python types accepted for each annotation papermill reports (``bool`` is not an ``int`` here).
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list, tuple),
    "dict": (dict,),
}


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key repeated in one mapping (YAML 1.2 forbids it)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def type_problem(name: str, value: Any, declared: dict[str, Any]) -> str | None:
    """Why ``value`` does not fit parameter ``name``'s annotated type, or None when it does."""
    expected = _TYPES.get(str(declared.get("inferred_type_name")))
    if expected is None:  # no annotation (or one this check does not know): nothing to hold it to
        return None
    if isinstance(value, bool) and bool not in expected:
        ok = False
    else:
        ok = isinstance(value, expected)
    if ok:
        return None
    return (
        f"parameter {name!r} is declared {declared['inferred_type_name']} "
        f"(default {declared.get('default')}), got {value!r} ({type(value).__name__})"
    )


def model_problems(name: str, value: Any) -> list[str]:
    """Bad model names (an unknown bare name or provider) in a :data:`MODEL_KEYS` parameter, each
    named with the known ones; ``provider:model`` names any model of a known provider."""
    if name not in MODEL_KEYS:
        return []
    from rag.errors import ConfigError
    from rag.llm.registry import resolve_model

    names = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
    problems = []
    for m in names:
        try:
            resolve_model(m)
        except ConfigError as e:
            problems.append(f"parameter {name!r}: {e}")
    return problems


def check_values(notebook: str, values: dict[str, Any], declared: dict[str, Any]) -> list[str]:
    """Type and model-name problems of ``values`` for one notebook, each naming the notebook."""
    problems = []
    for key, value in values.items():
        if key not in declared:
            continue
        why = type_problem(key, value, declared[key])
        problems += [f"{notebook}: {why}"] if why else []
        problems += [f"{notebook}: {why}" for why in model_problems(key, value)]
    return problems


def check_notebook_globals(notebook: str, namespace: dict[str, Any]) -> None:
    """Check a running notebook's parameter values (as papermill injected them) before use.

    ``papermill -p max_papers five`` injects the string ``"five"``; this makes it a
    :class:`ConfigError` naming the parameter instead of a TypeError cells later.

    Raises:
        ConfigError: listing every parameter whose value does not fit its declaration.
    """
    path = paths.resolve(NOTEBOOKS_DIR) / f"{notebook}.ipynb"
    if not path.exists():
        return
    declared = declared_parameters(path)
    values = {k: namespace[k] for k in declared if k in namespace}
    problems = check_values(notebook, values, declared)
    if problems:
        raise ConfigError("bad notebook parameters:\n  " + "\n  ".join(problems))


def notebook_paths() -> list[Path]:
    """The numbered notebooks, in execution order."""
    nbs = sorted(paths.resolve(NOTEBOOKS_DIR).glob("[0-9][0-9]_*.ipynb"))
    if not nbs:
        raise ConfigError(f"no notebooks found under {NOTEBOOKS_DIR}/")
    return nbs


@cache
def _declared(path: str, mtime: float) -> dict[str, dict[str, Any]]:
    """papermill's reading of a notebook's parameters, from the cell's syntax tree
    (:mod:`rag.report.parameters_cell`): importing papermill (nbformat, jsonschema) takes seconds,
    which every ``rag ask`` would pay to read settings that change only when the notebook does."""
    return read_parameters(path)


def declared_parameters(notebook: Path) -> dict[str, dict[str, Any]]:
    """Parameters declared in a notebook's ``parameters`` cell (name → papermill's description)."""
    params = _declared(str(notebook), notebook.stat().st_mtime)
    if not params:
        raise ConfigError(f"{notebook.name} has no cell tagged 'parameters'")
    return params


def list_profiles() -> list[str]:
    return sorted(p.stem for p in paths.resolve(PARAMS_DIR).glob("*.yaml"))


def profile_name(value: str) -> str:
    """The profile a ``--profile`` value names: a bare name, or a file directly in ``params/``.

    The name becomes an output folder (``outputs/<name>``) and a notebook parameter, so a value
    that points anywhere else is refused rather than followed.

    Raises:
        ConfigError: the value is empty, names a subfolder, or a path outside ``params/``.
    """
    name = value.removesuffix(".yaml")
    if name and "/" not in name and "\\" not in name and name not in (".", ".."):
        return name
    params = paths.resolve(PARAMS_DIR).resolve()
    path = paths.resolve(value).resolve() if value.strip() else params
    if path.parent == params and path.stem and path.suffix in ("", ".yaml"):
        return path.stem
    raise ConfigError(
        f"profile {value!r} is not a profile in {PARAMS_DIR}/: give a name "
        f"(have: {', '.join(list_profiles())}) or a file {PARAMS_DIR}/<name>.yaml"
    )


def load_profile(name: str) -> dict[str, dict[str, Any]]:
    """Read ``params/<name>.yaml`` as ``{"all": {...}, "NN_name": {...}}`` (sections optional).

    ``name`` is confined to ``params/`` by :func:`profile_name`.
    """
    name = profile_name(name)
    path = paths.resolve(PARAMS_DIR) / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(
            f"unknown profile {name!r}: no {PARAMS_DIR}/{name}.yaml "
            f"(have: {', '.join(list_profiles())})"
        )
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}  # noqa: S506 - a SafeLoader subclass
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
        ConfigError: a section names no notebook, a key is declared by no notebook (``all``), a
            notebook section holds a key that notebook does not declare, a value does not fit the
            parameter's annotated type, or a model name is not registered — every problem of the
            profile in one message, each naming key and notebook.
    """
    profile = profile_name(profile)
    data = load_profile(profile)
    where = f"{PARAMS_DIR}/{profile}.yaml"
    nbs = {nb.stem: nb for nb in notebook_paths()}
    declared = {stem: declared_parameters(nb) for stem, nb in nbs.items()}
    problems: list[str] = []
    unknown_sections = set(data) - set(nbs) - {"all"}
    if unknown_sections:
        problems.append(
            f"section(s) {sorted(unknown_sections)} name no notebook (notebooks: {sorted(nbs)})"
        )
    common = data.get("all", {})
    for key in common:
        if not any(key in d for d in declared.values()):
            problems.append(f"key 'all.{key}' is declared by no notebook's parameters cell")
    out: dict[str, dict[str, Any]] = {}
    for stem, decl in declared.items():
        missing = [k for k in RUNNER_KEYS if k not in decl]
        if missing:
            problems.append(f"{stem}.ipynb must declare {missing} in its parameters cell")
        own = data.get(stem, {})
        for key in own:
            if key not in decl:
                problems.append(
                    f"key '{key}' is not a parameter of notebook {stem} "
                    f"(it declares: {', '.join(sorted(decl))})"
                )
        params = {k: v for k, v in common.items() if k in decl}
        params.update(own)
        problems += check_values(stem, params, decl)
        params.update({"profile": profile, "output_dir": output_dir})
        out[stem] = params
    if problems:
        # a key in 'all' is checked once per notebook declaring it: report it once
        unique = list(dict.fromkeys(problems))
        raise ConfigError(f"{where}:\n  " + "\n  ".join(unique))
    return out
