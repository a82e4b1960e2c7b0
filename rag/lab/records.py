"""The lab's results as small typed records: HTML in a notebook, text in a terminal, a DataFrame
for analysis and the service's JSON. The base record, search hits, answers, chat turns and the
judge's verdict live here; the paper desk's records (papers, pages, citations, related work,
summaries) in :mod:`rag.lab.papers`.

Every record is built from the dict one paper-desk method returns (:mod:`rag.serve.desk`, the
same dicts ``rag ask --json``, ``POST /ask`` and the MCP tools return) and gives it back unchanged
from :meth:`Record.to_dict`, keys the record does not know included. ``_repr_html_`` is what
Jupyter shows: an answer as its sentences with ``[n]`` chips linked to the numbered sources below
and each claim's verdict, hits and related work as tables. ``__repr__`` is plain text;
``to_frame()`` the rows as a pandas DataFrame.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import typing
from typing import Any, ClassVar

from rag.lab import html as h

#: One row of the desk's JSON: a hit, a numbered source, a link (the service's schemas in
#: :mod:`rag.serve.models` and :mod:`rag.serve.desk_models` name their keys).
Row = dict[str, Any]


@typing.dataclass_transform()
@dataclasses.dataclass(repr=False)
class Record:
    """Base of every result: the desk's dict as typed fields, plus keys it does not name.

    A record class is a dataclass (its ``repr`` is :meth:`__repr__`'s text) by subclassing this
    one, and says in its class line what differs: ``kind``, ``columns`` (space-separated) and
    ``rows_from``, e.g. ``class Hits(Record, kind="hits", columns="rank score ..."):``.
    """

    #: the record's name in headings
    kind: ClassVar[str] = "record"
    #: the columns of :meth:`to_frame`, in order
    columns: ClassVar[tuple[str, ...]] = ()
    #: the list field whose items, copied, are the rows ("": the record's :meth:`rows` says)
    rows_from: ClassVar[str] = ""
    #: JSON keys held by a field of another name (a key that would shadow a method)
    renames: ClassVar[dict[str, str]] = {}
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)
    #: the keys of the dict the record was made from, in order (None: made field by field)
    source_keys: tuple[str, ...] | None = dataclasses.field(
        default=None, kw_only=True, metadata={"json": False}
    )

    def __init_subclass__(
        cls, *, kind: str = "", columns: str = "", rows_from: str = "", **kw: Any
    ) -> None:
        super().__init_subclass__(**kw)
        cls.kind = kind or cls.kind
        cls.columns = tuple(columns.split()) or cls.columns
        cls.rows_from = rows_from or cls.rows_from
        dataclasses.dataclass(repr=False)(cls)

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kw: Any) -> Any:
        """The record of a desk dict: known keys become fields, the rest stays in ``extra``."""
        fields = dataclasses.fields(cls)
        names = {f.name for f in fields if f.metadata.get("json", True)} - {"extra"}
        known: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in data.items():
            name = cls.renames.get(key, key)
            if name in names:
                known[name] = value
            else:
                rest[key] = value
        return cls(**known, **kw, extra=rest, source_keys=tuple(data))

    def json_fields(self) -> list[str]:
        """The fields that are keys of the service's JSON (all but ``extra`` and local ones)."""
        return [
            f.name for f in dataclasses.fields(self)
            if f.name != "extra" and f.metadata.get("json", True)
        ]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The dict the desk returned (what the HTTP API and ``--json`` give), as a copy: its
        keys in its order."""
        back = {v: k for k, v in self.renames.items()}
        out = {back.get(name, name): getattr(self, name) for name in self.json_fields()}
        out.update(self.extra)
        keys = self.source_keys if self.source_keys is not None else tuple(out)
        return {k: copy.deepcopy(out[k]) for k in keys if k in out}

    def rows(self) -> list[dict[str, Any]]:
        """The record's rows (one per hit, source, link ...); :meth:`to_frame` tabulates them."""
        return [dict(r) for r in getattr(self, self.rows_from)] if self.rows_from else []

    def to_frame(self) -> Any:
        """The rows as a pandas DataFrame with :attr:`columns` (empty rows: those columns)."""
        import pandas as pd

        rows = self.rows()
        return pd.DataFrame(rows, columns=list(self.columns) or None)

    def text(self) -> str:
        """Plain text for a terminal."""
        return f"<{self.kind}>"

    def html(self) -> str:
        """The HTML Jupyter shows."""
        return h.box(self.kind, f"<pre>{h.esc(self.text())}</pre>")

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return self.html()


def _where(arxiv_id: str, page: Any, section: str = "", file: str = "") -> str:
    sec = f", {section}" if section else ""
    return f"{file or f'arXiv:{arxiv_id}'}, p. {page}{sec}"  # a folder's paper: its file


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


class Hits(Record, kind="hits", columns="rank score arxiv_id title page section chunk_id text"):
    """Ranked chunks for a query (``Lab.search``; ``POST /search``)."""

    query: str
    hits: list[Row]  # rag.serve.models.Hit
    retriever: str
    latency_ms: float

    def rows(self) -> list[dict[str, Any]]:
        return [{"rank": i, **hit} for i, hit in enumerate(self.hits, 1)]

    def text(self) -> str:
        lines = [f"{self.retriever}: {len(self.hits)} hits for {self.query!r} "
                 f"in {self.latency_ms:.1f} ms"]  # fmt: skip
        for i, x in enumerate(self.hits, 1):
            where = _where(x["arxiv_id"], x["page"], x["section"], x.get("file", ""))
            lines.append(f"{i:>2}. {x['score']:.4f}  {x['title'] or '(untitled)'} ({where})")
            lines.append(f"    {cut(x['text'], 180)}")
        return "\n".join(lines)

    def html(self) -> str:
        rows = [
            (i, f"{x['score']:.4f}", h.Raw(h.paper_link(x["arxiv_id"])), x["title"], x["page"],
             x["section"], h.snippet(x["text"]))
            for i, x in enumerate(self.hits, 1)
        ]  # fmt: skip
        heading = h.head(
            f"<b>{h.esc(self.retriever)}</b>: {len(self.hits)} hits for "
            f"<q>{h.esc(self.query)}</q> in {self.latency_ms:.1f} ms"
        )
        cols = ("#", "score", "paper", "title", "page", "section", "text")
        return h.box(self.kind, heading, h.table(cols, rows, numeric=("#", "score", "page")))


class Answer(
    Record,
    kind="answer",
    columns="n cited arxiv_id title page section chunk_id quote",
    rows_from="citations",
):
    """A cited answer, each claim judged (``Lab.ask``; ``POST /ask``, ``rag ask --json``)."""

    query: str
    retriever: str
    answerer: str
    answer: str
    refused: bool
    citations: list[Row]  # rag.serve.models.Citation
    unknown_citations: list[int]
    judgement: dict[str, Any] | None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = 0.0
    latency_ms: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The judged claims ``{claim, label, score, reason}`` ([] when not judged)."""
        return list((self.judgement or {}).get("claims") or [])

    def text(self) -> str:
        from rag.serve.commands import print_answer  # the CLI's own rendering of this dict

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            print_answer(self.to_dict())
        return buf.getvalue().rstrip("\n")

    def _sentences_html(self, anchor: str) -> str:
        """The answer's sentences with citation chips and, when judged, each claim's verdict."""
        from rag.answer.claims import parse_answer

        numbers = {c["n"] for c in self.citations}
        parsed = parse_answer(self.answer)
        claims = self.claims
        per_sentence = sum(len(s.claims) for s in parsed.sentences) == len(claims)
        verdicts = iter(claims)
        parts = []
        for s in parsed.sentences:
            chips = "".join(
                f'<a class="rag-chip" href="#{anchor}-{n}">[{n}]</a>' if n in numbers
                else f'<span class="rag-chip rag-muted" title="no such source">[{n}]</span>'
                for n in s.citations
            )  # fmt: skip
            badges = ""
            if per_sentence:
                badges = "".join(
                    h.verdict_badge(c, c["claim"]) for c in (next(verdicts) for _ in s.claims)
                )
            parts.append(f"<span class='rag-sentence'>{h.esc(s.text)} {chips}{badges}</span> ")
        body = "".join(parts) or h.esc(self.answer)
        if claims and not per_sentence:  # the judge split differently: list its claims
            body += "<ul>" + "".join(
                f"<li>{h.verdict_badge(c, c['claim'])} {h.esc(c['claim'])}</li>" for c in claims
            ) + "</ul>"  # fmt: skip
        return body

    def html(self, note: str = "") -> str:
        """The answer; ``note`` (HTML) goes above the question."""
        anchor = h.new_id("src")
        meta = [h.esc(self.retriever), h.esc(self.answerer)]
        j = self.judgement
        if j:
            meta.append(f"judge {h.esc(j.get('judge', ''))}: {h.esc(j.get('status', ''))}")
        if self.refused:
            meta.append("<b>declined</b>")
        heading = h.head(f"<b>Q:</b> {h.esc(self.query)} <span class='rag-muted'>"
                         f"({' · '.join(meta)})</span>")  # fmt: skip
        body = f"<div class='rag-answer'>{self._sentences_html(anchor)}</div>"
        if self.unknown_citations:
            cited = ", ".join(f"[{n}]" for n in self.unknown_citations)
            body += f"<p class='rag-muted'>cited but not among the sources: {h.esc(cited)}</p>"
        items = []
        for c in self.citations:
            mark = "" if c["cited"] else " <span class='rag-muted'>(not cited)</span>"
            items.append(
                f"<li id='{anchor}-{c['n']}' value='{int(c['n'])}'>"
                f"<b>{h.esc(c['title'] or '(untitled)')}</b> — {h.paper_link(c['arxiv_id'])}, "
                f"p. {h.esc(c['page'])}{', ' + h.esc(c['section']) if c['section'] else ''}"
                f"{mark}<br><span class='rag-quote'>{h.esc(h.snippet(c['quote'], 400))}</span>"
                "</li>"
            )
        sources = f"<div><b>Sources</b></div><ol class='rag-sources'>{''.join(items)}</ol>"
        return h.box(self.kind, note, heading, body, sources)


class ChatTurn(Answer, kind="chat-turn"):
    """One turn of a :class:`rag.lab.Chat`: the answer to the rewritten question, as
    ``POST /chat`` returns it, and the message as typed (``message``, not part of the JSON)."""

    rephrased_query: str = ""
    rewritten: bool = False
    rewriter: str = ""
    rewrite_reason: str = ""
    message: str = dataclasses.field(default="", metadata={"json": False})

    def rewrite_note(self) -> str:
        """How the message became the question retrieved with."""
        if self.rewritten:
            return f"» {self.rephrased_query}   (rewritten by {self.rewriter})"
        return f"» {self.rephrased_query}   (not rewritten: {self.rewrite_reason})"

    def text(self) -> str:
        return f"{self.rewrite_note()}\n{super().text()}"

    def html(self, note: str = "") -> str:
        mine = h.head(f"<span class='rag-muted'>{h.esc(self.rewrite_note())}</span>")
        return super().html(note + mine)


class Verdict(Record, kind="verdict", columns="claim label score reason judge chunk_id"):
    """The judge's verdict on one claim against one source (``Lab.judge``)."""

    claim: str
    source: str
    chunk_id: str | None
    label: str
    score: float
    reason: str
    judge: str

    @property
    def supported(self) -> bool:
        """Whether the judge says the source supports the claim."""
        return self.label == "supported"

    def rows(self) -> list[dict[str, Any]]:
        return [{c: getattr(self, c) for c in self.columns}]

    def text(self) -> str:
        where = f" (chunk {self.chunk_id})" if self.chunk_id else ""
        return (f"{self.label} ({self.score:.3f}) by {self.judge}: {self.claim}\n"
                f"  source{where}: {cut(self.source, 160)}\n  {self.reason}")  # fmt: skip

    def html(self) -> str:
        where = f" (chunk {h.esc(self.chunk_id)})" if self.chunk_id else ""
        return h.box(
            self.kind,
            h.head(f"{h.verdict_badge(self.to_dict())} <b>{h.esc(self.claim)}</b> "
                   f"<span class='rag-muted'>score {self.score:.3f}, {h.esc(self.judge)}</span>"),
            f"<div class='rag-quote'>source{where}: {h.esc(h.snippet(self.source, 600))}</div>",
            f"<div class='rag-muted'>{h.esc(self.reason)}</div>",
        )  # fmt: skip
