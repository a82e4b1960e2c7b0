"""The paper desk's records: the served papers, one paper, a page, its citations, related work
and a judged summary (``Lab.papers``, ``paper``, ``read``, ``citations``, ``related``,
``summarize``), each as HTML, text, a DataFrame and the desk's JSON (:mod:`rag.lab.records`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from rag.lab import html as h
from rag.lab.records import Record, Row, cut


class PaperList(
    Record,
    kind="papers",
    columns="arxiv_id title category source n_chunks added_at",
    rows_from="papers",
):
    """The served papers (``Lab.papers``; ``GET /papers``)."""

    n_papers: int
    n_chunks: int
    papers: list[dict[str, Any]]

    def text(self) -> str:
        lines = [f"{self.n_papers} papers, {self.n_chunks} chunks"]
        lines += [f"  {p['arxiv_id']:<12} {p['category']:<8} {p['title']}" for p in self.papers]
        return "\n".join(lines)

    def html(self) -> str:
        rows = [(h.Raw(h.paper_link(p["arxiv_id"])), p["title"], p["category"], p["n_chunks"])
                for p in self.papers]  # fmt: skip
        return h.box(
            self.kind,
            h.head(f"{self.n_papers} papers, {self.n_chunks} chunks served"),
            h.table(("paper", "title", "category", "chunks"), rows, numeric=("chunks",)),
        )


class Paper(Record, kind="paper", columns="section page", rows_from="sections"):
    """A paper's metadata and sections (``Lab.paper``; ``GET /papers/{arxiv_id}``)."""

    arxiv_id: str
    title: str
    category: str
    version: str
    url: str
    source: str
    pages: int
    n_chunks: int
    sections: list[dict[str, Any]]

    def text(self) -> str:
        where = f"arXiv:{self.arxiv_id}{self.version}, {self.category}"
        if self.extra.get("file"):  # a folder's paper: its id and file
            where = f"{self.arxiv_id}, {self.extra['file']}"
        lines = [f"{self.title} ({where}), {self.pages} pages, {self.n_chunks} chunks"]
        lines += [f"  p. {s['page']:>3}  {s['section']}" for s in self.sections]
        return "\n".join(lines)

    def html(self) -> str:
        rows = [(s["section"], s["page"]) for s in self.sections]
        return h.box(
            self.kind,
            h.head(f"<b>{h.esc(self.title)}</b> — {h.paper_link(self.arxiv_id)}"
                   f"{h.esc(self.version)} · {h.esc(self.category)} · {self.pages} pages · "
                   f"{self.n_chunks} chunks"),
            h.table(("section", "page"), rows, numeric=("page",)),
        )  # fmt: skip


class Page(
    Record, kind="page", columns="chunk_id section page_start page_end text", rows_from="chunks"
):
    """The indexed text of a page, or one chunk (``Lab.read``)."""

    arxiv_id: str
    title: str
    page: int | None
    chunks: list[dict[str, Any]]

    def _where(self) -> str:
        return f"p. {self.page}" if self.page is not None else f"chunk {self.chunks[0]['chunk_id']}"

    def text(self) -> str:
        lines = [f"{self.title} (arXiv:{self.arxiv_id}), {self._where()}"]
        for c in self.chunks:
            lines += [f"[{c['section'] or '—'}, pp. {c['page_start']}-{c['page_end']}]",
                      cut(c["text"], 2000)]  # fmt: skip
        return "\n".join(lines)

    def html(self) -> str:
        parts = [
            f"<p><span class='rag-muted'>{h.esc(c['section'] or '—')}, pp. {c['page_start']}–"
            f"{c['page_end']}</span><br>{h.esc(' '.join(c['text'].split()))}</p>"
            for c in self.chunks
        ]
        heading = h.head(f"<b>{h.esc(self.title)}</b> — {h.paper_link(self.arxiv_id)}, "
                         f"{h.esc(self._where())}")  # fmt: skip
        return h.box(self.kind, heading, *parts)


