"""Two renderings of one executed notebook: the published page and the page with its code.

The published ``NN_name.html`` reads as a blog post: code inputs, prompts, the ``parameters`` and
papermill's ``injected-parameters`` cells and every stderr stream (progress bars, warnings) are left
out; ``NN_name.code.html`` keeps every cell for readers who reproduce, one click away. Both use
``templates/post.html.j2`` (nbconvert's ``lab`` template without any script from the network,
figures embedded), carry the notebook's own title and a navigation bar: index · previous · next ·
the other rendering.

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


def nav_html(stem: str, notebooks: list[str], *, code: bool) -> str:
    """The navigation bar: index · previous · next · the other rendering of this notebook."""

    def page(s: str) -> str:
        return code_name(s) if code else f"{s}.html"

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
    parts.append(
        f'<a href="{stem}.html" rel="alternate">published version (no code)</a>'
        if code
        else f'<a href="{code_name(stem)}" rel="alternate">code version</a>'
    )
    parts.append(f'<a href="{stem}.ipynb">notebook (.ipynb)</a>')
    parts.append(f'<a href="{stem}/metrics.json">metrics.json</a>')
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


def render_notebook(ipynb: Path, notebooks: list[str] | None = None) -> tuple[Path, Path]:
    """Render ``ipynb`` beside itself as ``<stem>.html`` (published) and ``<stem>.code.html``.

    Args:
        ipynb: the executed notebook.
        notebooks: every notebook stem of the report in order (for previous/next links).

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
        resources = {"post_nav": {"html": nav_html(stem, notebooks, code=code), "code": code}}
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
