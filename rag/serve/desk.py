"""The paper desk: the lab's tools for a researcher's assistant, implemented once.

``list_papers``, ``search``, ``ask`` (a cited answer, each claim judged), ``chat`` (a follow-up
rewritten into a standalone question, then asked), ``judge`` (one claim against a passage or a
served chunk), ``get_paper``, ``read`` (a page or a chunk), ``citations`` (out and in),
``related`` and ``summarize`` (the papers stage's :func:`rag.papers.summarize.summarize`) take
plain arguments and return JSON-ready dicts. The CLI (``rag cites``, ``rag related``, ``rag
summary``, ``rag chat``), the HTTP routes under ``/papers`` and ``/chat``'s rewrite, the MCP
server (``rag mcp``) and ``rag.Lab`` all call these methods.

Every argument is validated by a pydantic model (``k`` from 1 to 50, a non-blank query, a paper
id the served index holds) before any work; a bad one raises :class:`ToolInputError` naming the
field and the value, and an unknown paper :class:`UnknownPaperError`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from rag import paths
from rag.serve.engine import ChoiceError, Engine
from rag.serve.folder_lab import add_files
from rag.serve.models import MAX_K, Answerer, Query, RetrieverName

PaperId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
#: The longest source text :meth:`Desk.judge` takes (a page of a paper is ~4,000 characters).
MAX_SOURCE_CHARS = 50_000
#: The related-work rankings of :func:`rag.papers.related.related`.
RelatedMethod = Literal["text", "cocitation", "coupling", "popularity", "fusion"]


class ToolInputError(ChoiceError):
    """A tool argument is invalid; ``field`` names it and the message names the value."""


class UnknownPaperError(ToolInputError):
    """The paper id is not one the served index holds."""


#: How much of a bad value an error message quotes (its length is stated beside it).
QUOTE_CHARS = 200


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with its full length stated when longer, so
    an error about a megabyte of text does not repeat it."""
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    size = f"{len(value):,} characters" if isinstance(value, str) else f"{len(shown):,} as text"
    return f"{shown[:limit]}… ({size})"


