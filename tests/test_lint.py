"""ruff's rules hold over the package, the tests, the experiments and the notebooks' code cells."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from rag import paths

TARGETS = ("rag", "tests", "experiments", "notebooks")


def _ruff() -> str:
    exe = Path(sys.executable).parent / "ruff"
    return str(exe) if exe.exists() else (shutil.which("ruff") or "ruff")


def test_ruff_check_is_clean_everywhere_including_notebooks():
    root = paths.project_root()
    done = subprocess.run(
        [_ruff(), "check", "--no-cache", "--output-format", "concise", *TARGETS],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_reads_the_notebooks_code_cells(tmp_path):
    # a notebook with an unused import must be reported, so the check above cannot pass by
    # silently skipping *.ipynb
    nb = tmp_path / "notebooks" / "x.ipynb"
    nb.parent.mkdir()
    nb.write_text(
        '{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],'
        ' "source": ["import os\\n"]}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n'
    )
    done = subprocess.run(
        [_ruff(), "check", "--no-cache", "--output-format", "concise", str(nb)],
        cwd=paths.project_root(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "F401" in done.stdout, done.stdout + done.stderr
