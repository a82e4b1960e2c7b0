"""Every parameters-cell line of every notebook is one papermill can parse.

Papermill reads a notebook's parameters with its own line parser
(``PythonTranslator.inspect``); a line it cannot parse is skipped with only a log message, so
that parameter is silently undeclared: a profile setting it is refused as unknown and
``papermill -p`` cannot set it. The parser skips every line holding more than one ``=``, so a
help comment must hold none.
"""

from __future__ import annotations

import re

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


def test_declared_parameters_are_cached_as_papermill_reads_them(tmp_cache):
    """Settings are read without importing papermill once a notebook's parameters are cached
    (keyed by its bytes): the cached reading is papermill's, in its order."""
    import papermill

    from rag.report import profiles

    for path in NOTEBOOKS:
        first = profiles._declared.__wrapped__(str(path), 0.0)
        assert list((tmp_cache / "parameters").glob("*.json")), "nothing cached"
        again = profiles._declared.__wrapped__(str(path), 0.0)
        want = papermill.inspect_notebook(str(path))
        assert list(first.items()) == list(again.items()) == list(want.items()), path.name
