"""Two renderings of one executed notebook: the published page and the page with its code.

The published ``NN_name.html`` reads as a blog post: code inputs, prompts, the ``parameters`` and
papermill's ``injected-parameters`` cells and every stderr stream (progress bars, warnings) are left
out; ``NN_name.code.html`` keeps every cell for readers who reproduce, one click away. Both use
``templates/post.html.j2`` (nbconvert's ``lab`` template without any script from the network,
figures embedded), carry the notebook's own title and a navigation bar: index · previous · next ·
the other rendering. A sweep cell's pages (``sweep_cell``) sit one folder below the sweep's page:
their bar leads up to it and names no neighbour notebook, since a cell folder holds only its own
(and no ``.ipynb``: a sweep publishes the pages, the executed notebook stays local).
:func:`relink_sweep_cell` gives an already rendered cell page that bar without rendering it again.

Cell tags a notebook may set: ``remove-cell`` (not in the published page), ``remove-input`` (already
true of every code cell there), ``remove-output`` (the cell's outputs are left out of the published
page; for bookkeeping prints).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATE = "post.html.j2"
#: Cells the published page leaves out entirely.
HIDDEN_CELL_TAGS = ("parameters", "injected-parameters", "remove-cell")
HIDDEN_INPUT_TAGS = ("remove-input",)
HIDDEN_OUTPUT_TAGS = ("remove-output",)


def page_title(nb: Any, fallback: str) -> str:
    """The notebook's first markdown heading, without its ``#`` marks (else ``fallback``)."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            m = re.match(r"#+\s+(.+)", line.strip())
            if m:
                return re.sub(r"[*_`]", "", m.group(1)).strip()
    return fallback


def code_name(stem: str) -> str:
    """File name of the rendering with code."""
    return f"{stem}.code.html"


#: The bar's link up to the sweep's page, from a sweep cell's folder.
SWEEP_HOME = "../index.html"
#: The navigation bar as the template writes it (top, and ``post-nav bottom`` at the foot).
_NAV = re.compile(r'<nav class="post-nav( bottom)?">.*?</nav>', re.S)


def nav_html(stem: str, notebooks: list[str], *, code: bool, sweep_cell: bool = False) -> str:
    """The navigation bar: index · previous · next · the other rendering of this notebook; for a
    sweep cell, up to the sweep's page · the other rendering · metrics.json."""

    def page(s: str) -> str:
        return code_name(s) if code else f"{s}.html"

    alternate = (
        f'<a href="{stem}.html" rel="alternate">published version (no code)</a>'
        if code
        else f'<a href="{code_name(stem)}" rel="alternate">code version</a>'
    )
    metrics = f'<a href="{stem}/metrics.json">metrics.json</a>'
    if sweep_cell:
        up = f'<a href="{SWEEP_HOME}" rel="index">↑ sweep</a>'
        return '<nav class="post-nav">' + " · ".join([up, alternate, metrics]) + "</nav>"

    i = notebooks.index(stem) if stem in notebooks else -1
    prev = notebooks[i - 1] if i > 0 else None
    nxt = notebooks[i + 1] if 0 <= i < len(notebooks) - 1 else None
    parts = ['<a href="index.html" rel="index">↑ index</a>']
    parts.append(
        f'<a href="{page(prev)}" rel="prev">← {html.escape(prev)}</a>'
        if prev
        else '<span class="here">← (first)</span>'
    )
    parts.append(
        f'<a href="{page(nxt)}" rel="next">{html.escape(nxt)} →</a>'
        if nxt
        else '<span class="here">(last) →</span>'
    )
    parts.append(alternate)
    parts.append(f'<a href="{stem}.ipynb">notebook (.ipynb)</a>')
    parts.append(metrics)
    return '<nav class="post-nav">' + " · ".join(parts) + "</nav>"


def _exporter(*, code: bool) -> Any:
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import Preprocessor, TagRemovePreprocessor

    class DropStderr(Preprocessor):
        """Leave out stderr streams (progress bars, warnings) and empty markdown cells."""

        def preprocess(self, nb, resources):  # noqa: D102 - nbconvert interface
            nb.cells = [
                c for c in nb.cells if not (c.cell_type == "markdown" and not c.source.strip())
            ]
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs = [
                        o
                        for o in cell.outputs
                        if not (o.output_type == "stream" and o.get("name") == "stderr")
                    ]
            return nb, resources

    exporter = HTMLExporter(
        template_name="lab",
        template_file=TEMPLATE,
        extra_template_paths=[str(TEMPLATE_DIR)],
        exclude_input=not code,
        exclude_input_prompt=not code,
        exclude_output_prompt=not code,
    )
    if not code:
        exporter.register_preprocessor(
            TagRemovePreprocessor(
                remove_cell_tags=set(HIDDEN_CELL_TAGS),
                remove_input_tags=set(HIDDEN_INPUT_TAGS),
                remove_all_outputs_tags=set(HIDDEN_OUTPUT_TAGS),
                enabled=True,
            ),
            enabled=True,
        )
        exporter.register_preprocessor(DropStderr(enabled=True), enabled=True)
    return exporter


def render_notebook(
    ipynb: Path, notebooks: list[str] | None = None, *, sweep_cell: bool = False
) -> tuple[Path, Path]:
    """Render ``ipynb`` beside itself as ``<stem>.html`` (published) and ``<stem>.code.html``.

    Args:
        ipynb: the executed notebook.
        notebooks: every notebook stem of the report in order (for previous/next links).
        sweep_cell: the notebook is a sweep cell's (:func:`nav_html`).

    Returns:
        The published page and the page with code.
    """
    import copy

    import nbformat

    stem = ipynb.stem
    notebooks = notebooks or [stem]
    nb = nbformat.read(ipynb, as_version=4)
    title = page_title(nb, stem)
    nb.metadata["title"] = f"{title} — arXiv RAG Lab"
    written = []
    for code in (False, True):
        nav = nav_html(stem, notebooks, code=code, sweep_cell=sweep_cell)
        resources = {"post_nav": {"html": nav, "code": code}}
        if code:
            nb_code = copy.deepcopy(nb)
            nb_code.metadata["title"] = f"{title} (with code) — arXiv RAG Lab"
            body, _ = _exporter(code=True).from_notebook_node(nb_code, resources=resources)
            path = ipynb.with_name(code_name(stem))
        else:
            body, _ = _exporter(code=False).from_notebook_node(
                copy.deepcopy(nb), resources=resources
            )
            path = ipynb.with_suffix(".html")
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written[0], written[1]


def relink_sweep_cell(page: Path) -> bool:
    """Give a rendered sweep cell page (``<stem>.html`` or ``<stem>.code.html``) the sweep cell's
    navigation bar, top and bottom, exactly as :func:`render_notebook` with ``sweep_cell`` writes
    it; returns whether the page changed. Rendering a cell again means executing it, which a
    published sweep may take hours to do."""
    text = page.read_text(encoding="utf-8")
    code = page.name.endswith(".code.html")
    stem = page.name.removesuffix(".code.html") if code else page.name.removesuffix(".html")
    nav = nav_html(stem, [], code=code, sweep_cell=True)
    bottom = nav.replace('class="post-nav"', 'class="post-nav bottom"')
    new = _NAV.sub(lambda m: bottom if m.group(1) else nav, text)
    if new == text:
        return False
    page.write_text(new, encoding="utf-8")
    return True
