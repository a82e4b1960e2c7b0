"""Grounded generation: numbered sources in, an answer citing them as ``[n]`` out.

Two parts here, each explicit and measurable (context assembly, the part before them, is
:mod:`rag.answer.context`):

1. **Versioned prompts** (:data:`PROMPT_VERSION`, part of the LLM cache key): answer only from
   the sources, cite every factual sentence, and say :data:`REFUSAL` when the sources lack the
   answer (a sentence :func:`rag.answer.claims.is_refusal` recognises).
2. **Answerers** behind one interface ``answer(question, context) -> Answer``: the model-free
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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from rag.answer.claims import parse_answer, parse_citations, split_sentences
from rag.answer.context import Context
from rag.errors import ConfigError, LLMError
from rag.index.bm25 import Tokenizer, TokenizerSettings
from rag.ir import EmbedderLike
from rag.llm.base import ChatModel, Message

logger = logging.getLogger(__name__)

#: Version of the grounded-answer prompt; changes whenever the prompt text changes.
PROMPT_VERSION = "grounded-v1"
#: What every answerer says when the sources do not hold the answer.
REFUSAL = "The sources do not contain the answer."

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
            (:attr:`rag.answer.claims.ParsedAnswer.status` == "refusal").
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


class ExtractiveAnswerer:
    """Copies the source sentences that best match the question, each with its citation.

    Scoring: every source sentence (``min_words``..``max_words`` words, existing bracket
    citations of the paper removed) is scored by BM25 (Robertson & Zaragoza 2009) of the
    question's terms with the sentence as the document and IDF over the context's sentences,
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``; with an injected embedder the score is the
    cosine of question and sentence vectors instead. Terms are Porter2-stemmed, stopwords and
    question words removed (:class:`rag.index.bm25.Tokenizer`).

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


def answer_each(
    answerers: Mapping[str, Answerer],
    questions: Mapping[str, str],
    contexts: Mapping[str, Context],
    status: dict[str, str],
    *,
    progress: bool = True,
) -> dict[str, dict[str, Answer]]:
    """:func:`answer_all` for every answerer; one whose model fails does not stop the others.

    An answerer whose model call fails for good (:class:`rag.errors.LLMError`: retries exhausted
    on an unreachable or failing API, a rejected key) is left out of the result and its
    ``status[name]`` becomes ``"failed: <reason>"``, so the report shows that row and goes on.
    """
    out: dict[str, dict[str, Answer]] = {}
    for name, answerer in answerers.items():
        try:
            out[name] = answer_all(answerer, questions, contexts, progress=progress)
        except LLMError as e:
            logger.error("answerer %s failed: %s", name, e)
            status[name] = f"failed: {type(e).__name__}: {e}"
    return out
