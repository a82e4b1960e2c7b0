"""The report runner: parameters validated, notebooks executed and rendered, nothing leaks."""

from __future__ import annotations

import json
import os
import secrets

import nbformat
import pytest

from rag import paths
from rag.errors import ConfigError, NotebookError
from rag.report import profiles, quiet, runner


def _notebook(path, body: str, extra_params: str = "") -> None:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        'profile: str = "default"  # profile\noutput_dir: str = "outputs/x"  # output folder\n'
        "x: int = 1  # a number\n" + extra_params
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Demo"), params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A throwaway notebooks/ + params/ pair, with outputs under tmp_path."""
    nbs, prm = tmp_path / "notebooks", tmp_path / "params"
    nbs.mkdir()
    prm.mkdir()
    monkeypatch.setattr(profiles, "NOTEBOOKS_DIR", str(nbs))
    monkeypatch.setattr(profiles, "PARAMS_DIR", str(prm))
    return tmp_path


RECORDING_CELL = """
import os
from rag import paths
from rag.report.recorder import Recorder
print("key is", os.environ.get("OPENAI_API_KEY"))
print("root is", paths.project_root())
Recorder(output_dir, "01_demo").metrics({"x": x}, headline={"x": x})
"""


def test_runner_executes_renders_and_scrubs_a_planted_key(project, monkeypatch):
    fake_key = "sk-" + secrets.token_urlsafe(32)
    monkeypatch.setenv("OPENAI_API_KEY", fake_key)
    _notebook(project / "notebooks" / "01_demo.ipynb", RECORDING_CELL)
    (project / "params" / "demo.yaml").write_text("01_demo:\n  x: 7\n")

    runs = runner.run_report("demo", output_root=str(project / "outputs"))

    out = project / "outputs" / "demo"
    assert [r.status for r in runs] == ["ok"]
    assert json.loads((out / "01_demo" / "metrics.json").read_text())["x"] == 7
    for name in ("01_demo.ipynb", "01_demo.html", "index.html", "run.json"):
        assert (out / name).exists(), name
    root = str(paths.project_root())
    for f in out.rglob("*"):
        if f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
            assert fake_key not in text, f"key leaked into {f.name}"
            assert root not in text, f"absolute path leaked into {f.name}"
    run = json.loads((out / "run.json").read_text())
    assert run["scrubbed"].get("env_secret", 0) >= 1
    assert run["notebooks"][0]["parameters"]["x"] == 7
    assert "01_demo.html" in (out / "index.html").read_text()


def test_strict_mode_refuses_to_publish_a_secret(project, monkeypatch):
    monkeypatch.setenv("GROQ_API_KEY", "gsk_" + secrets.token_hex(16))
    _notebook(
        project / "notebooks" / "01_demo.ipynb", 'import os; print(os.environ["GROQ_API_KEY"])'
    )
    (project / "params" / "demo.yaml").write_text("{}\n")
    with pytest.raises(Exception, match="would publish"):
        runner.run_report("demo", output_root=str(project / "outputs"), strict=True)


def test_unknown_params_key_names_key_and_notebook(project):
    _notebook(project / "notebooks" / "01_demo.ipynb", "pass")
    (project / "params" / "bad.yaml").write_text("01_demo:\n  typo_key: 3\n")
    with pytest.raises(ConfigError, match=r"typo_key.*01_demo"):
        profiles.resolve_parameters("bad", "outputs/bad")
    (project / "params" / "bad2.yaml").write_text("all:\n  nobody_declares: 1\n")
    with pytest.raises(ConfigError, match="nobody_declares"):
        profiles.resolve_parameters("bad2", "outputs/bad2")
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        profiles.resolve_parameters("nope", "outputs/nope")


def test_failed_notebook_is_rendered_and_named(project):
    _notebook(project / "notebooks" / "01_demo.ipynb", "raise ValueError('boom at step 2')")
    (project / "params" / "demo.yaml").write_text("{}\n")
    with pytest.raises(NotebookError, match=r"01_demo failed in cell \[\d+\].*boom at step 2"):
        runner.run_report("demo", output_root=str(project / "outputs"))
    html = (project / "outputs" / "demo" / "01_demo.html").read_text()
    assert "boom at step 2" in html
    assert (
        json.loads((project / "outputs" / "demo" / "run.json").read_text())["notebooks"][0][
            "status"
        ]
        == "failed"
    )


@pytest.mark.parametrize("fails", [False, True])
def test_kernel_settings_hold_only_while_the_kernel_runs(tmp_path, monkeypatch, fails):
    """The kernel inherits KERNEL_ENV and its log's path; this process keeps its own environment,
    whether the notebook succeeds or fails."""
    names = (*runner.KERNEL_ENV, quiet.LOG_ENV)
    for k in names:
        monkeypatch.delenv(k, raising=False)
    seen = {}

    def fake_execute(src, dst, params, kernel, **kw):
        seen.update({k: os.environ.get(k) for k in names})
        if fails:
            raise RuntimeError("cell failed")

    monkeypatch.setattr(runner, "_execute", fake_execute)
    before = dict(os.environ)
    dst = tmp_path / "out" / "01_x.ipynb"
    rec = runner.execute_and_render(tmp_path / "01_x.ipynb", dst, runner.NotebookRun("01_x"), "k")
    assert seen == {**runner.KERNEL_ENV, quiet.LOG_ENV: str(tmp_path / "out" / "logs" / "01_x.log")}
    assert rec.status == ("failed" if fails else "ok")
    assert dict(os.environ) == before


def test_run_json_records_the_cpu_family_that_rendered_it():
    from rag.report.runner import cpu_family

    amx = cpu_family("model name\t: Some Xeon\nflags\t\t: fpu avx2 avx512f amx_bf16\n")
    assert amx == {"model": "Some Xeon", "bf16": True, "avx512f": True}
    old = cpu_family("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2\n")
    assert old == {"model": "AMD EPYC", "bf16": False, "avx512f": False}
