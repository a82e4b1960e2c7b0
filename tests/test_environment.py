"""environment.yml (conda) and pyproject.toml (pip) must declare the same dependencies."""

from __future__ import annotations

import tomllib

import yaml

from rag import paths


def _pyproject_deps() -> set[str]:
    data = tomllib.loads((paths.project_root() / "pyproject.toml").read_text())
    proj = data["project"]
    deps = list(proj["dependencies"])
    for extra in proj.get("optional-dependencies", {}).values():
        deps += extra
    return {d.replace(" ", "") for d in deps}


def _conda_pip_deps() -> set[str]:
    env = yaml.safe_load((paths.project_root() / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip: section"
    return {d.replace(" ", "") for d in pip_sections[0] if not d.startswith("-e")}


def test_environment_yml_matches_pyproject():
    py, conda = _pyproject_deps(), _conda_pip_deps()
    assert py - conda == set(), f"in pyproject.toml but not environment.yml: {sorted(py - conda)}"
    assert conda - py == set(), f"in environment.yml but not pyproject.toml: {sorted(conda - py)}"


def test_torch_is_pinned_to_the_cpu_build_that_installs_here():
    assert "torch==2.13.0" in _pyproject_deps()
