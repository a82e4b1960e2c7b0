"""The lab from a notebook: the paper desk's tools as methods that return displayable records.

:class:`Lab` is the fourth door to the paper desk (:class:`rag.serve.desk.Desk`), beside the CLI,
the HTTP service and the MCP server: every method validates and computes through the desk, so a
notebook gets the answer ``rag ask`` prints and ``POST /ask`` returns, as a record
(:mod:`rag.lab.records`) that shows itself as HTML. Nothing loads when the object is made: the
profile's settings are read (so a misspelt profile fails at once), and the corpus, the index and
the query encoder load on the first call; the judge, a reranker and chat models on the first call
that needs them. Like the service, it is offline and model-free by default (hybrid retrieval, the
extractive answerer, the offline judge).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag.lab.compare import Comparison, find_gold, gold_record, overlap
from rag.lab.notebook import quiet_methods
from rag.lab.papers import Citations, Page, Paper, PaperList, Related, Summary
from rag.lab.records import Answer, ChatTurn, Hits, Verdict
from rag.serve.models import Query

#: Retrievers :meth:`Lab.compare` runs by default: the three that need no model beyond the index.
DEFAULT_COMPARE = ("bm25", "dense", "hybrid")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChatArgs(_Args):
    message: Query = Field(description="The next user message.")


class CompareArgs(_Args):
    retrievers: list[str] = Field(min_length=1, max_length=6, description="Retriever names.")


@quiet_methods
class Lab:
    """Search, ask, chat, compare retrievers, judge claims and read papers from a notebook.

    Args:
        profile: a ``params/<profile>.yaml`` name (``"smoke"``: five papers, for a quick look).
        papers: serve only these arXiv ids of the profile's manifest.
        pdfs: serve this folder of PDFs (any file names) instead of the profile's corpus; its
            index is built on the first call (``rag ask --pdfs DIR``) and reused after.
        embedder: the folder's embedder (default: the profile's, MiniLM).
        index_dir: the served index folder (default: the project cache, as ``rag ask``).
        local_model: a ``gguf:PATH`` model to answer with (as ``rag ask --model gguf:PATH``).
        gold_path: gold questions :meth:`compare` grades against (default: the shared corpus
            gold, when present).
        engine: an already loaded :class:`rag.serve.engine.Engine` to use instead of loading one.

    Example:
        >>> from rag import Lab
        >>> lab = Lab("smoke")
        >>> lab.ask("Which n-gram lengths does the subword skipgram use?")
    """

    def __init__(
        self,
        profile: str = "default",
        *,
        papers: Sequence[str] = (),
        pdfs: str = "",
        embedder: str = "",
        index_dir: str = "",
        local_model: str | None = None,
        gold_path: str | None = None,
        engine: Any = None,
    ) -> None:
        from rag.report.profiles import profile_name
        from rag.serve.config import ServeSettings, profile_settings

        if engine is not None:
            self.settings = engine.settings
        else:
            self.settings = profile_settings(
                profile_name(profile),
                paper_ids=tuple(papers),
                local_model=local_model,
                pdfs=str(Path(pdfs).expanduser().resolve()) if pdfs else "",
                embedder=embedder or None,
            )
        self.profile = self.settings.profile
        self._serve = ServeSettings(index_dir=index_dir)
        self._engine = engine
        self._desk: Any = None
        self._gold_path = gold_path
        self._gold: list[Any] | None = None
        self._lock = threading.Lock()

    # -- what the lab holds --------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the index is loaded (it loads on the first call that needs it)."""
        return self._desk is not None

    @property
    def desk(self) -> Any:
        """The paper desk over the loaded index (:class:`rag.serve.desk.Desk`); loads it."""
        with self._lock:
            if self._desk is None:
                from rag.serve.desk import Desk
                from rag.serve.engine import load_lab

                if self._engine is None:
                    self._engine = load_lab(self.settings, self._serve)
                self._desk = Desk(self._engine)
            return self._desk

    @property
    def engine(self) -> Any:
        """The components behind the desk (:class:`rag.serve.engine.Engine`); loads them."""
        return self.desk.lab

    def __repr__(self) -> str:
        s = self.settings
        how = f"retriever {s.retriever}, k {s.k}, answerer extractive"
        if not self.loaded:
            if s.paper_ids:
                named = f"{len(s.paper_ids)} papers"
            elif s.max_papers:
                named = f"the first {s.max_papers} papers"
            else:
                named = "every paper"
            return (f"Lab(profile={self.profile!r}): {named} of {s.manifest_path}; {how}; "
                    "not loaded yet (the index loads on first use)")  # fmt: skip
        snap = self.engine.index.snapshot
        return (f"Lab(profile={self.profile!r}): {len(snap.papers)} papers, {snap.n_chunks} chunks "
                f"served, embedder {s.embedder}; {how}; the judge and chat models load on "
                "first use")  # fmt: skip

    # -- the desk's tools ----------------------------------------------------------------------

    def papers(self) -> PaperList:
        """Every served paper: id, title, category, chunk count."""
        return PaperList.from_dict(self.desk.list_papers())

    def search(self, query: str, k: int = 5, retriever: str | None = None) -> Hits:
        """Ranked chunks for ``query`` (``retriever``: dense, bm25, hybrid, rerank, multi-query,
        hyde; default the profile's)."""
        return Hits.from_dict(self.desk.search(query, k=k, retriever=retriever))

    def ask(
        self, question: str, *, k: int | None = None, retriever: str | None = None,
        answerer: str = "extractive", judge: bool = True,
    ) -> Answer:  # fmt: skip
        """An answer with numbered citations and, with ``judge``, the judge's verdict per claim.

        ``answerer``: ``extractive`` (no model), a model from ``rag models``, or
        ``provider:model``.
        """
        d = self.desk.ask(question, k=k, retriever=retriever, answerer=answerer, judge=judge)
        return Answer.from_dict(d)

    def chat(
        self,
        *,
        answerer: str = "extractive",
        judge: bool = True,
        k: int | None = None,
        retriever: str | None = None,
        rewrite_model: str | None = None,
        bypass_rewrite: bool = False,
    ) -> Chat:
        """A conversation: each :meth:`Chat.ask` rewrites a follow-up into a standalone question
        (the rule rewriter, or ``rewrite_model``) and answers it as :meth:`ask` does."""
        return Chat(
            self, answerer=answerer, judge=judge, k=k, retriever=retriever,
            rewrite_model=rewrite_model, bypass_rewrite=bypass_rewrite,
        )  # fmt: skip

    def compare(
        self, question: str, retrievers: Sequence[str] = DEFAULT_COMPARE, k: int = 5
    ) -> Comparison:
        """The same question through several retrievers side by side; when it is a gold
        question, how each ranking meets its evidence (:mod:`rag.lab.compare`)."""
        from rag.serve.desk import validate

        names = list(dict.fromkeys(validate(CompareArgs, retrievers=list(retrievers)).retrievers))
        runs = {name: self.desk.search(question, k=k, retriever=name) for name in names}
        item = find_gold(question, self._gold_items())
        gold = gold_record(item, self.engine.index.snapshot.store) if item else None
        grades = {n: overlap(r["hits"], gold, k) for n, r in runs.items()} if gold else {}
        query = next(iter(runs.values()))["query"]
        return Comparison(question=query, k=k, runs=runs, gold=gold, overlap=grades)

    def judge(self, claim: str, source: str) -> Verdict:
        """The offline judge's verdict on ``claim`` against ``source``: a passage's text, or the
        id of a served chunk (``hit["chunk_id"]``), whose text is then the source."""
        return Verdict.from_dict(self.desk.judge(claim, source))

    def paper(self, arxiv_id: str) -> Paper:
        """A paper's metadata and its sections in reading order, with their first pages."""
        return Paper.from_dict(self.desk.get_paper(arxiv_id))

    def read(
        self, arxiv_id: str | None = None, page: int | None = None, chunk_id: str | None = None
    ) -> Page:
        """The indexed text of one page of a paper, or one chunk by id."""
        return Page.from_dict(self.desk.read(arxiv_id=arxiv_id, page=page, chunk_id=chunk_id))

    def citations(self, arxiv_id: str) -> Citations:
        """What a paper cites and which corpus papers cite it, each link with how it resolved."""
        return Citations.from_dict(self.desk.citations(arxiv_id))

    def related(self, arxiv_id: str, k: int = 10, method: str = "fusion") -> Related:
        """The served papers most related to one (text, cocitation, coupling, popularity, or
        fusion: RRF of text and co-citation)."""
        return Related.from_dict(self.desk.related(arxiv_id, k=k, method=method))

    def summarize(self, arxiv_id: str, sentences: int = 5, model: str | None = None) -> Summary:
        """A section-aware summary of a paper, each sentence judged against it (extractive and
        offline unless ``model`` names a chat model)."""
        return Summary.from_dict(self.desk.summarize(arxiv_id, sentences=sentences, model=model))

    # -- helpers -------------------------------------------------------------------------------

    def _gold_items(self) -> list[Any]:
        """The gold questions :meth:`compare` grades against ([] without a gold file)."""
        if self._gold is None:
            from rag.evaluation.gold import default_gold_path, load_gold

            path = self._gold_path or default_gold_path()
            explicit = self._gold_path is not None
            self._gold = load_gold(path) if explicit or path.exists() else []
        return self._gold


