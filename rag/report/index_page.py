"""The report's front page: ``outputs/<profile>/index.html`` read as the post's first page.

Title and abstract, then per notebook (whatever notebooks the run has, in order): its question
(from the notebook's own ``**Question.**`` paragraph), its answer in one sentence with number and CI
(``summary.json``, computed by the notebook from the numbers it records), its key figure inline and
links to both renderings; the headline numbers grouped and rounded for people; what the numbers
cannot see; the two commands that reproduce it, with links to the project's ``docs/``; run
metadata (commit, date, wall time per notebook, package versions) at the bottom. No script, no
network: everything is a local file.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from rag import paths
from rag.report import render

TITLE = "Can the answers be trusted? Question answering over a pinned arXiv corpus, measured"
ABSTRACT = (
    "This report builds a retrieval-augmented question-answering system over a pinned corpus of "
    "arXiv AI/ML papers and measures, with confidence intervals and costs, every step that "
    "decides whether its answers can be trusted: whether the papers arrive intact and parse "
    "(01), whether chunking keeps evidence in one piece (02), what indexing costs (03), which "
    "retriever finds the evidence and which differences between retrievers are real (04), and "
    "whether generated answers stay faithful to their sources according to a judge that is "
    "itself checked against human labels (05)."
)
ABSTRACT_TAIL = (
    "Everything runs offline, with local models, on a 2-core CPU; each section below states a "
    "notebook's question, its answer with the number behind it, and links to the full write-up "
    "and to the version with code."
)
#: A sentence of the abstract for a notebook beyond the five, shown only when the run has it.
ABSTRACT_MORE = {
    "07": "The paper desk (07) measures what a researcher's assistant asks beyond answers: how "
    "many references parsed from the PDFs resolve into a citation graph (titles checked against "
    "the arXiv ids the authors wrote), whether a paper's related work can be predicted with its "
    "own reference list hidden, and how close summaries that never read the abstract come to it.",
}
#: Notebooks the abstract describes; any other notebook of the run is named after it.
ABSTRACT_COVERS = ("01", "02", "03", "04", "05", *ABSTRACT_MORE)
CANNOT_SEE = [
    "The corpus gold questions are not human-verified: they are a development set written from "
    "titles and abstracts, and a chunk counts as relevant when it contains an evidence quote.",
    "No pretrained cross-encoder is available offline, so a rerank row (where a profile runs "
    "one) is a bi-encoder re-scoring fused with hybrid's order, chosen on these same test sets: a "
    "configuration, not a tuned winner.",
    "The offline judge passes many claims that contradict their source (see the confusion matrix "
    "in 05); every faithfulness number inherits its error rate.",
    "Faithfulness alone rewards saying nothing: it is always shown beside the answered rate and "
    "answer F1.",
    "Timings are from one shared 2-core machine and move with its load; counts and scores are "
    "deterministic.",
]
#: What a notebook beyond the five cannot see, listed only when the run has it.
CANNOT_SEE_MORE = {
    "07": "The paper desk's (07) reference splitting is checked only on numbered lists, by a rule "
    "written on the papers it is scored on; author-year lists, most of the corpus, are not "
    "measured; and ROUGE-L against the paper's abstract measures word overlap with one "
    "author-written summary, not a summary's quality.",
}
STYLE = """
body{font:16px/1.55 system-ui,-apple-system,'Segoe UI',sans-serif;max-width:980px;margin:0 auto;
padding:0 1.2em 3em;color:#1d1d1f}
nav.post-nav{font-size:14px;padding:.7em 0;border-bottom:1px solid #ddd}
nav.post-nav a{text-decoration:none;color:#1a5fb4}
h1{font-size:1.9em;line-height:1.2;margin:.8em 0 .3em}
.abstract{font-size:1.05em;color:#333}
section.nb{border-top:1px solid #e3e3e3;padding-top:.6em;margin-top:1.6em}
section.nb h2{font-size:1.3em;margin:.3em 0}
section.nb h2 a{color:inherit;text-decoration:none}
.answer{background:#f4f8fb;border-left:4px solid #1a5fb4;padding:.5em .9em;margin:.6em 0}
figure{margin:.8em 0}
figure img{max-width:100%;height:auto;border:1px solid #eee}
table.head{border-collapse:collapse;font-size:14px;margin:.4em 0}
table.head td,table.head th{padding:.2em .8em .2em 0;text-align:left;vertical-align:top}
table.head th{font-weight:600;color:#555;padding-top:.5em}
.links{font-size:14px;color:#555}
.links a{color:#1a5fb4}
pre{background:#f6f6f6;padding:.6em .8em;overflow-x:auto;font-size:13px}
table.meta{border-collapse:collapse;font-size:13px}
table.meta td,table.meta th{border-bottom:1px solid #eee;padding:.25em .8em .25em 0;text-align:left}
details{margin:.4em 0}
footer{margin-top:2.5em;font-size:14px;color:#444}
"""


def fmt_value(key: str, v: Any) -> str:
    """A headline number for people: ms to 1 decimal, rates to 3 significant digits, counts
    with thousands separators; strings (already formatted by the notebook) as they are."""
    if isinstance(v, bool) or v is None:
        return "–" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if re.search(r"\bms\b|seconds|\bs\b|/s", key):
            return f"{v:,.1f}"
        if 0 <= abs(v) < 1:
            return f"{v:.3g}" if abs(v) >= 0.1 else f"{v:.2g}"
        return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def notebook_intro(ipynb: Path) -> tuple[str, str]:
    """(title, question) from an executed notebook's first markdown cell."""
    if not ipynb.exists():
        return ipynb.stem, ""
    import nbformat

    nb = nbformat.read(ipynb, as_version=4)
    title = render.page_title(nb, ipynb.stem)
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    m = re.search(r"\*\*Question\.\*\*\s*(.+?)(?:\n\s*\n|$)", first, re.S)
    question = " ".join(m.group(1).split()) if m else ""
    return title, question


def _md_inline(text: str) -> str:
    """Escape, then the two inline markups the notebooks use: **bold** and `code`."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def headline_html(head: dict[str, Any]) -> str:
    """Headline numbers as a small table; a nested dict is a group with its own heading."""
    rows, flat = [], []
    for k, v in head.items():
        if isinstance(v, dict):
            rows.append(f"<tr><th colspan=2>{html.escape(k)}</th></tr>")
            rows += [
                f"<tr><td>{html.escape(str(k2))}</td><td><b>{html.escape(fmt_value(k2, v2))}</b>"
                "</td></tr>"
                for k2, v2 in v.items()
            ]
        else:
            flat.append(
                f"<tr><td>{html.escape(k)}</td><td><b>{html.escape(fmt_value(k, v))}</b></td></tr>"
            )
    body = "".join(flat + rows)
    return f"<table class='head'>{body}</table>" if body else ""


def _figure(out: Path, stem: str, summary: dict[str, Any]) -> str:
    figdir = out / stem / "figures"
    name = summary.get("figure")
    path = figdir / f"{name}.png" if name else None
    if path is None or not path.exists():
        pngs = sorted(figdir.glob("*.png")) if figdir.exists() else []
        path = pngs[0] if pngs else None
    if path is None:
        return ""
    rel = path.relative_to(out).as_posix()
    alt = f"key figure of {stem}: {path.stem.replace('_', ' ')}"
    return (
        f"<figure><img src='{html.escape(rel)}' alt='{html.escape(alt)}' loading='eager'></figure>"
    )


def sweeps_html(out: Path) -> str:
    """A section linking every rendered sweep (``outputs/sweeps/*/index.html``), or ``""``."""
    pages = sorted((out.parent / "sweeps").glob("*/index.html"))
    if not pages:
        return ""
    items = "".join(
        f"<li><a href='../sweeps/{html.escape(p.parent.name)}/index.html'>"
        f"{html.escape(p.parent.name)}</a></li>"
        for p in pages
    )
    return (
        "<section class='nb' id='sweeps'><h2>Sweeps</h2><p>Notebooks re-run over parameter "
        f"grids (<code>rag sweep</code>), each cell against a base cell:</p><ul>{items}</ul>"
        "</section>"
    )


#: The project's docs/ pages the front page points to, with what each answers.
DOCS = (
    ("results.md", "every number of the results table, with its CI and the file it comes from"),
    ("performance.md", "what a cold and a warm run cost; the speed decisions behind the defaults"),
    ("decisions.md", "settled A/B decisions, one line each with the JSON that decided it"),
    ("reproducing.md", "the corpus offline, what a second run re-runs, another CPU's numbers"),
    ("models.md", "the offline models, API models with keys, the judge's validated number"),
    ("judge-corpus-set.md", "90 hand-labelled claims from the corpus papers that report the judge"),
    ("your-models.md", "your own model: Ollama, an OpenAI-compatible server, an API key, a GGUF"),
    ("your-papers.md", "the report on your own arXiv papers: what needs gold, your own questions"),
    ("experiments.md", "what was tried to beat the answerer, the judge and the reranker"),
    ("sweeps.md", "papermill parameters, rag sweep, Ray, the chunking x embedder sweep"),
    ("serve.md", "rag ask / search / chat / serve: the same components as a service"),
    ("lab.md", "from rag import Lab: the lab in a notebook; the report as Markdown posts"),
    ("mcp.md", "rag mcp: the lab's paper tools for Claude Desktop, VS Code or any MCP client"),
    ("scale.md", "past one machine: the pipeline on Ray, 1,000x search, a plan for all of arXiv"),
)


def docs_html(out: Path) -> str:
    """A list of links to the project's ``docs/`` pages, relative to ``out``, or ``""``.

    Only when ``out`` lies inside the project (``outputs/<profile>``), so every link resolves in a
    clone and the page names no folder outside the repository.
    """
    root = paths.project_root()
    try:
        rel = Path(os.path.relpath(root / "docs", out.resolve()))
        out.resolve().relative_to(root)
    except ValueError:
        return ""
    items = "".join(
        f"<li><a href='{html.escape((rel / name).as_posix())}'>{html.escape(name)}</a>: "
        f"{html.escape(what)}</li>"
        for name, what in DOCS
        if (root / "docs" / name).exists()
    )
    return f"<p>Further reading in the repository:</p><ul>{items}</ul>" if items else ""


def write_index(out: Path, profile: str, runs: list[Any]) -> Path:
    """Write ``out/index.html`` for ``runs`` (records with name, status, wall_s, parameters, error).

    Reads ``run.json`` (written before) for the run metadata.
    """
    run = _read_json(out / "run.json")
    sections, extra = [], []
    for r in runs:
        title, question = notebook_intro(out / f"{r.name}.ipynb")
        if r.name[:2] not in ABSTRACT_COVERS:
            extra.append(html.escape(title))
        summary = _read_json(out / r.name / "summary.json")
        head = _read_json(out / r.name / "metrics.json").get("headline", {})
        answer = summary.get("answer")
        status = (
            ""
            if r.status == "ok"
            else f"<p><b>Status: {html.escape(r.status)}</b> {html.escape(r.error or '')}</p>"
        )
        sections.append(
            f"<section class='nb' id='{html.escape(r.name)}'>"
            f"<h2><a href='{r.name}.html'>{html.escape(title)}</a></h2>{status}"
            + (f"<p><b>Question.</b> {_md_inline(question)}</p>" if question else "")
            + (f"<p class='answer'><b>Answer.</b> {_md_inline(answer)}</p>" if answer else "")
            + _figure(out, r.name, summary)
            + (
                f"<details open><summary>Headline numbers</summary>{headline_html(head)}</details>"
                if head
                else ""
            )
            + f"<p class='links'><a href='{r.name}.html'>Read {html.escape(r.name)}</a> · "
            f"<a href='{render.code_name(r.name)}'>with code</a> · "
            f"<a href='{r.name}.ipynb'>notebook</a> · "
            f"<a href='{r.name}/metrics.json'>metrics.json</a>"
            f"</p></section>"
        )
    ran = [r.name[:2] for r in runs]
    more = [ABSTRACT_MORE[n] for n in ABSTRACT_MORE if n in ran]
    abstract = " ".join([ABSTRACT, *more, ABSTRACT_TAIL])
    further = " Further: " + "; ".join(extra) if extra else ""
    further += "" if not further or further.endswith(("?", ".")) else "."
    caveats = CANNOT_SEE + [CANNOT_SEE_MORE[n] for n in CANNOT_SEE_MORE if n in ran]
    cannot = "".join(f"<li>{_md_inline(c)}</li>" for c in caveats)
    wall_rows = "".join(
        f"<tr><td><a href='{r.name}.html'>{html.escape(r.name)}</a></td>"
        f"<td>{html.escape(r.status)}</td>"
        f"<td>{r.wall_s:,.1f} s</td><td><details><summary>parameters</summary><pre>"
        f"{html.escape(yaml.safe_dump(r.parameters, sort_keys=True).strip())}</pre>"
        "</details></td></tr>"
        for r in runs
    )
    packages = ", ".join(
        f"{html.escape(k)} {html.escape(v)}" for k, v in sorted(run.get("packages", {}).items())
    )
    commit = str(run.get("git_commit") or "unknown")[:12]
    dirty = " (with uncommitted changes)" if run.get("git_dirty") else ""
    p = html.escape(profile)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(TITLE)} — arXiv RAG Lab ({p})</title>
<style>{STYLE}</style></head><body>
<nav class="post-nav"><a href="index.html">arXiv RAG Lab</a> · profile <code>{p}</code> ·
{" · ".join(f"<a href='{r.name}.html'>{html.escape(r.name)}</a>" for r in runs)}</nav>
<h1>{html.escape(TITLE)}</h1>
<p class="abstract">{html.escape(abstract)}{further}</p>
{"".join(sections)}
{sweeps_html(out)}
<section class="nb" id="cannot-see"><h2>What these numbers cannot see</h2>
<ul>{cannot}</ul></section>
<section class="nb" id="reproduce"><h2>Reproduce</h2>
<p>From the repository root on a machine with Python 3.11 and <code>make</code>:</p>
<pre>make report PROFILE={p}   # run every notebook and render this report
make test                 # the offline test suite, smoke-profile notebooks included</pre>
{docs_html(out)}</section>
<footer><h2>Run</h2>
<p>Profile <code>{p}</code> · commit <code>{html.escape(commit)}</code>{dirty} · started
{html.escape(str(run.get("started_utc", "?")))} UTC ·
Python {html.escape(str(run.get("python", "?")))} ·
{html.escape(str(run.get("platform", "?")))}, {html.escape(str(run.get("cpu_count", "?")))} CPUs ·
<a href="run.json">run.json</a></p>
<table class="meta"><tr><th>notebook</th><th>status</th><th>wall time</th><th></th></tr>
{wall_rows}</table>
<p><small>Packages: {packages}</small></p></footer>
</body></html>
"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
