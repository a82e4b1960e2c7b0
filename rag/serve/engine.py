"""The lab behind the CLI and the service: search, ask and chat over the served index.

One :class:`Engine` holds the components the report measures (the profile's embedder, dense and BM25
indexes, reranker, retrievers built by :func:`rag.retrieval.retrievers.build_retriever`, context
assembly and answerers of notebook 05, the offline judge) so ``rag ask``, ``POST /ask`` and the
notebooks answer the same question the same way. Chat models are shared and used under a lock:
the local model is not thread-safe, and the service runs requests on a thread pool.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag import paths
from rag.answer.base import Answer, Answerer
from rag.answer.context import Context, assemble_context
from rag.answer.extractive import ExtractiveAnswerer
from rag.answer.llm import LLMAnswerer
from rag.errors import ConfigError
from rag.ir import Reranker
from rag.llm.base import ChatModel, Completion
from rag.retrieval.retrievers import RETRIEVER_NAMES, Components, RetrievalSettings, build_retriever
from rag.retrieval.rewrite import LLMRewriter, Rewrite, rewrite
from rag.serve.config import LabSettings, ServeSettings
from rag.serve.index import ServedIndex
from rag.serve.warm import Loader
from rag.types import Hit

log = logging.getLogger(__name__)


class ChoiceError(ConfigError):
    """A request names an unknown or unavailable component; ``field`` is the request field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


class _LockedModel:
    """A chat model used by one thread at a time (llama.cpp contexts are not thread-safe)."""

    def __init__(self, model: ChatModel, lock: threading.Lock) -> None:
        self._model, self._lock, self.name = model, lock, model.name

    def complete(self, messages: list, **kw: Any) -> Completion:
        with self._lock:
            return self._model.complete(messages, **kw)


@dataclass
class AskResult:
    """One answered question with everything a client shows."""

    query: str
    retriever: str
    hits: list[Hit]
    context: Context
    answer: Answer
    judgement: dict[str, Any] | None
    timings_ms: dict[str, float] = field(default_factory=dict)

    def citations(self) -> list[dict[str, Any]]:
        """Every source of the context with its number; ``cited`` marks those the answer cites."""
        return [
            {
                "n": s.n, "chunk_id": s.chunk_id, "arxiv_id": s.paper_id, "title": s.title,
                "page": s.page, "section": s.section, "quote": s.text,
                "cited": s.n in self.answer.citations,
            }
            for s in self.context.sources
        ]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        a = self.answer
        return {
            "query": self.query, "retriever": self.retriever, "answerer": a.answerer,
            "answer": a.text, "refused": a.refused, "citations": self.citations(),
            "unknown_citations": list(a.unknown_citations), "judgement": self.judgement,
            "tokens_in": a.tokens_in, "tokens_out": a.tokens_out, "cost_usd": a.cost_usd,
            "latency_ms": self.timings_ms,
        }  # fmt: skip


def hit_dict(h: Hit, titles: Mapping[str, str]) -> dict[str, Any]:
    return {
        "chunk_id": h.chunk_id, "arxiv_id": h.paper_id, "title": titles.get(h.paper_id, ""),
        "page": h.page, "section": h.section, "score": round(float(h.score), 6), "text": h.text,
    }  # fmt: skip