class Citations(
    Record, kind="citations", columns="direction arxiv_id in_corpus how score title reference"
):
    """What a paper cites and which corpus papers cite it (``Lab.citations``)."""

    arxiv_id: str
    cites: list[Row]  # rag.serve.desk_models.Link
    cited_by: list[Row]
    n_cites: int
    n_cited_by: int

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"direction": side, **link}
            for side, links in (("cites", self.cites), ("cited_by", self.cited_by))
            for link in links
        ]

    def text(self) -> str:
        lines = []
        for name, links in ((f"{self.arxiv_id} cites", self.cites),
                            (f"{self.arxiv_id} is cited by", self.cited_by)):  # fmt: skip
            lines.append(f"{name} ({len(links)}):")
            lines += [f"  {x['arxiv_id']:<22} {'corpus' if x['in_corpus'] else 'outside':<7} "
                      f"{x['how']:<8} {x['title']}".rstrip() for x in links]  # fmt: skip
        return "\n".join(lines)

    def html(self) -> str:
        cols = ("paper", "in corpus", "resolved by", "title / reference")

        def rows(links: list[Row]) -> list[tuple[Any, ...]]:
            return [
                (
                    h.Raw(h.paper_link(x["arxiv_id"])),
                    "yes" if x["in_corpus"] else "no",
                    x["how"],
                    x["title"] or h.snippet(x["reference"], 160),
                )
                for x in links
            ]

        return h.box(
            self.kind,
            h.head(f"{h.paper_link(self.arxiv_id)} cites {self.n_cites} works"),
            h.table(cols, rows(self.cites)),
            h.head(f"cited by {self.n_cited_by} corpus papers"),
            h.table(cols, rows(self.cited_by)),
        )  # fmt: skip


class Related(Record, kind="related", columns="rank score arxiv_id title"):
    """The served papers most related to one (``Lab.related``)."""

    arxiv_id: str
    method: str
    related: list[dict[str, Any]]

    def rows(self) -> list[dict[str, Any]]:
        return [{c: r[c] for c in self.columns} for r in self.related]

    def text(self) -> str:
        lines = [f"related to {self.arxiv_id} by {self.method}:"]
        lines += [f"{r['rank']:>3}. {r['score']:.4f}  {r['arxiv_id']}  {r['title']}"
                  for r in self.related]  # fmt: skip
        return "\n".join(lines)

    def html(self) -> str:
        rows = [(r["rank"], f"{r['score']:.4f}", h.Raw(h.paper_link(r["arxiv_id"])), r["title"])
                for r in self.related]  # fmt: skip
        return h.box(
            self.kind,
            h.head(f"related to {h.paper_link(self.arxiv_id)} by <b>{h.esc(self.method)}</b>"),
            h.table(("#", "score", "paper", "title"), rows, numeric=("#", "score")),
        )


class Summary(Record, kind="summary", columns="text section role page label score"):
    """A judged summary of a paper (``Lab.summarize``; ``GET /papers/{arxiv_id}/summary``)."""

    renames: ClassVar[dict[str, str]] = {"text": "text_"}
    paper_id: str
    title: str
    method: str
    version: str
    settings: dict[str, Any]
    text_: str  # the desk's "text" (the name ``text`` is the method)
    sentences: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    counts: dict[str, Any] = dataclasses.field(default_factory=dict)
    llm: dict[str, Any] | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"text": s["text"], "section": s.get("section", ""), "role": s.get("role", ""),
             "page": s.get("page"), "label": s["verdict"]["label"], "score": s["verdict"]["score"]}
            for s in self.sentences
        ]  # fmt: skip

    def text(self) -> str:
        lines = [f"{self.title} ({self.paper_id}), {self.method} summary:"]
        lines += [f"  [{s['verdict']['label']}] {s['text']} (p. {s.get('page')})"
                  for s in self.sentences]  # fmt: skip
        return "\n".join(lines)

    def html(self) -> str:
        items = "".join(
            f"<li>{h.esc(s['text'])} <span class='rag-muted'>(p. {h.esc(s.get('page'))}, "
            f"{h.esc(s.get('section', ''))})</span>{h.verdict_badge(s['verdict'], s['text'])}</li>"
            for s in self.sentences
        )
        c = self.counts
        tally = ", ".join(f"{c.get(k, 0)} {k.replace('_', ' ')}"
                          for k in ("supported", "unsupported", "not_found"))  # fmt: skip
        return h.box(
            self.kind,
            h.head(f"<b>{h.esc(self.title)}</b> — {h.paper_link(self.paper_id)}, "
                   f"{h.esc(self.method)} summary <span class='rag-muted'>({tally})</span>"),
            f"<ul class='rag-answer'>{items}</ul>",
        )  # fmt: skip
