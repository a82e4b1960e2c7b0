"""Profile names are confined to ``params/``: a bare name or a file directly inside it."""

from __future__ import annotations

import pytest

from rag import paths
from rag.errors import ConfigError
from rag.report import profiles, runner
from tests.test_runner import _notebook, project  # noqa: F401 - the fixture is used by name


def test_a_profile_outside_params_is_refused_before_anything_is_written(project):  # noqa: F811
    """An absolute profile path is refused before anything runs: followed, it would write to
    ``outputs//abs/path/name`` with the absolute path in run.json, the parameters cell and every
    page."""
    _notebook(project / "notebooks" / "01_demo.ipynb", "print(profile)")
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "name.yaml").write_text("{}\n")
    out = project / "outputs"
    with pytest.raises(ConfigError) as info:
        runner.run_report(str(elsewhere / "name"), output_root=str(out))
    assert str(elsewhere / "name") in str(info.value) and "params/" in str(info.value)
    assert not out.exists() or not any(out.rglob("*"))


def test_profile_names_resolve_to_the_bare_name_inside_params(project):  # noqa: F811
    prm = project / "params"
    (prm / "demo.yaml").write_text("{}\n")
    assert profiles.profile_name("demo") == "demo"
    assert profiles.profile_name("demo.yaml") == "demo"
    assert profiles.profile_name(str(prm / "demo.yaml")) == "demo"
    assert profiles.profile_name(str(prm / "demo")) == "demo"
    for bad in ("../demo", str(project / "demo"), "/etc/passwd", "sweeps/demo", "", "."):
        with pytest.raises(ConfigError) as info:
            profiles.profile_name(bad)
        assert repr(bad) in str(info.value)


def test_a_relative_path_into_the_real_params_folder_is_its_name():
    assert profiles.profile_name("params/smoke.yaml") == "smoke"
    assert profiles.profile_name(str(paths.project_root() / "params" / "smoke")) == "smoke"
    with pytest.raises(ConfigError):
        profiles.profile_name("params/sweeps/smoke.yaml")


def test_the_parameters_carry_the_bare_name(project):  # noqa: F811
    _notebook(project / "notebooks" / "01_demo.ipynb", "pass")
    (project / "params" / "demo.yaml").write_text("{}\n")
    resolved = profiles.resolve_parameters(str(project / "params" / "demo.yaml"), "outputs/demo")
    assert resolved["01_demo"]["profile"] == "demo"


def test_rag_report_refuses_a_profile_outside_params(project, capsys):  # noqa: F811
    from rag.cli import main

    _notebook(project / "notebooks" / "01_demo.ipynb", "pass")
    (project / "name.yaml").write_text("{}\n")
    assert main(["report", "--profile", str(project / "name")]) == 2
    err = capsys.readouterr().err
    assert f"profile {str(project / 'name')!r}" in err and "params/" in err
