"""Every parameters-cell line of every notebook is one papermill can parse.

Papermill reads a notebook's parameters with its own line parser
(``PythonTranslator.inspect``); a line it cannot parse is skipped with only a log message, so
that parameter is silently undeclared: a profile setting it is refused as unknown and
``papermill -p`` cannot set it. The parser skips every line holding more than one ``=``, so a
help comment must hold none.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
from papermill.translators import PythonTranslator

from rag import paths

NOTEBOOKS = sorted((paths.project_root() / "notebooks").glob("*.ipynb"))
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*(?::[^=]*)?=")


def _parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters'"
    return cells[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_papermill_parses_every_parameter_line(path):
    cell = _parameters_cell(path)
    assigned = [m.group(1) for line in cell.source.splitlines() if (m := _ASSIGN.match(line))]
    parsed = PythonTranslator.inspect(cell)
    assert [p.name for p in parsed] == assigned, (
        f"{path.name}: papermill cannot parse the parameter lines of "
        f"{sorted(set(assigned) - {p.name for p in parsed})}; keep '=' out of the help "
        "comment"
    )
    assert all(p.help for p in parsed), f"{path.name}: every parameter needs a # help comment"


def test_the_service_reads_declared_parameters_without_papermill():
    """A profile's settings are read without importing papermill (seconds of nbformat and
    jsonschema on every ``rag ask``); the reading equals papermill's, in its order
    (``tests/test_parameters_cell.py``)."""
    code = (
        "import sys\n"
        "from rag.serve.config import profile_settings\n"
        "assert profile_settings('smoke').paper_ids\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('papermill', 'nbformat')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=paths.project_root(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