def _takes_int(annotation: Any) -> bool:
    return annotation is int or int in get_args(annotation)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_int(cls, value: Any, info: ValidationInfo) -> Any:
        """A boolean where a whole number is expected is refused, as JSON over HTTP is (pydantic
        would take ``True`` as 1)."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _takes_int(field.annotation):
            raise ValueError("a whole number is expected, not a boolean")
        return value


class SearchArgs(_Args):
    query: Query = Field(description="What to search for.")
    k: int = Field(5, ge=1, le=MAX_K, description="Hits to return.")
    retriever: RetrieverName | None = Field(None, description="Default: the profile's retriever.")


class AskArgs(_Args):
    question: Query = Field(description="The question.")
    k: int | None = Field(None, ge=1, le=MAX_K, description="Chunks in the context.")
    retriever: RetrieverName | None = Field(None, description="Default: the profile's retriever.")
    answerer: Answerer = Field(
        "extractive", description="extractive (no model), a registered model, or provider:model."
    )
    judge: bool = Field(True, description="Judge every claim with the offline judge.")


class JudgeArgs(_Args):
    claim: Query = Field(description="One claim to check.")
    source: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SOURCE_CHARS)
    ] = Field(description="The passage to check it against, or a served chunk id.")


class PaperArgs(_Args):
    arxiv_id: PaperId = Field(description="An arXiv id of the served corpus (list_papers).")


class ReadArgs(_Args):
    arxiv_id: PaperId | None = Field(None, description="The paper whose page is read.")
    page: int | None = Field(None, ge=1, le=10_000, description="1-based page number.")
    chunk_id: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = Field(
        None, description="A chunk id from search or read."
    )


class RelatedArgs(PaperArgs):
    k: int = Field(10, ge=1, le=MAX_K, description="Related papers to return.")
    method: RelatedMethod = Field("fusion", description="text, cocitation, coupling, popularity "
                                  "or fusion (RRF of text and co-citation).")  # fmt: skip


class SummaryArgs(PaperArgs):
    sentences: int = Field(5, ge=1, le=20, description="At most this many summary sentences.")
    model: Answerer | None = Field(None, description="A chat model; None: extractive, offline.")


def validate(model: type[BaseModel], /, **kwargs: Any) -> Any:
    """``model(**kwargs)``, or :class:`ToolInputError` naming the first bad field and its value."""
    try:
        return model(**kwargs)
    except ValidationError as e:
        err = e.errors()[0]
        name = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        value = err.get("input")
        raise ToolInputError(name, f"{name}={quote(value)}: {err.get('msg', 'invalid')}") from None


class Desk:
    """The tools over one :class:`rag.serve.engine.Engine`.

    Args:
        lab: the loaded lab (its served index and components).
        citations_path: the corpus's ``citations.jsonl`` (default: where
            :func:`rag.papers.measure.default_outputs` puts the pinned corpus's graph).
    """

    def __init__(self, lab: Engine, *, citations_path: str | None = None) -> None:
        self.lab = lab
        self._citations_path = citations_path
        self._rows: list | None = None
        self._vectors: tuple[Any, dict[str, np.ndarray]] | None = None
        self._meta: dict[str, Any] | None = None
        self._lock = threading.Lock()

    # -- what the desk reads -------------------------------------------------------------------

    def _paper(self, arxiv_id: str) -> str:
        pid = arxiv_id.strip()
        if self.folder is not None:  # a folder's paper may be named by its file, too
            pid = self.folder.by_file(pid) or pid
        if pid not in self.lab.index.snapshot.paper_ids():
            raise UnknownPaperError(
                "arxiv_id", f"arxiv_id={arxiv_id!r} is not a served paper; list_papers names them"
            )
        return pid

    @property
    def folder(self) -> Any:
        """The folder's papers when the lab serves a folder of PDFs (else None)."""
        return getattr(self.lab, "folder", None)

    def _manifest(self) -> dict[str, Any]:
        with self._lock:
            if self._meta is None and self.folder is not None:
                self._meta = self.folder.meta()
            if self._meta is None:
                from rag.corpus.manifest import load_manifest

                papers = load_manifest(self.lab.settings.manifest_path)
                self._meta = {p.arxiv_id: p for p in papers}
            return self._meta

    def _citation_rows(self) -> list:
        if self.folder is not None:
            return self.folder.citation_rows()
        with self._lock:
            if self._rows is None:
                from rag.papers.graph import read_citations
                from rag.papers.measure import default_outputs

                manifest = self.lab.settings.manifest_path
                path = self._citations_path or default_outputs(manifest, 0)[0]
                self._rows = read_citations(paths.resolve(path))
            return self._rows

    def _paper_vectors(self) -> dict[str, np.ndarray]:
        """Paper vectors from the served index's own chunks and vectors (cached per snapshot)."""
        from rag.papers.related import paper_vectors

        snap = self.lab.index.snapshot
        with self._lock:
            if self._vectors is None or self._vectors[0] is not snap:
                chunks = [snap.store[i] for i in snap.dense.ids]
                self._vectors = (snap, paper_vectors(chunks, snap.dense.vectors))
            return self._vectors[1]

    def _title(self, pid: str) -> str:
        t = self.lab.index.snapshot.titles.get(pid)
        if t:
            return t
        p = self._manifest().get(pid)
        return p.title if p else ""

    # -- the tools -----------------------------------------------------------------------------

    def list_papers(self) -> dict[str, Any]:
        """Every served paper: id, title, category, source, chunk count and when it was added."""
        snap, meta = self.lab.index.snapshot, self._manifest()
        return {
            "n_papers": len(snap.papers), "n_chunks": snap.n_chunks,
            "papers": [
                {
                    "arxiv_id": p.paper_id, "title": p.title,
                    "category": meta[p.paper_id].primary_category if p.paper_id in meta else "",
                    "source": p.source, "n_chunks": p.n_chunks, "added_at": p.added_at,
                }
                for p in snap.papers
            ],
        }  # fmt: skip

    def search(self, query: str, k: int = 5, retriever: str | None = None) -> dict[str, Any]:
        """Ranked chunks for a query, each with its paper, page, section and text."""
        a = validate(SearchArgs, query=query, k=k, retriever=retriever)
        hits, meta = self.lab.search(a.query, a.k, a.retriever)
        return {"query": a.query, "hits": add_files(self.lab, hits), **meta}

    def ask(
        self,
        question: str,
        k: int | None = None,
        retriever: str | None = None,
        answerer: str = "extractive",
        judge: bool = True,
    ) -> dict[str, Any]:
        """An answer with numbered citations and, with ``judge``, a verdict on every claim."""
        a = validate(AskArgs, question=question, k=k, retriever=retriever, answerer=answerer,
                     judge=judge)  # fmt: skip
        r = self.lab.ask(a.question, k=a.k, retriever=a.retriever, answerer=a.answerer,
                         judge=a.judge)  # fmt: skip
        d = r.to_dict()
        add_files(self.lab, d["citations"])
        return d

    def rewrite(
        self,
        messages: Sequence[Mapping[str, str]],
        rewrite_model: str | None = None,
        bypass_rewrite: bool = False,
    ) -> dict[str, Any]:
        """The standalone question for a conversation's last (user) message: ``rephrased_query``,
        whether it was ``rewritten``, by which ``rewriter``, and ``rewrite_reason`` (the rule
        rewriter, or ``rewrite_model``; ``bypass_rewrite`` keeps the message as typed)."""
        rw = self.lab.rewrite(messages, bypass=bypass_rewrite, model=rewrite_model)
        return {"rephrased_query": rw.query, "rewritten": rw.rewritten, "rewriter": rw.rewriter,
                "rewrite_reason": rw.reason}  # fmt: skip

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        k: int | None = None,
        retriever: str | None = None,
        answerer: str = "extractive",
        judge: bool = True,
        rewrite_model: str | None = None,
        bypass_rewrite: bool = False,
    ) -> dict[str, Any]:
        """One turn of a conversation (``messages`` as ``POST /chat`` takes them, the last the
        user's): the follow-up rewritten into a standalone question (:meth:`rewrite`), answered
        as :meth:`ask` does, with the rewrite's four fields added to the answer."""
        last = messages[-1]["content"] if messages else ""
        validate(AskArgs, question=last, k=k, retriever=retriever, answerer=answerer, judge=judge)
        extra = self.rewrite(messages, rewrite_model=rewrite_model, bypass_rewrite=bypass_rewrite)
        d = self.ask(extra["rephrased_query"], k=k, retriever=retriever, answerer=answerer,
                     judge=judge)  # fmt: skip
        return {**d, **extra}

    def judge(self, claim: str, source: str) -> dict[str, Any]:
        """The lab's judge on ``claim`` against ``source``: a passage's text, or the id of a
        served chunk (``hit["chunk_id"]``), whose text is then the source."""
        a = validate(JudgeArgs, claim=claim, source=source)
        store = self.lab.index.snapshot.store
        chunk_id = a.source if a.source in store else None
        text = store[chunk_id].text if chunk_id else a.source
        judge = self.lab.judge()
        v = judge.verdict(a.claim, text)
        return {
            "claim": a.claim, "source": text, "chunk_id": chunk_id, "label": v.label,
            "score": round(float(v.score), 6), "reason": v.reason, "judge": judge.name,
        }  # fmt: skip

    def get_paper(self, arxiv_id: str) -> dict[str, Any]:
        """A paper's metadata, its sections in reading order (with first page) and page count."""
        pid = self._paper(validate(PaperArgs, arxiv_id=arxiv_id).arxiv_id)
        snap = self.lab.index.snapshot
        served = next(p for p in snap.papers if p.paper_id == pid)
        chunks = self._chunks(pid)
        sections: list[dict[str, Any]] = []
        for c in chunks:
            if c.section and (not sections or sections[-1]["section"] != c.section):
                sections.append({"section": c.section, "page": c.page_start})
        m = self._manifest().get(pid)
        last = max((c.page_end for c in chunks), default=0)
        d = {
            "arxiv_id": pid, "title": served.title or self._title(pid),
            "category": m.primary_category if m else "", "version": m.version if m else "",
            "url": f"https://arxiv.org/abs/{pid}", "source": served.source,
            "pages": (m.pages if m and m.pages else last), "n_chunks": served.n_chunks,
            "sections": sections,
        }  # fmt: skip
        p = self.folder.papers.get(pid) if self.folder is not None else None
        if p is not None:  # a folder's paper: its file and what the PDF says
            d.update(
                file=p.file,
                files=p.files,
                authors=p.authors,
                year=p.year,
                doi=p.doi,
                sha256=p.sha256,
                url=f"https://arxiv.org/abs/{pid}" if p.arxiv_id else "",
            )
        return d

    def _chunks(self, pid: str) -> list:
        store = self.lab.index.snapshot.store
        chunks = [store[i] for i in store if store[i].paper_id == pid]
        return sorted(chunks, key=lambda c: (c.page_start, c.char_start, c.chunk_id))

    def read(
        self, arxiv_id: str | None = None, page: int | None = None, chunk_id: str | None = None
    ) -> dict[str, Any]:
        """One chunk by id, or the indexed text of one page of a paper (its chunks in order)."""
        a = validate(ReadArgs, arxiv_id=arxiv_id, page=page, chunk_id=chunk_id)
        store = self.lab.index.snapshot.store
        if a.chunk_id is not None:
            if a.arxiv_id is not None or a.page is not None:
                raise ToolInputError("chunk_id", "give chunk_id alone, or arxiv_id and page")
            if a.chunk_id not in store:
                raise ToolInputError("chunk_id", f"chunk_id={a.chunk_id!r} is not a served chunk")
            chunks = [store[a.chunk_id]]
            pid = chunks[0].paper_id
        else:
            if a.arxiv_id is None or a.page is None:
                raise ToolInputError("page", "give arxiv_id and page, or chunk_id")
            pid = self._paper(a.arxiv_id)
            every = self._chunks(pid)
            chunks = [c for c in every if c.page_start <= a.page <= c.page_end]
            if not chunks:
                last = max((c.page_end for c in every), default=0)
                raise ToolInputError(
                    "page", f"page={a.page} has no indexed text in {pid}; pages 1..{last}"
                )
        return {
            "arxiv_id": pid, "title": self._title(pid), "page": a.page,
            "chunks": [
                {"chunk_id": c.chunk_id, "section": c.section, "page_start": c.page_start,
                 "page_end": c.page_end, "text": c.text}
                for c in chunks
            ],
        }  # fmt: skip

    def citations(self, arxiv_id: str) -> dict[str, Any]:
        """What a paper cites (corpus papers and resolved works outside it) and which corpus
        papers cite it, each link with how it was resolved and the raw reference."""
        from rag.papers.graph import paper_links

        pid = self._paper(validate(PaperArgs, arxiv_id=arxiv_id).arxiv_id)
        corpus = set(self._manifest()) | self.lab.index.snapshot.paper_ids()
        links = paper_links(self._citation_rows(), pid, corpus)
        for side in ("cites", "cited_by"):
            for d in links[side]:
                d["title"] = self._title(d["arxiv_id"]) if d["in_corpus"] else ""
        links["n_cites"], links["n_cited_by"] = len(links["cites"]), len(links["cited_by"])
        return links

    def related(self, arxiv_id: str, k: int = 10, method: str = "fusion") -> dict[str, Any]:
        """The served papers most related to one: text similarity of paper vectors, co-citation
        and coupling from the citation graph, or their fusion (RRF of text and co-citation)."""
        from rag.papers.graph import references_of
        from rag.papers.related import related

        a = validate(RelatedArgs, arxiv_id=arxiv_id, k=k, method=method)
        pid = self._paper(a.arxiv_id)
        vectors = self._paper_vectors()
        corpus = sorted(vectors)
        ranked = related(pid, corpus, vectors, references_of(self._citation_rows()),
                         method=a.method, k=a.k)  # fmt: skip
        for d in ranked:
            d["title"] = self._title(d["arxiv_id"])
        return {"arxiv_id": pid, "method": a.method, "related": ranked}

    def summarize(
        self, arxiv_id: str, sentences: int = 5, model: str | None = None
    ) -> dict[str, Any]:
        """A section-aware summary of a paper (abstract not read; extractive, or by ``model``),
        each sentence judged against the paper by the lab's judge."""
        from rag.papers.summarize import summarize

        a = validate(SummaryArgs, arxiv_id=arxiv_id, sentences=sentences, model=model)
        pid = self._paper(a.arxiv_id)
        chat = None
        if a.model not in (None, "extractive"):
            try:  # the lab's answerer rules: a registered model or provider:model, no gguf: path
                chat = self.lab.answerer(a.model).chat_model
            except ChoiceError as e:
                raise ToolInputError("model", f"model={a.model!r}: {e}") from e
        if self.folder is not None and pid in self.folder.papers:  # its parse, not a manifest's
            return summarize(pid, sentences=a.sentences, chat_model=chat, judge=self.lab.judge(),
                             parsed=self.folder.parsed(pid), title=self._title(pid))  # fmt: skip
        return summarize(pid, sentences=a.sentences, chat_model=chat, judge=self.lab.judge(),
                         manifest_path=self.lab.settings.manifest_path)  # fmt: skip
