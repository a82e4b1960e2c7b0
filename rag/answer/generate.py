"""Grounded generation: numbered sources in, an answer citing them as ``[n]`` out.

Why this module is long: it holds the one :class:`Answer` record and every answerer that makes
one (extractive by BM25, extractive by judge support, LLM free / grammar-constrained /
quote-constrained / closed book, the decline gate and the post-hoc attribution filter), so they
share one interface and one parser and a notebook A/B swaps only the answerer.

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
import re
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rag.answer.claims import parse_answer, parse_citations
from rag.answer.context import Context
from rag.answer.grammar import GRAMMAR_VERSION, QUOTE_GRAMMAR_VERSION, answer_grammar, quote_grammar
from rag.answer.questions import declarative_form, is_yes_no_question
from rag.answer.support import Span, judge_pairs, support_spans
from rag.errors import ConfigError, LLMError
from rag.index.bm25 import Tokenizer, TokenizerSettings, bm25_scores
from rag.ir import EmbedderLike
from rag.llm.base import ChatModel, Message
from rag.shard import sharded_map
from rag.text.coverage import term_coverage
from rag.text.sentences import split_sentences

logger = logging.getLogger(__name__)

#: Version of the grounded-answer prompt; changes whenever the prompt text changes.
PROMPT_VERSION = "grounded-v1"
#: The same prompt decoded under the answer grammar (:mod:`rag.answer.grammar`).
CONSTRAINED_VERSION = f"{PROMPT_VERSION}+{GRAMMAR_VERSION}"
#: The same prompt decoded under the quote grammar (:func:`rag.answer.grammar.quote_grammar`).
QUOTE_VERSION = f"{PROMPT_VERSION}+{QUOTE_GRAMMAR_VERSION}"
#: Version of the closed-book prompt (no sources).
CLOSED_BOOK_VERSION = "closed-book-v1"
#: Version of the support-based extractive answerer's rules.
SUPPORT_EXTRACTIVE_VERSION = "support-extractive-v1"
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


CLOSED_BOOK_PROMPT = (
    "You answer questions about research papers from what you know; no sources are given.\n"
    "Be brief: at most three sentences. For a yes/no question, start with Yes or No.\n"
    f'If you do not know the answer, reply exactly: "{REFUSAL}" and nothing else.'
)


def build_closed_book_messages(question: str) -> list[Message]:
    """System and user messages of the closed-book baseline (:data:`CLOSED_BOOK_VERSION`)."""
    return [
        {"role": "system", "content": CLOSED_BOOK_PROMPT},
        {"role": "user", "content": f"Question: {question.strip()}"},
    ]


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
        prompt_version: the prompt / rule version that produced it.
        support: the judge's best p(supported) of the question's statement over the context's
            spans, where an answerer or gate computed it (None otherwise).
        trace: what the answerer decided and why (chosen span, gate decision, dropped sentences).
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
    prompt_version: str = ""
    support: float | None = None
    trace: dict[str, Any] = field(default_factory=dict)

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
            for i, raw in enumerate(split_sentences(text, mode="answer")):
                clean, _ = parse_citations(raw)
                n_words = len(clean.split())
                if not s.min_words <= n_words <= s.max_words:
                    continue
                out.append(_Candidate(src.n, i, clean, tuple(self._tok.document(clean))))
        return out

    def _bm25(self, q_terms: list[str], cands: list[_Candidate]) -> np.ndarray:
        s = self.settings
        docs = [c.terms for c in cands]
        return bm25_scores(q_terms, docs, k1=s.k1, b=s.b, idf_variant="lucene")

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
        cover = [term_coverage(q_terms, set(c.terms)) for c in cands]
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
        constrained: decode under :func:`rag.answer.grammar.answer_grammar` (1..3 sentences, each
            ending in citations of this prompt's sources, or :data:`REFUSAL`; "Yes, "/"No, "
            first and no refusal for a yes/no question by
            :func:`rag.answer.questions.is_yes_no_question`, gbnf-v4).
            Needs a model whose backend supports grammars (the local llama.cpp engine).
        closed_book: answer with no sources at all (the closed-book baseline).
        repeat_penalty: llama.cpp repeat penalty for constrained decoding.
        max_sentences: sentence cap of the grammar.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        max_tokens: int = 256,
        name: str | None = None,
        constrained: bool = False,
        closed_book: bool = False,
        repeat_penalty: float = 1.2,
        max_sentences: int = 3,
    ):
        if max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens}: must be >= 1")
        if not 1.0 <= repeat_penalty <= 2.0:
            raise ConfigError(f"repeat_penalty={repeat_penalty}: use 1.0..2.0")
        self.chat_model = chat_model
        self.max_tokens = max_tokens
        self.name = name or chat_model.name
        self.constrained = constrained
        self.closed_book = closed_book
        self.repeat_penalty = repeat_penalty
        self.max_sentences = max_sentences

    @property
    def shards(self) -> int:
        """Pinned shards :func:`answer_all` may use (the model's, since a call is all it does)."""
        return int(getattr(self.chat_model, "shards", 1))

    @property
    def prompt_version(self) -> str:
        """The version string that enters the cache key and the traces."""
        base = CLOSED_BOOK_VERSION if self.closed_book else PROMPT_VERSION
        return f"{base}+{GRAMMAR_VERSION}" if self.constrained else base

    def answer(self, question: str, context: Context) -> Answer:
        """Ask the model; usage, cost, latency and cache state come from its Completion."""
        if self.closed_book:
            messages = build_closed_book_messages(question)
            numbers: list[int] = []
        else:
            messages = build_messages(question, context)
            numbers = [s.n for s in context.sources]
        kwargs: dict[str, Any] = {}
        if self.constrained:
            kwargs["grammar"] = answer_grammar(
                numbers,
                refusal=REFUSAL,
                max_sentences=self.max_sentences,
                yes_no=is_yes_no_question(question),
            )
            kwargs["repeat_penalty"] = self.repeat_penalty
        c = self.chat_model.complete(
            messages,
            temperature=0.0,
            max_tokens=self.max_tokens,
            prompt_version=self.prompt_version,
            **kwargs,
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
            prompt_version=self.prompt_version,
        )


@dataclass(frozen=True, slots=True)
class Quote:
    """One source sentence the quote grammar may copy: ``text [n].``.

    Attributes:
        text: the sentence, whitespace folded, the paper's own ``[12]`` markers and its final
            punctuation removed; cut after ``max_words`` words and ended with " …" when longer.
        truncated: whether the sentence was cut.
    """

    n: int
    text: str
    truncated: bool = False


_SENTENCE_END = " .!?;:,"
#: A whole sentence ends in "." or "!" (closing quotes/brackets allowed): a chunk cut mid-sentence,
#: a heading or a table row does not, and a question is no answer.
_COMPLETE = re.compile(r"[.!][\"'”’)\]]*$")


def _opens_sentence(text: str) -> bool:
    """Whether ``text`` starts with a capital letter (after an opening quote or bracket): a
    lowercase start is the tail of a sentence cut by chunking, and a digit start is nearly always
    a section number glued to the next sentence ("1 Introduction Learning ...") or a table row."""
    first = text.lstrip("\"'“‘([")[:1]
    return first.isalpha() and first.isupper()


def _printable(text: str) -> str:
    """Control characters become spaces; format characters (soft hyphen, zero-width space)
    and lone surrogates are dropped; whitespace is folded."""
    keep = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Cc":
            keep.append(" ")
        elif cat not in ("Cf", "Cs"):
            keep.append(ch)
    return " ".join("".join(keep).split())


def quote_candidates(
    context: Context, *, max_words: int = 30, min_words: int = 4, max_quotes: int = 60
) -> tuple[list[Quote], dict[str, int]]:
    """The sentences of a context's sources that :class:`QuoteAnswerer`'s grammar offers.

    Every source is cut by the package's sentence splitter (:mod:`rag.text.sentences`); a
    sentence is offered when, without the paper's bracket citations, it is whole (starts with a
    capital letter and ends in "." or "!", see :func:`_opens_sentence`), has at
    least ``min_words`` words, and ``<text> [n].`` parses back as one sentence citing ``n`` with
    at least one claim (so every alternative is an answer the metrics read as cited and
    answered, never as a refusal). Longer than ``max_words`` words: cut at a word boundary and
    marked " …". The same text in two sources is offered once (the first source). At most
    ``max_quotes`` sentences, in prompt order.

    Returns:
        The quotes and counts ``{"sentences", "offered", "truncated", "over_cap"}`` for the trace.
    """
    out: list[Quote] = []
    seen: set[str] = set()
    n_sent = n_trunc = n_over = 0
    for src in context.sources:
        for raw in split_sentences(_printable(src.text), mode="paper"):
            n_sent += 1
            clean, _ = parse_citations(raw)
            if not _COMPLETE.search(clean) or not _opens_sentence(clean):
                continue
            body = clean.rstrip(_SENTENCE_END)
            words = body.split()
            if len(words) < min_words:
                continue
            cut = len(words) > max_words
            if cut:
                body = " ".join(words[:max_words]).rstrip(_SENTENCE_END) + " …"
            key = body.lower()
            if key in seen:
                continue
            parsed = parse_answer(f"{body} [{src.n}].").sentences
            if len(parsed) != 1 or parsed[0].citations != (src.n,) or not parsed[0].claims:
                continue
            if len(out) == max_quotes:
                n_over += 1
                continue
            seen.add(key)
            n_trunc += cut
            out.append(Quote(src.n, body, cut))
    counts = {"sentences": n_sent, "offered": len(out), "truncated": n_trunc, "over_cap": n_over}
    return out, counts


class QuoteAnswerer:
    """A chat model that may only answer with verbatim source sentences, each cited.

    The grounded prompt (:data:`PROMPT_VERSION`) is decoded under
    :func:`rag.answer.grammar.quote_grammar` over :func:`quote_candidates`: the answer is the
    refusal or 1..``max_sentences`` source sentences in prompt order, each followed by the
    number of the source it was copied from; for a yes/no question it starts "Yes, " or "No, "
    and cannot refuse. The model's only choices are *which* sentences (and Yes/No, and whether to
    refuse): it cannot write a word of its own.

    What its numbers mean: citation support and faithfulness are high **by construction** (each
    sentence is a verbatim quote, apart from the paper's own citation markers and a " …" cut,
    of the one source it cites), so they measure the judge on verbatim text more than the model.
    The row's informative numbers are the answered rate, negative rejection, answer F1 and
    boolean accuracy: did the model pick sentences that answer, decline when nothing does, and
    say Yes/No correctly.

    Args:
        chat_model: an injected :class:`~rag.llm.base.ChatModel` whose backend supports grammars.
        max_sentences: quotes per answer (1..5).
        max_words: longer sentences are cut at a word boundary after this many words (5..80).
        min_words: shorter sentences are not offered (1..20).
        max_quotes: at most this many sentences offered per question, in prompt order (1..200).
        repeat_penalty: llama.cpp repeat penalty; 1.0 (none) by default, since the grammar
            cannot repeat a sentence and a penalty would only push the choice away from words
            the question and sources share.
        name: answerer name.

    The token budget is the longest answer the grammar allows, in UTF-8 bytes (a token holds at
    least one byte), so a quote is never cut by the token limit.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        max_sentences: int = 2,
        max_words: int = 30,
        min_words: int = 4,
        max_quotes: int = 60,
        repeat_penalty: float = 1.0,
        name: str = "local+quote",
    ) -> None:
        if not 1 <= max_sentences <= 5:
            raise ConfigError(f"max_sentences={max_sentences}: use 1..5")
        if not 5 <= max_words <= 80:
            raise ConfigError(f"max_words={max_words}: use 5..80")
        if not 1 <= min_words <= 20:
            raise ConfigError(f"min_words={min_words}: use 1..20")
        if not 1 <= max_quotes <= 200:
            raise ConfigError(f"max_quotes={max_quotes}: use 1..200")
        if not 1.0 <= repeat_penalty <= 2.0:
            raise ConfigError(f"repeat_penalty={repeat_penalty}: use 1.0..2.0")
        self.chat_model = chat_model
        self.max_sentences = max_sentences
        self.max_words = max_words
        self.min_words = min_words
        self.max_quotes = max_quotes
        self.repeat_penalty = repeat_penalty
        self.name = name
        self.prompt_version = QUOTE_VERSION

    @property
    def shards(self) -> int:
        """Pinned shards :func:`answer_all` may use (the model's, since a call is all it does)."""
        return int(getattr(self.chat_model, "shards", 1))

    def _budget(self, quotes: list[Quote], yes_no: bool) -> int:
        longest = sorted((len(f"{q.text} [{q.n}].".encode()) for q in quotes), reverse=True)
        picked = longest[: self.max_sentences]
        return sum(picked) + len(picked) + (len("Yes, ") if yes_no else 0) + 1

    def answer(self, question: str, context: Context) -> Answer:
        """Ask the model under the quote grammar; no candidate sentence: :data:`REFUSAL`."""
        t0 = time.perf_counter()
        quotes, counts = quote_candidates(
            context, max_words=self.max_words, min_words=self.min_words, max_quotes=self.max_quotes
        )
        yes_no = is_yes_no_question(question)
        trace: dict[str, Any] = {"quotes": counts, "yes_no_question": yes_no}
        if not quotes:
            trace["decision"] = "declined: no source sentence to quote"
            return make_answer(
                REFUSAL,
                context,
                self.name,
                latency_s=time.perf_counter() - t0,
                prompt_version=self.prompt_version,
                trace=trace,
            )
        grammar = quote_grammar(
            [(q.text, q.n) for q in quotes],
            refusal=REFUSAL,
            max_sentences=self.max_sentences,
            yes_no=yes_no,
        )
        c = self.chat_model.complete(
            build_messages(question, context),
            temperature=0.0,
            max_tokens=self._budget(quotes, yes_no),
            prompt_version=self.prompt_version,
            grammar=grammar,
            repeat_penalty=self.repeat_penalty,
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
            prompt_version=self.prompt_version,
            trace=trace,
        )


def resolve_threshold(judge: Any, threshold: float) -> float:
    """``threshold`` itself, or the judge's own decision threshold when it is negative.

    The offline judge's threshold was chosen by cross-validation on SciFact ``judge_train``
    (never on the corpus gold), so "-1: the judge's own" is a choice made before any dev result.

    Raises:
        ConfigError: a negative threshold with a judge that exposes none, or one above 1.
    """
    if threshold > 1.0:
        raise ConfigError(f"support threshold {threshold}: must be <= 1 (or < 0: the judge's own)")
    if threshold >= 0:
        return threshold
    fitted = getattr(judge, "fitted", None)
    if fitted is None or getattr(fitted, "threshold", None) is None:
        raise ConfigError(
            f"support threshold {threshold} means 'the judge's own', but {type(judge).__name__} "
            "exposes no fitted threshold; pass a value in [0, 1]"
        )
    return float(fitted.threshold)


def _span_text(span: Span) -> str:
    return span.text.rstrip(" .!?;:,")


class SupportExtractiveAnswerer:
    """Copies the shortest source span the judge says supports the question's statement.

    Rules (:data:`SUPPORT_EXTRACTIVE_VERSION`), fixed before any dev result was seen:

    1. The statement is the question's :func:`~rag.answer.questions.declarative_form`; every
       source sentence and clause is scored by the injected judge, p(supported | span)
       (:func:`rag.answer.support.support_spans`).
    2. **Decline** only when no span reaches ``threshold`` (negative: the judge's own
       threshold, :func:`resolve_threshold`).
    3. Otherwise the answer is the best span with its citation, ``Span [n].``; ties go to the
       shorter span, so a clause beats its sentence when the judge scores it as high.
    4. **Yes/no questions** (:func:`~rag.answer.questions.is_yes_no_question`): "Yes, <span> [n]."
       when a span reaches the threshold; otherwise, when the best span still shares at least
       half the question's content terms (the sources speak to the statement but do not support
       it), "No, <span> [n]."; otherwise decline.

    Faithful by construction apart from the added Yes/No: every span is copied verbatim.
    """

    def __init__(
        self,
        judge: Any,
        *,
        threshold: float = -1.0,
        max_spans: int = 1,
        name: str = "extractive",
    ) -> None:
        if not 1 <= max_spans <= 3:
            raise ConfigError(f"max_spans={max_spans}: use 1..3")
        self.judge = judge
        self.threshold = resolve_threshold(judge, threshold)
        self.max_spans = max_spans
        self.name = name
        self._tok = Tokenizer(TokenizerSettings(stemmer="english"))

    def _coverage(self, question: str, span: str) -> float:
        q = sorted(set(self._tok.query(question)))
        return term_coverage(q, set(self._tok.document(span)))

    def answer(self, question: str, context: Context) -> Answer:
        """The best supported span(s) with citations, a Yes/No, or :data:`REFUSAL`."""
        t0 = time.perf_counter()
        statement = declarative_form(question)
        spans = support_spans(self.judge, statement, context)
        best = spans[0] if spans else None
        passed = [sp for sp in spans if sp.score >= self.threshold]
        yes_no = is_yes_no_question(question)
        trace: dict[str, Any] = {
            "statement": statement,
            "threshold": self.threshold,
            "yes_no_question": yes_no,
            "best_span": None
            if best is None
            else {"n": best.n, "text": best.text, "score": best.score, "label": best.label},
        }
        chosen: list[Span] = []
        prefix = ""
        if passed:
            seen: set[tuple[int, int]] = set()
            for sp in passed:  # at most one span per source sentence
                if (sp.n, sp.position) in seen:
                    continue
                seen.add((sp.n, sp.position))
                chosen.append(sp)
                if len(chosen) == self.max_spans:
                    break
            prefix = "Yes, " if yes_no else ""
        elif yes_no and best is not None and self._coverage(question, best.text) >= 0.5:
            chosen, prefix = [best], "No, "
        if not chosen:
            text = REFUSAL
            trace["decision"] = "declined: no span reaches the threshold"
        else:
            parts = [f"{_span_text(sp)} [{sp.n}]." for sp in chosen]
            text = prefix + " ".join(parts)
            trace["decision"] = (prefix.strip(" ,").lower() or "answered") + (
                "" if passed else ": sources speak to the statement but do not support it"
            )
        return make_answer(
            text,
            context,
            self.name,
            latency_s=time.perf_counter() - t0,
            prompt_version=SUPPORT_EXTRACTIVE_VERSION,
            support=best.score if best is not None else None,
            trace=trace,
        )


class GatedAnswerer:
    """Declines without calling the inner answerer when no source span supports the question.

    The gate is rule 2 of :class:`SupportExtractiveAnswerer` (same judge, same statement, same
    threshold), stated before any dev result: a model that never declines by itself is made to
    decline when retrieval brought nothing the judge finds supporting. A declined question costs
    no model call.
    """

    def __init__(self, inner: Any, judge: Any, *, threshold: float = -1.0, name: str = "") -> None:
        self.inner = inner
        self.judge = judge
        self.threshold = resolve_threshold(judge, threshold)
        self.name = name or f"{inner.name}+gate"

    def answer(self, question: str, context: Context) -> Answer:
        """:data:`REFUSAL` below the threshold, else the inner answer (with its support noted)."""
        t0 = time.perf_counter()
        statement = declarative_form(question)
        spans = support_spans(self.judge, statement, context)
        best = spans[0].score if spans else None
        trace = {"statement": statement, "threshold": self.threshold, "support": best}
        if best is None or best < self.threshold:
            trace["decision"] = "declined by the gate"
            return make_answer(
                REFUSAL,
                context,
                self.name,
                latency_s=time.perf_counter() - t0,
                prompt_version=f"gate+{getattr(self.inner, 'prompt_version', '')}",
                support=best,
                trace=trace,
            )
        a = self.inner.answer(question, context)
        trace["decision"] = "passed to the answerer"
        return replace(
            a,
            answerer=self.name,
            support=best,
            prompt_version=f"gate+{a.prompt_version}",
            trace={**a.trace, **trace},
        )


def attribution_filter(
    answers: Mapping[str, Answer],
    contexts: Mapping[str, Context],
    judge: Any,
    *,
    name: str,
) -> dict[str, Answer]:
    """Post-hoc attribution filter: drop answer sentences whose claims the judge does not support.

    Every claim-bearing sentence of an answer is kept only when the judge labels all its claims
    supported against the whole context (the same check the faithfulness judge makes); an
    answer left without a claim becomes :data:`REFUSAL`. Sentences without claims (a bare
    "Yes.") are kept. The dropped sentences are listed in the answer's trace.
    """
    out: dict[str, Answer] = {}
    for qid, a in answers.items():
        ctx = contexts[qid]
        premise = "\n\n".join(ctx.source_texts[n] for n in sorted(ctx.source_texts))
        raw = split_sentences(a.text, mode="answer")
        parsed = [parse_answer(r).sentences for r in raw]
        claims = [c for sents in parsed for s in sents for c in s.claims]
        verdicts = iter(judge_pairs(judge, [(c, premise) for c in claims]))
        kept, dropped = [], []
        for r, sents in zip(raw, parsed, strict=True):
            labels = [next(verdicts).supported for s in sents for _ in s.claims]
            ok = all(labels)
            (kept if ok else dropped).append(r)
        text = " ".join(kept) if kept else REFUSAL
        if not parse_answer(text).claims and not parse_answer(text).has_refusal and dropped:
            text = REFUSAL
        new = make_answer(
            text,
            ctx,
            name,
            tokens_in=a.tokens_in,
            tokens_out=a.tokens_out,
            cost_usd=a.cost_usd,
            latency_s=a.latency_s,
            cached=a.cached,
            prompt_version=f"{a.prompt_version}+filter",
            support=a.support,
            trace={**a.trace, "filter_dropped": dropped},
        )
        out[qid] = new
    return out


def answer_all(
    answerer: Answerer,
    questions: Mapping[str, str],
    contexts: Mapping[str, Context],
    *,
    progress: bool = True,
) -> dict[str, Answer]:
    """Answer every question from its precomputed context, in the order of ``questions``.

    An answerer whose only work is local-model calls says how many pinned shards it may use
    (``shards``: :attr:`rag.llm.model.CachedChatModel.shards`); its questions are then dealt to
    them by :func:`rag.shard.sharded_map` (fixed shards, so the answers do not depend on
    timing). Others answer in order in the calling thread.

    Raises:
        ConfigError: a question has no context (contexts are built once, before any answerer).
    """
    missing = sorted(set(questions) - set(contexts))
    if missing:
        raise ConfigError(
            f"no context for {len(missing)} question(s), e.g. {missing[:3]}; build contexts for "
            "every question first (build_contexts)"
        )
    qids = list(questions)
    answers = sharded_map(
        lambda q: answerer.answer(questions[q], contexts[q]),
        qids,
        getattr(answerer, "shards", 1),
        desc=answerer.name,
        progress=progress,
    )
    return dict(zip(qids, answers, strict=True))


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
