"""``notebooks/explore.ipynb`` as JupyterLab runs it: a kernel started in ``notebooks/``, outside
the report runner (so nothing routes stderr to a log), on the smoke profile.

Every project path resolves from the project root wherever the kernel stands, so each cell runs
(``citations`` reads the manifest and the citation graph); the cells show records and nothing
written to stderr (no tqdm warning, no progress bar, no blank strip); and a bad argument shows as
its message alone, not behind the lab's frames.
"""

from __future__ import annotations

import pytest

from rag import paths

BAD_CELL = 'lab.search("subword n-grams", k=0)'


def test_project_paths_resolve_from_the_root_wherever_the_caller_stands(monkeypatch):
    """The loaders take a relative path as the project's (:func:`rag.paths.resolve`), so a kernel
    started in ``notebooks/`` reads what the CLI reads from the root."""
    from rag.corpus.manifest import Paper, load_manifest
    from rag.jsonl import read_records
    from rag.papers.graph import read_citations

    monkeypatch.chdir(paths.project_root() / "notebooks")
    assert len(load_manifest("data/manifest.jsonl")) == 100
    assert len(read_records("data/manifest.jsonl", Paper, id_field="arxiv_id")) == 100
    assert read_citations("data/citations.jsonl")


@pytest.fixture(scope="module")
def explored(tmp_path_factory, shared_dir):
    """The explore notebook plus one cell with a bad argument, executed by papermill with the
    kernel's working folder ``notebooks/``: the executed notebook."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from rag.report import quiet, runner

    tmp = tmp_path_factory.mktemp("explore-lab")
    nb = nbformat.read(paths.resolve("notebooks/explore.ipynb"), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(BAD_CELL))
    src, dst = tmp / "explore.ipynb", tmp / "explored.ipynb"
    nbformat.write(nb, src)
    mp = pytest.MonkeyPatch()
    mp.delenv(quiet.LOG_ENV, raising=False)  # JupyterLab sets no report log
    try:
        with pytest.raises(PapermillExecutionError) as failed:
            papermill.execute_notebook(
                str(src), str(dst), parameters={"profile": "smoke"},
                kernel_name=runner.ensure_kernel(), cwd=str(paths.project_root() / "notebooks"),
                progress_bar=False,
            )  # fmt: skip
    finally:
        mp.undo()
    assert failed.value.ename == "ToolInputError" and failed.value.exec_count == len(nb.cells) - 1
    return nbformat.read(dst, as_version=4)


def _code(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.notebooks
def test_every_cell_runs_from_the_notebooks_folder(explored):
    cells = _code(explored)
    assert cells[-1].source == BAD_CELL
    for cell in cells[:-1]:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
    shown = {
        c.source.split("(")[0]: next(o for o in c.outputs if o.output_type == "execute_result")
        for c in cells[2:-1]  # after the parameters (and papermill's) and the import cell
    }
    for source in ("lab.citations", "lab.related", "lab.summarize"):
        assert "rag-lab" in shown[source]["data"]["text/html"], source


@pytest.mark.notebooks
def test_cells_show_records_and_nothing_written_to_stderr(explored):
    root = str(paths.project_root())
    for cell in _code(explored)[:-1]:
        streams = [o for o in cell.outputs if o.output_type == "stream"]
        assert not [o for o in streams if o.name == "stderr"], (cell.source, streams)
        text = "".join(str(o.get("text", "")) + str(o.get("data", "")) for o in cell.outputs)
        for absent in ("TqdmWarning", "IProgress", "Loading weights", root):
            assert absent not in text, (absent, cell.source)


@pytest.mark.notebooks
def test_a_bad_argument_shows_its_message_alone(explored):
    (error,) = [o for o in _code(explored)[-1].outputs if o.output_type == "error"]
    assert error.ename == "ToolInputError"
    assert error.evalue.startswith("k=0: ")
    assert error.traceback == [f"ToolInputError: {error.evalue}"]
