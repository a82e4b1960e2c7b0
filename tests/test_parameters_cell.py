"""The parameters cell read without papermill gives papermill's own records, on every notebook
and on the cell shapes papermill's reader handles (papermill is the oracle)."""

from __future__ import annotations

import nbformat
import papermill
import pytest
from papermill.translators import PythonTranslator

from rag import paths
from rag.errors import NotebookError
from rag.report.parameters_cell import parse_parameters, read_parameters

NOTEBOOKS = sorted(paths.resolve("notebooks").glob("*.ipynb"))


def papermill_records(src: str) -> dict[str, dict[str, str]]:
    cell = nbformat.v4.new_code_cell(src)
    return {p.name: p._asdict() for p in PythonTranslator.inspect(cell)}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_reads_as_papermill_reads_it(notebook):
    ours = read_parameters(notebook)
    theirs = papermill.inspect_notebook(str(notebook))
    assert list(ours) == list(theirs)  # the same names in the same order
    assert ours == theirs


def test_the_numbered_notebooks_declare_parameters():
    assert all(read_parameters(nb) for nb in NOTEBOOKS if nb.stem[:2].isdigit())


@pytest.mark.parametrize(
    "src",
    [
        'k: int = 5  # chunks per question\nname: str = "minilm"  # the embedder',
        "ratio: float = 0.5\nflag: bool = True  #   spaced help  ",
        "untyped = [1, 2]  # no annotation",
        "x = 3  # type: int the help after a type comment",
        'quoted: "int" = 4  # a string annotation',
        "grid: dict[str, int] = {'a': 1}  # a generic annotation",
        'title: str = "α–β"  # non-ASCII before the comment: ≤ 2 bytes apart',
        "ids2: list = [\n    'é',  # first\n    'b',\n]",
        "ids: list = [\n    'a',  # first\n    'b',\n]  # help on the last line",
        "# a comment line\n\nfirst: int = 1\n# between\nsecond: str = 'two'",
    ],
)
def test_cell_shapes_read_as_papermill_reads_them(src):
    assert parse_parameters(src) == papermill_records(src)


def test_a_cell_that_is_not_python_names_the_problem():
    with pytest.raises(NotebookError, match="not valid Python"):
        parse_parameters("k: int = (5  # unclosed")


def test_a_notebook_without_a_parameters_cell_declares_nothing(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("k = 1")])
    path = tmp_path / "plain.ipynb"
    nbformat.write(nb, path)
    assert read_parameters(path) == {} == papermill.inspect_notebook(str(path))
