"""The report as Markdown posts, for blogs built by Hugo, Jekyll, Quarto or any static generator.

One executed notebook becomes one post, ``<out>/md/NN_name.md``, with YAML front matter (title,
date, description, tags) and the same reading as the published HTML page
(:mod:`rag.report.render`): the markdown cells, the ``text/markdown`` outputs, stdout as text
blocks, every pandas table as a Markdown table (:mod:`rag.report.md_tables`: row groups and
grouped columns kept cell for cell), every figure as a file beside the post
(``NN_name/fig-01.png``, SVG kept as SVG); no code, no stderr, none of the cells the HTML leaves
out (``parameters``, ``injected-parameters``, ``remove-cell``; ``remove-output`` drops outputs).
Links between posts are relative (``02_chunk.md``), each post ends with links to its neighbours,
and ``index.md`` lists them all. Every text file is scrubbed like the HTML
(:mod:`rag.report.publish`) as it is written.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from rag import paths
from rag.report import publish, render
from rag.report.index_page import notebook_intro
from rag.report.md_tables import html_markdown

#: Folder of the posts inside a report folder.
MD_DIR = "md"
#: Tags every post carries (its own topic is added from its file name).
TAGS = ("arxiv-rag-lab", "retrieval-augmented-generation", "evaluation")
#: Figure MIME types and the extension their files get (the first one a figure has wins).
FIGURES = (("image/svg+xml", "svg"), ("image/png", "png"), ("image/jpeg", "jpg"))
_NOTEBOOK_LINK = re.compile(r"\]\((\d\d_[\w-]+)\.(?:html|ipynb|code\.html)(#[^)]*)?\)")


def _fenced(text: str) -> str:
    fence = "~~~~" if "```" in text else "```"
    return f"{fence}text\n{text.rstrip()}\n{fence}"


class _Post:
    """One notebook's body as Markdown blocks, figures written beside the post."""

    def __init__(self, stem: str, folder: Path) -> None:
        self.stem, self.folder = stem, folder
        self.blocks: list[str] = []
        self.figures: list[Path] = []

    def figure(self, data: dict[str, Any], alt: str) -> bool:
        for mime, ext in FIGURES:
            if mime not in data:
                continue
            raw = data[mime]
            if isinstance(raw, list):
                raw = "".join(raw)
            name = f"fig-{len(self.figures) + 1:02d}.{ext}"
            path = self.folder / self.stem / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if mime == "image/svg+xml":
                path.write_text(raw, encoding="utf-8")
            else:
                path.write_bytes(base64.b64decode(raw))
            self.figures.append(path)
            self.blocks.append(f"![{alt}]({self.stem}/{name})")
            return True
        return False

    def output(self, out: Any, alt: str) -> None:
        kind = out.get("output_type")
        if kind == "stream":
            if out.get("name") == "stdout" and out.get("text", "").strip():
                self.blocks.append(_fenced(out["text"]))
            return
        if kind == "error":  # a failed notebook: its error, never its traceback
            self.blocks.append(_fenced(f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"))
            return
        data = out.get("data", {})
        if self.figure(data, alt):
            return
        if "text/markdown" in data:
            self.blocks.append(str(data["text/markdown"]).strip())
        elif "text/html" in data:
            tables = html_markdown(str(data["text/html"]))
            self.blocks.append(tables if tables is not None else str(data["text/html"]).strip())
        elif "text/plain" in data:
            self.blocks.append(_fenced(str(data["text/plain"])))


def _hidden(cell: Any) -> bool:
    return bool(set(cell.metadata.get("tags", [])) & set(render.HIDDEN_CELL_TAGS))


def _body(nb: Any, stem: str, folder: Path, title: str) -> tuple[str, list[Path]]:
    post = _Post(stem, folder)
    dropped_title = False
    for cell in nb.cells:
        if _hidden(cell):
            continue
        if cell.cell_type == "markdown":
            text = cell.source.strip()
            if not dropped_title:  # the front matter carries the title
                first, _, rest = text.partition("\n")
                if re.match(r"#\s", first):
                    text, dropped_title = rest.strip(), True
            if text:
                post.blocks.append(_NOTEBOOK_LINK.sub(r"](\1.md\2)", text))
            continue
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        if tags & set(render.HIDDEN_OUTPUT_TAGS):
            continue
        for out in cell.outputs:
            post.output(out, f"{title}, figure {len(post.figures) + 1}")
    return "\n\n".join(_without_empty_sections(post.blocks)), post.figures


_HEADING = re.compile(r"(#{1,6})\s+\S[^\n]*")


def _without_empty_sections(blocks: list[str]) -> list[str]:
    """The blocks without a heading that nothing follows before the next heading of its level or
    above (a section whose cells show nothing in the post, such as a notebook's record cell)."""
    blocks = [b for b in blocks if b]
    kept: list[str] = []
    for i, block in enumerate(blocks):
        head = _HEADING.fullmatch(block)
        if head:
            nxt = (
                _HEADING.fullmatch(blocks[i + 1].partition("\n")[0])
                if i + 1 < len(blocks)
                else None
            )
            if i + 1 == len(blocks) or (nxt and len(nxt.group(1)) <= len(head.group(1))):
                continue
        kept.append(block)
    return kept


def _front_matter(title: str, date: str, description: str, tags: list[str]) -> str:
    meta = {"title": title, "date": date, "description": description, "tags": tags}
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _nav(stem: str, stems: list[str]) -> str:
    i = stems.index(stem)
    parts = ["[↑ all posts](index.md)"]
    if i > 0:
        parts.append(f"[← {stems[i - 1]}]({stems[i - 1]}.md)")
    if i < len(stems) - 1:
        parts.append(f"[{stems[i + 1]} →]({stems[i + 1]}.md)")
    return " · ".join(parts)


def _run_record(out: Path) -> dict[str, Any]:
    try:
        return json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def export_markdown(out: str | Path, dest: str | Path | None = None) -> list[Path]:
    """Write every executed notebook of the report folder ``out`` as a Markdown post.

    Args:
        out: a report folder (``outputs/<profile>``) holding ``NN_name.ipynb`` files.
        dest: where the posts go (default ``<out>/md``); emptied first.

    Returns:
        The posts written, in notebook order, then ``index.md``.

    Raises:
        ConfigError: the folder holds no executed notebook.
    """
    import nbformat

    from rag.errors import ConfigError

    out = paths.resolve(out)
    notebooks = sorted(out.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise ConfigError(f"{paths.display(out)} holds no executed notebook: run rag report first")
    folder = Path(dest) if dest is not None else out / MD_DIR
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    run = _run_record(out)
    executed = {r.get("name"): r.get("executed_utc", "") for r in run.get("notebooks", [])}
    stems = [p.stem for p in notebooks]
    written, listing = [], []
    for ipynb in notebooks:
        stem = ipynb.stem
        title, question = notebook_intro(ipynb)
        nb = nbformat.read(ipynb, as_version=4)
        body, figures = _body(nb, stem, folder, title)
        date = (executed.get(stem) or run.get("started_utc") or "")[:10]
        topic = stem.split("_", 1)[-1].replace("_", "-")
        text = (
            _front_matter(title, date, question, [*TAGS, topic])
            + f"\n{body}\n\n---\n\n{_nav(stem, stems)}\n"
        )
        path = folder / f"{stem}.md"
        path.write_text(text, encoding="utf-8")
        publish.scrub_file(path)
        for fig in figures:
            if fig.suffix == ".svg":
                publish.scrub_file(fig)
        written.append(path)
        listing.append(f"- [{title}]({stem}.md)" + (f" — {question}" if question else ""))
    profile = run.get("profile") or out.name
    index = folder / "index.md"
    index.write_text(
        _front_matter(
            f"arXiv RAG Lab — the {profile} report",
            (run.get("started_utc") or "")[:10],
            "Every notebook of the report as a post, in reading order.",
            list(TAGS),
        )
        + "\n"
        + "\n".join(listing)
        + "\n",
        encoding="utf-8",
    )
    publish.scrub_file(index)
    return [*written, index]
