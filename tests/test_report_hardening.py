"""The report runner under faults: nothing unscrubbed is ever published.

Each docstring says which fault the test reproduces and what a wrong implementation would do.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import textwrap

import nbformat
import pytest

from rag import paths
from rag.errors import ConfigError, NotebookError
from rag.report import publish, runner
from tests.polling import wait_until
from tests.test_runner import _notebook, project  # noqa: F401 - the fixture is used by name


def _published_text(out) -> dict[str, str]:
    return {
        f.name: f.read_text(encoding="utf-8", errors="replace")
        for f in out.rglob("*")
        if f.is_file()
    }


def test_ansi_colour_codes_do_not_hide_a_path():
    """A colour code right before a path does not hide it (the ``m`` of ``\\x1b[0;32m`` is not a
    word the path is part of)."""
    root = str(paths.project_root())
    text = f"\x1b[0;32m{root}/rag/x.py\x1b[0m in \x1b[0;36m/home/alice/y.py\x1b[0m"
    clean, report = publish.scrub(text, env={})
    assert root not in clean and "/home/alice" not in clean
    # each path is replaced whole, the text around it kept (colour codes or not)
    assert re.sub(r"\x1b\[[0-9;]*m", "", clean) == "rag/x.py in <path>"
    assert report.counts["other_abs_path"] == 1


def test_a_failing_notebook_publishes_no_key_and_no_path(project, monkeypatch):  # noqa: F811
    """A failed notebook's traceback (ANSI-coloured frames under the venv and the project) is
    published without the key, the paths or the colour codes, in the ``.ipynb`` as in the HTML."""
    fake_key = "sk-" + secrets.token_urlsafe(32)
    monkeypatch.setenv("OPENAI_API_KEY", fake_key)
    body = textwrap.dedent(
        """
        import os, yaml
        from rag import paths
        print("key", os.environ["OPENAI_API_KEY"], "root", paths.project_root())
        yaml.safe_load("a: [" + str(paths.project_root()))
        """
    )
    _notebook(project / "notebooks" / "01_demo.ipynb", body)
    (project / "params" / "demo.yaml").write_text("{}\n")
    with pytest.raises(NotebookError):
        runner.run_report("demo", output_root=str(project / "outputs"))
    out = project / "outputs" / "demo"
    nb = nbformat.read(out / "01_demo.ipynb", as_version=4)  # still a valid notebook
    tb = "".join(
        "".join(o.get("traceback", []))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "yaml" in tb and "\x1b[" not in tb  # the traceback is kept, without colour codes
    for name, text in _published_text(out).items():
        # no colour codes in any written file, raw or JSON-escaped (the traceback is plain text)
        assert "\x1b[" not in text and "\\u001b[" not in text, name
        assert fake_key not in text, name
        assert str(paths.project_root()) not in text, name
        assert sys.prefix not in text, name


def test_an_absolute_path_parameter_keeps_the_notebook_valid(project):  # noqa: F811
    """Scrubbing the raw JSON would swallow the backslash escaping the quote after
    ``gold_path = "/home/.../test.jsonl"`` (NotJSONError); notebooks are scrubbed string by
    string."""
    _notebook(
        project / "notebooks" / "01_demo.ipynb",
        "print(gold_path)",
        extra_params='gold_path: str = "gold.jsonl"  # any file of this format\n',
    )
    (project / "params" / "abs.yaml").write_text(
        '01_demo:\n  gold_path: "/home/someone/data/test.jsonl"\n'
    )
    runs = runner.run_report("abs", output_root=str(project / "outputs"))
    assert [r.status for r in runs] == ["ok"]
    out = project / "outputs" / "abs"
    nb = nbformat.read(out / "01_demo.ipynb", as_version=4)
    source = "".join(c.source for c in nb.cells)
    assert 'gold_path = "<path>"' in source
    assert "/home/someone" not in (out / "01_demo.ipynb").read_text()
    json.loads((out / "run.json").read_text())


LEAKING_CELL = """
import os
from rag import paths
print("key", os.environ["OPENAI_API_KEY"], "root", paths.project_root())
"""
SLOW_CELL = """
import os, pathlib, time
pathlib.Path(os.environ["READY_FILE"]).write_text("1")
time.sleep(60)
"""

DRIVER = """
import sys
from rag.report import profiles, runner
profiles.NOTEBOOKS_DIR, profiles.PARAMS_DIR = sys.argv[1], sys.argv[2]
runner.run_report("demo", output_root=sys.argv[3])
"""


def test_a_killed_report_leaves_nothing_unscrubbed_in_the_outputs(project):  # noqa: F811
    """Papermill saves the output notebook after every cell, so a report killed mid-notebook
    would leave a partial ``.ipynb`` with the key and the project path under ``outputs/``;
    notebooks run in a staging folder and only scrubbed copies are published."""
    fake_key = "sk-" + secrets.token_urlsafe(32)
    path = project / "notebooks" / "01_demo.ipynb"
    _notebook(path, LEAKING_CELL)
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(SLOW_CELL))  # killed here, the leak saved before
    nbformat.write(nb, path)
    (project / "params" / "demo.yaml").write_text("{}\n")
    ready = project / "ready"
    staging = project / "tmp"  # the runner's staging folder lands here, not in /tmp
    staging.mkdir()
    env = dict(os.environ, OPENAI_API_KEY=fake_key, READY_FILE=str(ready), TMPDIR=str(staging))
    outputs = project / "outputs"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER]
        + [str(project / "notebooks"), str(project / "params"), str(outputs)],
        env=env,
        cwd=paths.project_root(),
        start_new_session=True,  # the kernel is a child: kill the whole group, as kill -9 would
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def staged_text() -> str:
        return "".join(p.read_text(errors="replace") for p in staging.glob("rag-report-*/*.ipynb"))

    try:
        wait_until(ready.exists, what="the notebook's slow cell to start")
        # papermill has saved the staged notebook with the leaking cell's output
        wait_until(
            lambda: fake_key in staged_text(),
            what="the staged notebook to hold the key",
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    for name, text in _published_text(outputs).items():
        assert fake_key not in text, f"key in {name}"
        assert str(paths.project_root()) not in text, f"project path in {name}"
    # the partial notebook (with the leak) stayed in the staging folder
    assert [p.name for p in staging.glob("rag-report-*/*.ipynb")] == ["01_demo.ipynb"]


def test_only_an_unknown_notebook_is_an_error(project, capsys):  # noqa: F811
    """``rag report --only 99`` is an error naming the notebooks, not an empty report."""
    _notebook(project / "notebooks" / "01_demo.ipynb", "pass")
    (project / "params" / "demo.yaml").write_text("{}\n")
    with pytest.raises(ConfigError, match=r"--only 99: no such notebook.*01_demo"):
        runner.run_report("demo", only=["99"], output_root=str(project / "outputs"))
    assert not (project / "outputs" / "demo").exists()
    from rag.cli import main

    assert main(["report", "--profile", "demo", "--only", "99"]) == 2
    assert "99" in capsys.readouterr().err
