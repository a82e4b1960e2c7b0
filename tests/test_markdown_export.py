"""The report as Markdown posts (``rag report --format md``), read back by a real Markdown
renderer (markdown-it-py, CommonMark plus tables): front matter, no code and no stderr, tables
as tables, every image and every relative link resolving to a file beside the posts, scrubbed.

A hand-made executed notebook checks each kind of output; the smoke report (the session's one run,
shared with the notebook and browser tests) checks the real posts.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import nbformat
import numpy as np
import pytest
import yaml
from markdown_it import MarkdownIt

from rag.errors import ConfigError
from rag.report.markdown import export_markdown


def read_post(path: Path) -> tuple[dict, str, list[str], list[str]]:
    """(front matter, rendered HTML, image sources, link targets) of a post."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path.name
    head, body = text[4:].split("\n---\n", 1)
    md = MarkdownIt("commonmark").enable("table")
    images, links = [], []
    for token in md.parse(body):
        for child in token.children or []:
            if child.type == "image":
                images.append(child.attrGet("src"))
            elif child.type == "link_open":
                links.append(child.attrGet("href"))
    return yaml.safe_load(head), md.render(body), images, links


def unresolved(post: Path, targets: list[str]) -> list[str]:
    return [
        t for t in targets
        if "://" not in t and not (post.parent / t.split("#", 1)[0]).is_file()
    ]  # fmt: skip


def _png() -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _out(kind: str, **data) -> dict:
    return nbformat.v4.new_output(kind, data=data) if data else nbformat.v4.new_output(kind)


def _report(folder: Path) -> Path:
    import pandas as pd

    table = pd.DataFrame(
        {"ndcg@10": [0.319, 0.307], "note": ["a | b", "plain"]},
        index=pd.Index(["hybrid", "bm25"], name="retriever"),
    )
    params = nbformat.v4.new_code_cell("seed: int = 0  # help", metadata={"tags": ["parameters"]})
    params.outputs = [nbformat.v4.new_output("stream", name="stdout", text="parameters-value\n")]
    shown = nbformat.v4.new_code_cell("print('hello')\nfigure()")
    shown.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="hello from /work/secret/run.txt\n"),
        nbformat.v4.new_output("stream", name="stderr", text="noisy bar 40%|####  | 4/10\n"),
        _out("display_data", **{"image/png": _png(), "text/plain": "<Figure>"}),
        _out(
            "display_data",
            **{
                "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'/>",
                "text/plain": "<Figure>",
            },
        ),  # fmt: skip
        _out("execute_result", **{"text/html": table.to_html(), "text/plain": str(table)}),
        _out(
            "execute_result",
            **{
                "text/markdown": "**Reading.** hybrid 0.319 (0.269–0.374).",
                "text/plain": "<Markdown>",
            },
        ),  # fmt: skip
    ]
    hidden = nbformat.v4.new_code_cell("print('x')", metadata={"tags": ["remove-output"]})
    hidden.outputs = [nbformat.v4.new_output("stream", name="stdout", text="bookkeeping\n")]
    first = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(
                "# 01 · A test post\n\n**Question.** Does it export?\n\nNext: "
                "[the second post](02_second.html), [its code](02_second.ipynb#top)."
            ),
            params,
            shown,
            hidden,
        ]
    )
    second = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 02 · Second\n\nx")])
    folder.mkdir()
    nbformat.write(first, folder / "01_test_post.ipynb")
    nbformat.write(second, folder / "02_second.ipynb")
    record = {"name": "01_test_post", "executed_utc": "2026-01-02T10:00:00Z"}
    run = {"profile": "mine", "started_utc": "2026-01-01T09:00:00Z", "notebooks": [record]}
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def test_a_post_reads_as_the_published_page(tmp_path):
    out = _report(tmp_path / "mine")
    posts = export_markdown(out)
    assert [p.name for p in posts] == ["01_test_post.md", "02_second.md", "index.md"]
    assert all(p.parent == out / "md" for p in posts)
    meta, html, images, links = read_post(posts[0])
    assert meta == {
        "title": "01 · A test post", "date": "2026-01-02", "description": "Does it export?",
        "tags": ["arxiv-rag-lab", "retrieval-augmented-generation", "evaluation", "test-post"],
    }  # fmt: skip
    text = posts[0].read_text()
    assert "# 01 · A test post" not in text  # the title is the front matter's
    for absent in ("print(", "figure()", "noisy bar", "bookkeeping", "parameters-value",
                   "/work/secret", "<style", "<div"):  # fmt: skip
        assert absent not in text, absent
    assert "hello from" in text and "<strong>Reading.</strong>" in html
    assert "| retriever | ndcg@10 | note |" in text and "a \\| b" in text
    assert "<table>" in html and "<td>hybrid</td>" in html and "<td>a | b</td>" in html
    assert images == ["01_test_post/fig-01.png", "01_test_post/fig-02.svg"]
    assert (out / "md/01_test_post/fig-01.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "md/01_test_post/fig-02.svg").read_text().startswith("<svg")
    assert "02_second.md" in links and "02_second.md#top" in links and "index.md" in links
    for post in posts:
        _, _, imgs, hrefs = read_post(post)
        assert not unresolved(post, imgs + hrefs), post.name
    index = read_post(posts[-1])
    assert index[0]["title"] == "arXiv RAG Lab — the mine report"
    assert index[3] == ["01_test_post.md", "02_second.md"]


def test_an_empty_folder_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="holds no executed notebook"):
        export_markdown(tmp_path)


