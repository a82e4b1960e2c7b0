"""Every link of a sweep's pages resolves: the summary page, each cell's published and code page.

A cell folder holds one notebook's pages, one folder below the sweep's ``index.html``, so a cell
page's bar leads up to that page and names no neighbour notebook (the report's ``03_index.html`` or
``05_faithfulness.html`` are not there). Checked on a tiny sweep run here and on the committed
sweeps under ``outputs/sweeps/``; a page rendered with the report's bar and then relinked is the
page rendered as a sweep cell, byte for byte.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from rag import paths
from rag.report import render, sweep
from tests.test_sweep import _sweep_file, project  # noqa: F401 - the fixture is used by name

SWEEPS = paths.project_root() / "outputs" / "sweeps"
COMMITTED = sorted(p.parent for p in SWEEPS.glob("*/index.html"))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.targets += [v for k, v in attrs if k in ("href", "src") and v]


def links(page: Path) -> list[str]:
    """The relative links of ``page`` (external URLs, ``data:`` and in-page anchors left out)."""
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    out = []
    for t in parser.targets:
        u = urlsplit(t)
        if u.scheme or u.netloc or not u.path:
            continue
        out.append(unquote(u.path))
    return out


def broken_links(sweep_dir: Path) -> list[str]:
    """``page -> target`` for every link of a sweep's pages whose target does not exist."""
    pages = [sweep_dir / "index.html", *sorted(sweep_dir.glob("*/[0-9][0-9]_*.html"))]
    return [
        f"{page.relative_to(sweep_dir)} -> {t}"
        for page in pages
        for t in links(page)
        if not (page.parent / t).exists()
    ]


def test_the_link_check_sees_a_missing_target(tmp_path):
    cell = tmp_path / "x=1"
    cell.mkdir()
    (tmp_path / "index.html").write_text("<a href='x=1/01_demo.html'>cell</a> <a href='#top'>t</a>")
    (cell / "01_demo.html").write_text(
        '<a href="../index.html">up</a> <a href="03_index.html">next</a> '
        '<img src="data:image/png;base64,AA"> <a href="https://arxiv.org/abs/1">paper</a>'
    )
    assert broken_links(tmp_path) == ["x=1/01_demo.html -> 03_index.html"]


@pytest.mark.parametrize("sweep_dir", COMMITTED, ids=lambda p: p.name)
def test_the_committed_sweeps_pages_have_no_dead_link(sweep_dir):
    cells = sorted(sweep_dir.glob("*/[0-9][0-9]_*.html"))
    assert cells, f"{sweep_dir.name}: no cell pages"
    assert broken_links(sweep_dir) == []
    for page in cells:
        assert f'href="{render.SWEEP_HOME}"' in page.read_text(encoding="utf-8"), page


def test_a_relinked_page_is_the_page_rendered_as_a_sweep_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 04 · Demo\n\nA reading.")]
    pages = {}
    for how in ("report", "cell"):
        folder = tmp_path / how
        folder.mkdir()
        nbformat.write(nb, folder / "04_retrieval.ipynb")
        order = ["03_index", "04_retrieval", "05_faithfulness"]
        pages[how] = render.render_notebook(
            folder / "04_retrieval.ipynb", order, sweep_cell=how == "cell"
        )
    report_page, report_code = pages["report"]
    assert 'href="03_index.html"' in report_page.read_text()
    assert [render.relink_sweep_cell(p) for p in pages["report"]] == [True, True]
    assert [render.relink_sweep_cell(p) for p in pages["report"]] == [False, False]  # idempotent
    for relinked, rendered in zip(pages["report"], pages["cell"], strict=True):
        assert relinked.read_bytes() == rendered.read_bytes()
    text = report_code.read_text()
    assert "03_index" not in text and "05_faithfulness" not in text and ".ipynb" not in text
    assert text.count(f'href="{render.SWEEP_HOME}"') == 2  # the bar at the top and at the foot


@pytest.mark.notebooks
def test_a_sweep_run_here_leaves_no_dead_link(project):  # noqa: F811 - the fixture
    path = _sweep_file(project, "links", "    x: [1, 2]")
    sweep.run_sweep(path, workers=1, output_root=str(project / "out"))
    out = project / "out" / "links"
    for ipynb in out.glob("*/*.ipynb"):  # as published: the executed notebooks stay local
        ipynb.unlink()
    report = project / "demo" / "index.html"  # the profile's report, which the page links
    assert "../../demo/index.html" in (out / "index.html").read_text()
    report.parent.mkdir()
    report.write_text("<html></html>")
    assert broken_links(out) == []
    page = (out / "x=2" / "01_demo.html").read_text()
    assert f'href="{render.SWEEP_HOME}"' in page and 'rel="prev"' not in page