@quiet_methods
class Chat:
    """A conversation with the lab (:meth:`Lab.chat`): ``messages`` as ``POST /chat`` takes
    them, and one :class:`rag.lab.records.ChatTurn` per answered message."""

    def __init__(self, lab: Lab, **options: Any) -> None:
        self.lab = lab
        self.options = options
        self.messages: list[dict[str, str]] = []
        self.turns: list[ChatTurn] = []

    def ask(self, message: str) -> ChatTurn:
        """Answer the next message: rewritten into a standalone question when it refers back
        (``rephrased_query`` says how), then answered and judged like :meth:`Lab.ask`."""
        from rag.serve.desk import validate

        text = validate(ChatArgs, message=message).message
        history = [*self.messages, {"role": "user", "content": text}]
        d = self.lab.desk.chat(history, **self.options)
        turn = ChatTurn.from_dict(d, message=text)
        self.messages = [*history, {"role": "assistant", "content": d["answer"]}]
        self.turns.append(turn)
        return turn

    def to_dict(self) -> dict[str, Any]:
        """The conversation as ``POST /chat`` sees it: the messages and each turn's response."""
        return {"messages": [dict(m) for m in self.messages],
                "turns": [t.to_dict() for t in self.turns]}  # fmt: skip

    def to_frame(self) -> Any:
        """One row per turn: the message, the question retrieved with, the answer."""
        import pandas as pd

        cols = ["turn", "message", "rephrased_query", "rewritten", "answer", "refused", "sources"]
        rows = [
            [i, t.message, t.rephrased_query, t.rewritten, t.answer, t.refused, len(t.citations)]
            for i, t in enumerate(self.turns, 1)
        ]
        return pd.DataFrame(rows, columns=cols)

    def __repr__(self) -> str:
        if not self.turns:
            return "Chat: no turns yet (chat.ask(message) answers one)"
        return "\n\n".join(f"[{i}] {t.message}\n{t.text()}" for i, t in enumerate(self.turns, 1))

    def _repr_html_(self) -> str:
        from rag.lab import html as h

        if not self.turns:
            return h.box("chat", h.head("No turns yet: <code>chat.ask(message)</code>"))
        return "".join(
            t.html(h.head(f"<b>[{i}] {h.esc(t.message)}</b>")) for i, t in enumerate(self.turns, 1)
        )