@pytest.mark.notebooks
def test_the_smoke_report_exports_posts_that_resolve(smoke_run, tmp_path):
    out, runs = smoke_run
    posts = export_markdown(out, tmp_path / "md")
    assert [p.stem for p in posts] == [r.name for r in runs] + ["index"]
    tables = 0
    for post in posts:
        meta, html, images, links = read_post(post)
        assert meta["title"] and meta["date"] and meta["tags"], post.name
        assert not unresolved(post, images + links), post.name
        assert "Traceback" not in html and "```python" not in post.read_text()
        if post.stem != "index":
            assert meta["description"], post.name
            assert images, f"{post.name} has no figure"
            assert all((post.parent / i).stat().st_size > 100 for i in images)
            tables += html.count("<table>")
    assert tables >= len(runs)
    assert list((tmp_path / "md" / "07_papers").glob("*.svg")), "07's network is SVG"


def test_rag_report_format_md_exports_the_report_it_ran(monkeypatch, capsys):
    """``rag report --format md`` runs the report, then writes its posts; html alone does not."""
    from rag import cli
    from rag.report import markdown, runner

    calls = []
    monkeypatch.setattr(
        runner, "run_report",
        lambda profile, **kw: calls.append(("run", profile, kw["record_unchanged"])),
    )  # fmt: skip
    monkeypatch.setattr(markdown, "export_markdown", lambda out: calls.append(("md", out)))
    assert cli.main(["report", "--profile", "smoke", "--format", "md"]) == 0
    # the export does not rewrite run.json and index.html after an up-to-date report
    assert calls == [("run", "smoke", False), ("md", "outputs/smoke")]
    assert "markdown: outputs/smoke/md/index.md" in capsys.readouterr().out
    calls.clear()
    assert cli.main(["report", "--profile", "smoke"]) == 0 and calls == [("run", "smoke", True)]


def _pipe_rows(table: str) -> list[list[str]]:
    """The cells of a pipe table's rows (header, rule, body), unescaped."""
    import re

    return [
        [c.strip().replace("\\|", "|").replace("\\\\", "\\") for c in re.split(r"(?<!\\)\|", r)][
            1:-1
        ]
        for r in table.splitlines()
    ]


def _read_html(fragment: str) -> list:
    """Every table of an HTML fragment as pandas reads it (spans placed, every cell a string)."""
    import pandas as pd

    def read(**kw):
        return pd.read_html(io.StringIO(fragment), flavor="lxml", keep_default_na=False, **kw)

    widths = [df.shape[1] for df in read()]
    return [read(converters=dict.fromkeys(range(w), str))[i] for i, w in enumerate(widths)]


def test_every_committed_table_keeps_each_cell_in_its_column():
    """Every table of every committed post, as Markdown: each row has as many cells as the header,
    and the body is the table pandas reads from the same HTML (row groups and grouped columns
    repeated over what they span), cell for cell; pandas' unnamed row numbers are left out and a
    missing value is blank."""
    from rag import paths
    from rag.report.md_tables import TableParser, table_markdown

    tables = spanned = 0
    for ipynb in sorted(paths.resolve("outputs/default").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(ipynb, as_version=4)
        for out in (o for c in nb.cells if c.cell_type == "code" for o in c.outputs):
            fragment = str(out.get("data", {}).get("text/html", ""))
            parser = TableParser()
            parser.feed(fragment)
            if not parser.tables or parser.outside:
                continue
            for rows, frame in zip(parser.tables, _read_html(fragment), strict=True):
                tables += 1
                spanned += "rowspan" in fragment or "colspan" in fragment
                header, rule, *body = _pipe_rows(table_markdown(rows))
                where = f"{ipynb.name} table {tables}: {header}"
                assert len(rule) == len(header) and all(len(r) == len(header) for r in body), where
                expected = [["" if v == "NaN" else v for v in r] for r in frame.values.tolist()]
                numbers = all(str(n).startswith("Unnamed") for n in np.atleast_1d(frame.columns[0]))
                if numbers and all(r[0].isdigit() for r in expected):
                    expected = [r[1:] for r in expected]
                assert body == expected, where
    assert tables >= 40 and spanned >= 3  # 03's index scale, 04's breakdown, 07's measures


def test_a_post_keeps_row_groups_and_drops_an_empty_section(tmp_path):
    import pandas as pd

    grouped = pd.DataFrame(
        {"value": [0.5, None, 0.7], "n": [3, 4, 5]},
        index=pd.MultiIndex.from_tuples(
            [("kind", "single"), ("kind", "multi"), ("method", "named")], names=["by", "group"]
        ),
    )
    numbered = pd.DataFrame({"answerer": ["extractive", "local"], "status": ["ok", "no key"]})
    cells = [
        nbformat.v4.new_markdown_cell("# 01 · Groups\n\n**Question.** Do groups survive?"),
        nbformat.v4.new_markdown_cell("## 1. Tables"),
        nbformat.v4.new_code_cell("grouped; numbered"),
        nbformat.v4.new_markdown_cell("## 2. Record"),
        nbformat.v4.new_code_cell("rec.metrics({})"),  # shows nothing
        nbformat.v4.new_markdown_cell("## References\n- a paper"),
    ]
    cells[2].outputs = [
        _out("display_data", **{"text/html": t.to_html(), "text/plain": str(t)})
        for t in (grouped, numbered)
    ]
    folder = tmp_path / "mine"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=cells), folder / "01_groups.ipynb")
    (post, _) = export_markdown(folder)
    text = post.read_text(encoding="utf-8")
    assert "## 1. Tables" in text and "## References" in text and "## 2. Record" not in text
    assert "| by | group | value | n |" in text
    assert "| kind | single | 0.5 | 3 |" in text and "| kind | multi |   | 4 |" in text
    assert "| method | named | 0.7 | 5 |" in text and "NaN" not in text
    assert "| answerer | status |" in text and "| extractive | ok |" in text  # no 0/1 column
