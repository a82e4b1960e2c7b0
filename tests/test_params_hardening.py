"""Parameters are checked before anything runs (issue 15, items 7 and 8).

Before issue 15 each of these passed silently: a string where a list or an int is declared (read
later letter by letter: ``strategy='f'``), a duplicated YAML key (last one won), a typo in
``api_models`` / ``llm_judges`` ("not run: unknown model", exit 0), ``check-params`` stopping at
the first bad profile, and ``papermill -p max_papers five`` failing cells later with a TypeError.
"""

from __future__ import annotations

import papermill
import pytest

from rag.errors import ConfigError
from rag.report import profiles, runner
from rag.report.recorder import Recorder
from tests.test_runner import _notebook, project  # noqa: F401 - the fixture is used by name

TYPED = (
    'strategies: list = ["fixed"]  # strategies\n'
    "ratio: float = 0.5  # a ratio\n"
    "flag: bool = False  # a flag\n"
    "api_models: list = []  # A/B answerers\n"
    "llm_judges: list = []  # LLM judges\n"
)


@pytest.fixture()
def typed(project):  # noqa: F811
    _notebook(project / "notebooks" / "01_demo.ipynb", "pass", extra_params=TYPED)
    return project


def _write(root, name: str, text: str) -> None:
    (root / "params" / f"{name}.yaml").write_text(text)


def test_values_are_checked_against_the_annotated_types(typed):
    _write(typed, "bad", "01_demo:\n  x: lots\n  strategies: fixed\n  flag: 1\n  ratio: 2\n")
    with pytest.raises(ConfigError) as info:
        profiles.resolve_parameters("bad", "outputs/bad")
    msg = str(info.value)
    assert "01_demo: parameter 'x' is declared int" in msg and "'lots'" in msg
    assert "parameter 'strategies' is declared list" in msg and "'fixed' (str)" in msg
    assert "parameter 'flag' is declared bool" in msg
    assert "ratio" not in msg  # an int is a fine float


def test_a_duplicate_yaml_key_is_an_error(typed):
    _write(typed, "dup", "01_demo:\n  x: 1\n  x: 2\n")
    with pytest.raises(ConfigError, match="duplicate key 'x'"):
        profiles.resolve_parameters("dup", "outputs/dup")


def test_model_name_typos_are_errors_naming_them(typed):
    _write(typed, "typo", '01_demo:\n  api_models: ["gpt-4o-mni"]\n  llm_judges: ["claude-x"]\n')
    with pytest.raises(ConfigError) as info:
        profiles.resolve_parameters("typo", "outputs/typo")
    assert "unknown model 'gpt-4o-mni'" in str(info.value)
    assert "unknown model 'claude-x'" in str(info.value)
    from rag.llm.factory import model_status

    with pytest.raises(ConfigError, match="gpt-4o-mni"):
        model_status(["gpt-4o-mni"])


def test_check_params_reports_every_bad_profile(typed, capsys):
    from rag.cli import main

    _write(typed, "good", "01_demo:\n  x: 3\n")
    _write(typed, "bad1", "01_demo:\n  x: three\n")
    _write(typed, "bad2", "01_demo:\n  nope: 1\n")
    assert main(["check-params"]) == 2
    captured = capsys.readouterr()
    assert "bad1: error" in captured.err and "bad2: error" in captured.err
    assert "good: ok" in captured.out
    assert "2 of 3 profile(s) are invalid" in captured.err


def test_the_runner_refuses_a_bad_profile_before_running_anything(typed):
    _write(typed, "bad", "01_demo:\n  strategies: fixed\n")
    with pytest.raises(ConfigError, match="strategies"):
        runner.run_report("bad", output_root=str(typed / "outputs"))
    assert not (typed / "outputs" / "bad").exists()


def test_every_shipped_profile_still_validates():
    for name in profiles.list_profiles():
        profiles.resolve_parameters(name, f"outputs/{name}")


def test_the_recorder_checks_papermill_values_naming_the_parameter(tmp_path):
    with pytest.raises(
        ConfigError, match=r"02_chunk: parameter 'max_papers' is declared int.*'five'"
    ):
        Recorder(str(tmp_path), "02_chunk", params={"max_papers": "five", "max_tokens": 254})
    Recorder(str(tmp_path), "02_chunk", params={"max_papers": 5})


def test_papermill_p_max_papers_five_is_a_clear_error(tmp_path):
    """``papermill notebooks/02_chunk.ipynb out.ipynb -p max_papers five`` as the probe ran it."""
    from rag import paths

    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(
            str(paths.resolve("notebooks/02_chunk.ipynb")),
            str(tmp_path / "out.ipynb"),
            parameters={"max_papers": "five", "output_dir": str(tmp_path / "o")},
            kernel_name=runner.ensure_kernel(),
            cwd=str(paths.project_root()),
            progress_bar=False,
        )
    assert info.value.ename == "ConfigError"
    assert "max_papers" in info.value.evalue and "five" in info.value.evalue
