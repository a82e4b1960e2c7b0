"""Grounded generation: numbered sources in, an answer citing them as ``[n]`` out.

Three parts, each explicit and measurable:

1. **Context assembly** (:func:`assemble_context`). Hits are ranked by score (ties by chunk id),
   capped per paper, then packed first-fit into a token budget: a source whose rendered block
   does not fit the remaining budget is dropped and counted, and packing continues with the next.
   The kept sources are then placed either in rank order (``"score"``) or with the strongest at
   both ends (``"edges"``: ranks 1, 3, 5, ... from the front and 2, 4, ... from the back), since
   models use the beginning and end of a long context best and the middle worst (Liu et al.,
   2023, "Lost in the Middle: How Language Models Use Long Contexts", TACL 2024). Sources are
   numbered ``[1]..[k]`` in the order the model reads them, and the context keeps ``n -> chunk id``.
2. **Versioned prompts** (:data:`PROMPT_VERSION`, part of the LLM cache key): answer only from
   the sources, cite every factual sentence, and say :data:`REFUSAL` when the sources lack the
   answer (a sentence :func:`rag.claims.is_refusal` recognises).
3. **Answerers** behind one interface ``answer(question, context) -> Answer``: the model-free
   :class:`ExtractiveAnswerer` and :class:`LLMAnswerer` over any injected
   :class:`~rag.llm.base.ChatModel`. :func:`answer_all` runs one answerer over contexts computed
   once, so an A/B between answerers holds retrieval constant.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from rag.bm25 import Tokenizer, TokenizerSettings
from rag.claims import parse_answer, parse_citations, split_sentences
from rag.errors import ConfigError
from rag.llm.base import ChatModel, Message
from rag.types import Hit

logger = logging.getLogger(__name__)

#: Version of the grounded-answer prompt; changes whenever the prompt text changes.
PROMPT_VERSION = "grounded-v1"
#: What every answerer says when the sources do not hold the answer.
REFUSAL = "The sources do not contain the answer."

Order = Literal["score", "edges"]
TokenCounter = Callable[[str], int]


def chars4(text: str) -> int:
    """Default token count: ``ceil(len(text) / 4)`` (OpenAI's rule of thumb for English)."""
    return math.ceil(len(text) / 4)


# --------------------------------------------------------------------------------------------
# Context assembly


@dataclass(frozen=True, slots=True)
class Source:
    """One numbered source as shown to the answerer.

    Attributes:
        n: the citation number (1-based position in the prompt).
        rank: 1-based retrieval rank among the hits (after sorting by score).
        n_tokens: tokens of :meth:`render`, by the context's counter.
    """

    n: int
    rank: int
    chunk_id: str
    paper_id: str
    title: str
    page: int
    section: str
    text: str
    score: float
    n_tokens: int

    def header(self) -> str:
        """``[n] Title (arXiv:id, p. 3, section: Method)``."""
        where = f"arXiv:{self.paper_id}, p. {self.page}"
        if self.section:
            where += f", section: {self.section}"
        title = self.title or "(untitled)"
        return f"[{self.n}] {title} ({where})"

    def render(self) -> str:
        """Header line plus the chunk text."""
        return f"{self.header()}\n{self.text.strip()}"


@dataclass(frozen=True, slots=True)
class Context:
    """The numbered sources of one question plus what assembly dropped.

    Attributes:
        sources: kept sources, in prompt order (``sources[i].n == i + 1``).
        order: "score" or "edges".
        token_budget: the budget the sources were packed into.
        n_hits: hits received.
        n_dropped_cap: hits dropped by the per-paper cap.
        n_dropped_budget: hits dropped because they did not fit the token budget.
    """

    sources: tuple[Source, ...]
    order: str
    token_budget: int
    n_hits: int
    n_dropped_cap: int = 0
    n_dropped_budget: int = 0

    @property
    def citation_map(self) -> dict[int, str]:
        """``{n: chunk_id}`` for every source."""
        return {s.n: s.chunk_id for s in self.sources}

    @property
    def source_texts(self) -> dict[int, str]:
        """``{n: chunk text}``, the shape :mod:`rag.citations` scores citations against."""
        return {s.n: s.text for s in self.sources}

    @property
    def n_tokens(self) -> int:
        """Tokens of all rendered sources."""
        return sum(s.n_tokens for s in self.sources)

    def render(self) -> str:
        """All sources, separated by blank lines, as they appear in the prompt."""
        return "\n\n".join(s.render() for s in self.sources)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (contexts are stored once and shared by all answerers)."""
        d = asdict(self)
        d["sources"] = [asdict(s) for s in self.sources]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Context:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "sources": tuple(Source(**s) for s in d["sources"])})


class ContextSettings(BaseModel):
    """How retrieved hits become the numbered sources of a prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Order = Field(
        "score", description="'score': rank order; 'edges': strongest at start and end."
    )
    per_paper_cap: int | None = Field(
        None, ge=1, le=100, description="At most this many sources per paper (None: no cap)."
    )
    token_budget: int = Field(
        1500, ge=1, le=200_000, description="Tokens all rendered sources may take together."
    )


def _source(n: int, rank: int, h: Hit, titles: Mapping[str, str], n_tokens: int) -> Source:
    title = titles.get(h.paper_id, "")
    return Source(n, rank, h.chunk_id, h.paper_id, title, h.page, h.section, h.text, h.score,
                  n_tokens)  # fmt: skip


def edge_positions(k: int) -> list[int]:
    """Prompt position (0-based) of each of ``k`` ranks under "edges" ordering.

    Rank 1 goes first, rank 2 last, rank 3 second, rank 4 second to last, and so on, so the
    weakest sources end up in the middle: for k=5 the prompt reads ranks 1, 3, 5, 4, 2.
    """
    front, back = 0, k - 1
    pos = []
    for r in range(k):
        if r % 2 == 0:
            pos.append(front)
            front += 1
        else:
            pos.append(back)
            back -= 1
    return pos


def assemble_context(
    hits: Sequence[Hit],
    *,
    order: Order = "score",
    per_paper_cap: int | None = None,
    token_budget: int = 1500,
    count_tokens: TokenCounter = chars4,
    titles: Mapping[str, str] | None = None,
) -> Context:
    """Numbered sources for one question (module docstring, part 1).

    Args:
        hits: retrieval hits, in any order (they are re-sorted by score, ties by chunk id).
        order: "score" or "edges".
        per_paper_cap: keep at most this many hits per paper (None: no cap).
        token_budget: total tokens of the rendered sources; a source that would overflow it is
            dropped and counted, and smaller later sources may still fit.
        count_tokens: tokenizer used for the budget (default ``ceil(chars / 4)``).
        titles: ``{paper_id: title}``; a missing title renders as "(untitled)".

    Raises:
        ConfigError: unknown order, cap < 1 or budget < 1.
    """
    if order not in ("score", "edges"):
        raise ConfigError(f"order={order!r}: use 'score' or 'edges'")
    if per_paper_cap is not None and per_paper_cap < 1:
        raise ConfigError(f"per_paper_cap={per_paper_cap}: must be >= 1 or None")
    if token_budget < 1:
        raise ConfigError(f"token_budget={token_budget}: must be >= 1")
    titles = titles or {}
    ranked = sorted(hits, key=lambda h: (-h.score, h.chunk_id))
    per_paper: Counter[str] = Counter()
    n_cap = n_budget = 0
    kept: list[tuple[int, Hit, int]] = []
    used = 0
    for rank, h in enumerate(ranked, start=1):
        if per_paper_cap is not None and per_paper[h.paper_id] >= per_paper_cap:
            n_cap += 1
            continue
        # Counted with the rank-order number; "edges" may renumber it, which moves a digit or so.
        probe = _source(len(kept) + 1, rank, h, titles, 0)
        cost = count_tokens(probe.render())
        if used + cost > token_budget:
            n_budget += 1
            continue
        used += cost
        per_paper[h.paper_id] += 1
        kept.append((rank, h, cost))
    positions = edge_positions(len(kept)) if order == "edges" else list(range(len(kept)))
    in_prompt_order = [item for _, item in sorted(zip(positions, kept, strict=True))]
    sources = []
    for i, (rank, h, cost) in enumerate(in_prompt_order, start=1):
        sources.append(_source(i, rank, h, titles, cost))
    if n_budget:
        logger.debug("context: %d of %d hits dropped by the token budget", n_budget, len(hits))
    return Context(tuple(sources), order, token_budget, len(hits), n_cap, n_budget)


def build_contexts(
    hits_by_qid: Mapping[str, Sequence[Hit]],
    settings: ContextSettings | None = None,
    *,
    count_tokens: TokenCounter = chars4,
    titles: Mapping[str, str] | None = None,
) -> dict[str, Context]:
    """:func:`assemble_context` for every question, with one settings object."""
    s = settings or ContextSettings()
    return {
        qid: assemble_context(
            hits,
            order=s.order,
            per_paper_cap=s.per_paper_cap,
            token_budget=s.token_budget,
            count_tokens=count_tokens,
            titles=titles,
        )
        for qid, hits in hits_by_qid.items()
    }


# --------------------------------------------------------------------------------------------
# Prompts

SYSTEM_PROMPT = (
    "You answer questions about research papers using only the numbered sources you are given.\n"
    "Rules:\n"
    "1. Use only facts stated in the sources; never add outside knowledge.\n"
    "2. End every sentence that states a fact with the number of the source(s) supporting it, "
    "in square brackets, e.g. [1] or [2][3].\n"
    "3. If the sources do not contain the answer, reply exactly: "
    f'"{REFUSAL}" and nothing else.\n'
    "4. Be brief: at most three sentences. For a yes/no question, start with Yes or No."
)


def build_messages(question: str, context: Context) -> list[Message]:
    """System and user messages of the grounded prompt (:data:`PROMPT_VERSION`)."""
    user = (
        f"Sources:\n\n{context.render() or '(no sources)'}\n\n"
        f"Question: {question.strip()}\n\n"
        "Answer using only the sources above, citing them as [n]."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


# --------------------------------------------------------------------------------------------
# Answers


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer with its citations resolved to chunk ids and its usage.

    Attributes:
        citations: ``{n: chunk_id}`` for every cited number that is a source of the context.
        unknown_citations: cited numbers that are not sources (hallucinated ids).
        refused: the answer makes no claim and says the sources lack the answer
            (:attr:`rag.claims.ParsedAnswer.status` == "refusal").
    """

    text: str
    citations: dict[int, str]
    answerer: str
    refused: bool
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    unknown_citations: tuple[int, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (citation keys become strings in JSON)."""
        return asdict(self)


def make_answer(text: str, context: Context, answerer: str, **usage: Any) -> Answer:
    """Parse ``text`` and resolve its ``[n]`` citations against ``context``."""
    parsed = parse_answer(text)
    cmap = context.citation_map
    cited = sorted({n for s in parsed.sentences for n in s.citations})
    return Answer(
        text=text,
        citations={n: cmap[n] for n in cited if n in cmap},
        answerer=answerer,
        refused=parsed.status == "refusal",
        unknown_citations=tuple(n for n in cited if n not in cmap),
        **usage,
    )


class Answerer(Protocol):
    """Anything that answers a question from a context."""

    name: str

    def answer(self, question: str, context: Context) -> Answer: ...


class ExtractiveSettings(BaseModel):
    """The model-free answerer: which sentences it copies and when it declines."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_sentences: int = Field(2, ge=1, le=3, description="Sentences stitched into the answer.")
    min_coverage: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Decline unless the best sentence holds this share of the question's "
        "distinct content terms (a fixed lexical rule, not tuned on gold labels).",
    )
    min_words: int = Field(5, ge=1, le=50, description="Ignore shorter source sentences.")
    max_words: int = Field(80, ge=5, le=500, description="Ignore longer source sentences.")
    k1: float = Field(1.2, ge=0.0, le=10.0, description="BM25 term-frequency saturation.")
    b: float = Field(0.75, ge=0.0, le=1.0, description="BM25 length normalisation.")


@dataclass(frozen=True, slots=True)
class _Candidate:
    n: int
    position: int
    text: str
    terms: tuple[str, ...]


class EmbedderLike(Protocol):
    """The part of :class:`rag.embed.Embedder` the extractive answerer uses."""

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...


class ExtractiveAnswerer:
    """Copies the source sentences that best match the question, each with its citation.

    Scoring: every source sentence (``min_words``..``max_words`` words, existing bracket
    citations of the paper removed) is scored by BM25 (Robertson & Zaragoza 2009) of the
    question's terms with the sentence as the document and IDF over the context's sentences,
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``; with an injected embedder the score is the
    cosine of question and sentence vectors instead. Terms are Porter2-stemmed, stopwords and
    question words removed (:class:`rag.bm25.Tokenizer`).

    Declining: the answer is :data:`REFUSAL` unless the best sentence contains at least
    ``min_coverage`` of the question's distinct terms. The 0.5 default is a fixed a-priori rule
    ("at least half of what the question asks about is mentioned"), chosen without looking at
    the gold labels, so negative rejection measured on gold is not fitted to it. Only sentences
    that pass the same rule are stitched. Ties break by source number, then sentence position.

    Faithful by construction: every sentence is copied verbatim (whitespace aside) from the
    source it cites.
    """

    def __init__(
        self,
        settings: ExtractiveSettings | None = None,
        *,
        embedder: EmbedderLike | None = None,
        name: str = "extractive",
    ) -> None:
        self.settings = settings or ExtractiveSettings()
        self.embedder = embedder
        self.name = name
        self._tok = Tokenizer(TokenizerSettings(stemmer="english"))

    def _candidates(self, context: Context) -> list[_Candidate]:
        s = self.settings
        out = []
        for src in context.sources:
            text = re.sub(r"\s+", " ", src.text).strip()
            for i, raw in enumerate(split_sentences(text)):
                clean, _ = parse_citations(raw)
                n_words = len(clean.split())
                if not s.min_words <= n_words <= s.max_words:
                    continue
                out.append(_Candidate(src.n, i, clean, tuple(self._tok.document(clean))))
        return out

    def _bm25(self, q_terms: list[str], cands: list[_Candidate]) -> np.ndarray:
        s = self.settings
        n = len(cands)
        df: Counter[str] = Counter(t for c in cands for t in set(c.terms))
        avg = sum(len(c.terms) for c in cands) / n or 1.0
        scores = np.zeros(n)
        for j, c in enumerate(cands):
            tf = Counter(c.terms)
            norm = s.k1 * (1 - s.b + s.b * len(c.terms) / avg)
            for t in set(q_terms):
                if tf[t]:
                    idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                    scores[j] += idf * tf[t] * (s.k1 + 1) / (tf[t] + norm)
        return scores

    def score(self, question: str, context: Context) -> list[tuple[float, float, _Candidate]]:
        """``(score, coverage, sentence)`` for every candidate, best first."""
        cands = self._candidates(context)
        q_terms = sorted(set(self._tok.query(question)))
        if not cands or not q_terms:
            return []
        if self.embedder is not None:
            q = np.asarray(self.embedder.encode_queries([question]))[0]
            m = np.asarray(self.embedder.encode_passages([c.text for c in cands]))
            scores = m @ q
        else:
            scores = self._bm25(q_terms, cands)
        cover = [len(set(q_terms) & set(c.terms)) / len(q_terms) for c in cands]
        rows = [
            (round(float(sc), 12), cv, c) for sc, cv, c in zip(scores, cover, cands, strict=True)
        ]
        rows.sort(key=lambda r: (-r[0], r[2].n, r[2].position))
        return rows

    def answer(self, question: str, context: Context) -> Answer:
        """The top sentences with their citations, or :data:`REFUSAL`."""
        t0 = time.perf_counter()
        s = self.settings
        chosen = [c for _, cv, c in self.score(question, context) if cv >= s.min_coverage]
        chosen = chosen[: s.max_sentences]
        if not chosen:
            text = REFUSAL
        else:
            text = " ".join(f"{c.text.rstrip(' .!?;:')} [{c.n}]." for c in chosen)
        return make_answer(text, context, self.name, latency_s=time.perf_counter() - t0)


class LLMAnswerer:
    """A chat model answering from the grounded prompt (temperature 0, cached, costed).

    Args:
        chat_model: any injected :class:`~rag.llm.base.ChatModel` (local SmolLM2, API models,
            or a client of the local test server).
        max_tokens: answer budget.
        name: answerer name (default: the model's name).
    """

    def __init__(self, chat_model: ChatModel, *, max_tokens: int = 256, name: str | None = None):
        if max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens}: must be >= 1")
        self.chat_model = chat_model
        self.max_tokens = max_tokens
        self.name = name or chat_model.name

    def answer(self, question: str, context: Context) -> Answer:
        """Ask the model; usage, cost, latency and cache state come from its Completion."""
        c = self.chat_model.complete(
            build_messages(question, context),
            temperature=0.0,
            max_tokens=self.max_tokens,
            prompt_version=PROMPT_VERSION,
        )
        return make_answer(
            c.text.strip(),
            context,
            self.name,
            tokens_in=c.input_tokens,
            tokens_out=c.output_tokens,
            cost_usd=c.cost_usd,
            latency_s=c.latency_s,
            cached=c.cached,
        )


def answer_all(
    answerer: Answerer,
    questions: Mapping[str, str],
    contexts: Mapping[str, Context],
    *,
    progress: bool = True,
) -> dict[str, Answer]:
    """Answer every question from its precomputed context, in the order of ``questions``.

    Raises:
        ConfigError: a question has no context (contexts are built once, before any answerer).
    """
    missing = sorted(set(questions) - set(contexts))
    if missing:
        raise ConfigError(
            f"no context for {len(missing)} question(s), e.g. {missing[:3]}; build contexts for "
            "every question first (build_contexts)"
        )
    out = {}
    for qid in tqdm(questions, desc=answerer.name, disable=not progress):
        out[qid] = answerer.answer(questions[qid], contexts[qid])
    return out