class Engine:
    """Search, ask and chat over a :class:`ServedIndex` with the profile's components.

    Args:
        settings: the profile's settings (:func:`rag.serve.config.profile_settings`).
        index: the served index.
        reranker: the second stage of ``rerank`` (None: loaded by name on first use).
        chat_model: ``name -> ChatModel`` (default :func:`rag.llm.factory.make_chat_model` with
            the project's cache); injected by tests.
        judge: an answer judge (default: the report's offline judge, loaded on first use).
        load_timeout_s: how long a request waits for a component's first load (reranker,
            judge, chat model) before :class:`~rag.serve.warm.StillLoading` (a 503 with
            ``Retry-After``) while the load goes on; None waits as long as it takes.
    """

    def __init__(
        self,
        settings: LabSettings,
        index: ServedIndex,
        *,
        reranker: Reranker | None = None,
        chat_model: Callable[[str], ChatModel] | None = None,
        judge: Any = None,
        load_timeout_s: float | None = None,
    ) -> None:
        self.settings, self.index = settings, index
        #: the index's embedder: each query is encoded alone, the same bytes under any load
        self.queries = index.embedder
        self._reranker, self._judge = reranker, judge
        self._chat_factory = chat_model
        self._llm_lock = threading.Lock()
        self._loads = Loader(load_timeout_s)
        self.extractive = ExtractiveAnswerer()
        #: a served folder's papers (:class:`rag.serve.folder_lab.FolderCorpus`), else None
        self.folder: Any = None

    # -- components ----------------------------------------------------------------------------

    def answerer_names(self) -> list[str]:
        from rag.llm.registry import model_names

        return ["extractive", *model_names()]

    def chat_model(self, name: str, field_name: str = "answerer") -> ChatModel:
        """A shared, locked chat model by registry name (ChoiceError naming ``field_name``),
        loaded (a local model's weights included) on the loader's thread."""

        def load() -> ChatModel:
            try:
                if self._chat_factory is not None:
                    model = self._chat_factory(name)
                else:
                    from rag.llm.factory import make_cache, make_chat_model

                    model = make_chat_model(name, cache=make_cache())
            except ConfigError as e:
                raise ChoiceError(field_name, str(e)) from e
            except Exception as e:  # ProviderUnavailable and SDK import errors alike
                raise ChoiceError(field_name, f"{name!r} is not available: {e}") from e
            warm = getattr(getattr(model, "backend", None), "load", None)
            if callable(warm):  # a local model reads its weights now, not in the first request
                warm()
            return _LockedModel(model, self._llm_lock)

        return self._loads.get(f"chat:{name}", load, f"the chat model {name}")

    def reranker(self) -> Reranker:
        """The rerank row's reranker, loaded on first use."""
        if self._reranker is not None:
            return self._reranker

        def load() -> Reranker:
            from rag.retrieval.registry import load_reranker

            return load_reranker(self.settings.reranker)

        return self._loads.get("reranker", load, "the reranker")

    def judge(self) -> Any:
        """The report's judge (:func:`rag.judge.offline.make_offline_judge` of the default
        judge), loaded on first use: the pinned judge of ``data/judge/`` with the fp32 MiniLM it
        was fitted with, whatever embedder (or MiniLM passage backend) the index serves."""
        if self._judge is not None:
            return self._judge

        def load() -> Any:
            from rag.judge.offline import DEFAULT_JUDGE, make_offline_judge

            return make_offline_judge(DEFAULT_JUDGE)

        return self._loads.get("judge", load, "the judge")

    def retriever(self, name: str | None, k: int, per_paper_cap: int | None = None):
        """The named retriever over the current snapshot, built as notebook 04 builds it."""
        s = self.settings
        name = name or s.retriever
        if name not in RETRIEVER_NAMES:
            raise ChoiceError("retriever", f"unknown retriever {name!r}; use {RETRIEVER_NAMES}")
        snap = self.index.snapshot
        needs_llm = name == "hyde" or (name == "multi-query" and s.variants == "llm")
        comps = Components(
            store=snap.store, embedder=self.queries, dense_index=snap.dense,
            bm25_index=snap.bm25, reranker=self.reranker() if name == "rerank" else None,
            llm=self.chat_model(s.llm_model, "retriever") if needs_llm else None,
        )  # fmt: skip
        rs = RetrievalSettings(
            k=k, hybrid_pool=s.hybrid_pool, rerank_pool=s.rerank_pool, n_variants=s.n_variants,
            variants=s.variants, per_paper_cap=per_paper_cap,  # type: ignore[arg-type]
        )  # fmt: skip
        return build_retriever(name, comps, rs), snap

    def answerer(self, name: str | None) -> Answerer:
        name = name or "extractive"
        if name == "extractive":
            return self.extractive
        if name not in self.answerer_names():
            from rag.llm.registry import resolve_model

            try:  # any provider:model (ollama:..., openai-compatible:..., openai:...)
                spec = resolve_model(name)
            except ConfigError as e:
                raise ChoiceError(
                    "answerer", f"unknown answerer {name!r}; use extractive or a model: {e}"
                ) from e
            if spec.provider == "gguf" and name != self.settings.local_model:
                # a request must not make the service open files by path
                raise ChoiceError(
                    "answerer",
                    f"{spec.name}: gguf: models are served only as the profile's "
                    "local_model, not named per request",
                )
        from rag.llm.registry import parse_model

        max_tokens = self.settings.local_max_tokens if name == self.settings.local_model else 256
        # named as written, but a gguf: file by its file name: answers never carry a local path
        label = parse_model(name).label
        return LLMAnswerer(self.chat_model(name), max_tokens=max_tokens, name=label)

    # -- operations ----------------------------------------------------------------------------

    def search(
        self, query: str, k: int = 5, retriever: str | None = None, per_paper_cap: int | None = None
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Ranked hits as dicts, and ``{retriever, latency_ms}``."""
        r, snap = self.retriever(retriever, k, per_paper_cap)
        t0 = time.perf_counter()
        hits = r.retrieve(query, k)
        ms = (time.perf_counter() - t0) * 1000
        return [hit_dict(h, snap.titles) for h in hits], {"retriever": r.name, "latency_ms": ms}

    def _retrieve_context(
        self, query: str, k: int | None, retriever: str | None
    ) -> tuple[str, list[Hit], Context, dict[str, float]]:
        s = self.settings
        k = s.k if k is None else k
        r, snap = self.retriever(retriever, k)
        t0 = time.perf_counter()
        hits = r.retrieve(query, k)
        t1 = time.perf_counter()
        ctx = assemble_context(
            hits, order=s.context_order, per_paper_cap=s.per_paper_cap,  # type: ignore[arg-type]
            token_budget=s.context_token_budget, titles=snap.titles,
        )  # fmt: skip
        t2 = time.perf_counter()
        return r.name, hits, ctx, {"retrieval": (t1 - t0) * 1000, "context": (t2 - t1) * 1000}

    def _verdicts(self, answer: Answer, ctx: Context) -> dict[str, Any]:
        # imported here: the evaluation package pulls in pandas and scipy, which an unjudged
        # answer does not need (seconds of a `rag ask`)
        from rag.evaluation.faithfulness import context_text

        j = self.judge().judge_answer(answer.text, context_text(ctx))
        return {
            "status": j.status,
            "judge": j.judge,
            "claims": [
                {
                    "claim": c.claim,
                    "label": c.verdict.label,
                    "score": c.verdict.score,
                    "reason": c.verdict.reason,
                }
                for c in j.claims
            ],  # fmt: skip
        }

    def ask(
        self,
        question: str,
        *,
        k: int | None = None,
        retriever: str | None = None,
        answerer: str | None = None,
        judge: bool = False,
    ) -> AskResult:
        """Retrieve, assemble the numbered context, answer, and optionally judge each claim."""
        events = self.ask_events(question, k=k, retriever=retriever, answerer=answerer, judge=judge)
        result = None
        for kind, payload in events:
            if kind == "result":
                result = payload
        assert result is not None  # ask_events always ends with a result
        return result

    def ask_events(
        self,
        question: str,
        *,
        k: int | None = None,
        retriever: str | None = None,
        answerer: str | None = None,
        judge: bool = False,
    ) -> Iterator[tuple[str, Any]]:
        """``("retrieval", sources)``, then ``("answer", Answer)``, then ``("result", AskResult)``
        (the streaming endpoint sends the first as soon as retrieval is done)."""
        ans = self.answerer(answerer)  # fail on a bad answerer before retrieving
        name, hits, ctx, ms = self._retrieve_context(question, k, retriever)
        partial = AskResult(question, name, hits, ctx, _placeholder(ctx), None, ms)
        yield "retrieval", partial.citations()
        t0 = time.perf_counter()
        answer = ans.answer(question, ctx)
        ms["answer"] = (time.perf_counter() - t0) * 1000
        yield "answer", answer
        verdicts = None
        if judge:
            t0 = time.perf_counter()
            verdicts = self._verdicts(answer, ctx)
            ms["judge"] = (time.perf_counter() - t0) * 1000
        ms["total"] = sum(ms.values())
        yield "result", AskResult(question, name, hits, ctx, answer, verdicts, ms)

    def rewrite(
        self, messages: Sequence[Mapping[str, str]], *, bypass: bool, model: str | None
    ) -> Rewrite:
        """The standalone query for the last message of a conversation."""
        history, last = list(messages[:-1]), messages[-1]["content"]
        llm = LLMRewriter(self.chat_model(model, "rewrite_model")) if model else None
        return rewrite(history, last, bypass=bypass, llm_rewriter=llm)


def _placeholder(ctx: Context) -> Answer:
    return Answer(text="", citations={}, answerer="", refused=False)


def index_dir(settings: LabSettings, serve: ServeSettings) -> Path:
    """Where the served index lives: ``serve.index_dir`` or a cache folder keyed by what shapes
    the base build (profile corpus, chunking, embedder)."""
    if serve.index_dir:
        return paths.resolve(serve.index_dir)
    key = hashlib.sha256(
        json.dumps(
            [settings.manifest_path, settings.paper_ids, settings.max_papers,
             settings.chunk_fields(), settings.embedder],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:12]  # fmt: skip
    return paths.cache_dir("serve", f"{settings.profile}-{key}")


def load_lab(
    settings: LabSettings,
    serve: ServeSettings,
    status: Callable[[str], None] = lambda s: None,
) -> Engine:
    """Build or load the corpus (cached parse), index (cached build), served index and query
    encoder. ``status`` receives "index loading" and "model loading" for ``/ready``.

    The rerank row's reranker, the judge and chat models load on first use (:class:`Engine`): the
    default retriever needs none of them, and expanding e5-small's weights to fp32 takes seconds
    and several hundred MB at its peak.
    """
    from rag.corpus.papers import corpus_papers
    from rag.index.build import index_corpus

    if settings.pdfs:  # a folder of PDFs: its own index, through the pipeline
        from rag.serve.folder_lab import folder_index

        status("index loading")
        served, folder = folder_index(settings, serve)
        status("model loading")
        lab = Engine(settings, served)
        lab.folder = folder
        lab.search("warm up the query encoder", 1)
        return lab
    status("index loading")
    papers, parsed = corpus_papers(
        settings.manifest_path, settings.paper_ids, settings.max_papers,
        pdf_mirror=settings.pdf_mirror,
    )  # fmt: skip
    chunking = settings.chunking()
    base = index_corpus(parsed, chunking, embedder=settings.embedder, show_progress=False)
    titles = {p.arxiv_id: p.title for p in papers}
    served = ServedIndex(index_dir(settings, serve), base, titles, chunking)
    status("model loading")
    lab = Engine(settings, served, load_timeout_s=serve.model_load_timeout_s)
    lab.search("warm up the query encoder", 1)
    return lab
