"""The quote answerer: a chat model that may only answer with verbatim, cited source sentences.

:func:`quote_candidates` chooses the sentences a context offers; :class:`QuoteAnswerer` decodes
the grounded prompt under :func:`rag.answer.grammar.quote_grammar` over them, so the model's only
choices are *which* sentences (and Yes/No, and whether to refuse).
"""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag.answer.base import Answer, answer_from_completion, make_answer, settings_with
from rag.answer.claims import parse_answer, parse_citations
from rag.answer.context import Context
from rag.answer.grammar import quote_grammar
from rag.answer.prompts import QUOTE_VERSION, REFUSAL, build_messages
from rag.answer.questions import is_yes_no_question
from rag.llm.base import ChatModel
from rag.text.sentences import split_sentences


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

    Every source is cut by the package's sentence splitter in its ``"paper"`` mode
    (:func:`rag.text.sentences.split_sentences`); a sentence is offered when, without the paper's
    bracket citations, it is whole (starts with a capital letter and ends in "." or "!", see
    :func:`_opens_sentence`), has at least ``min_words`` words, and ``<text> [n].`` parses back as
    one sentence citing ``n`` with at least one claim (so every alternative is an answer the
    metrics read as cited and answered, never as a refusal). Longer than ``max_words`` words: cut
    at a word boundary and marked " …". The same text in two sources is offered once (the first
    source). At most ``max_quotes`` sentences, in prompt order.

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


class QuoteSettings(BaseModel):
    """Which sentences :class:`QuoteAnswerer` offers and how many it may copy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_sentences: int = Field(2, ge=1, le=5, description="Quotes per answer.")
    max_words: int = Field(
        30, ge=5, le=80, description="Longer sentences are cut at a word boundary after this."
    )
    min_words: int = Field(4, ge=1, le=20, description="Shorter sentences are not offered.")
    max_quotes: int = Field(
        60, ge=1, le=200, description="At most this many sentences offered, in prompt order."
    )
    repeat_penalty: float = Field(
        1.0,
        ge=1.0,
        le=2.0,
        description="llama.cpp repeat penalty; none by default, since the grammar cannot repeat "
        "a sentence and a penalty would only push the choice away from words the question and "
        "sources share.",
    )


class QuoteAnswerer:
    """A chat model that may only answer with verbatim source sentences, each cited.

    The grounded prompt (:data:`~rag.answer.prompts.PROMPT_VERSION`) is decoded under
    :func:`rag.answer.grammar.quote_grammar` over :func:`quote_candidates`: the answer is the
    refusal or 1..``max_sentences`` source sentences in prompt order, each followed by the
    number of the source it was copied from; for a yes/no question it starts "Yes, " or "No, "
    and cannot refuse. The model cannot write a word of its own.

    What its numbers mean: citation support and faithfulness are high **by construction** (each
    sentence is a verbatim quote, apart from the paper's own citation markers and a " …" cut,
    of the one source it cites), so they measure the judge on verbatim text more than the model.
    The row's informative numbers are the answered rate, negative rejection, answer F1 and
    boolean accuracy: did the model pick sentences that answer, decline when nothing does, and
    say Yes/No correctly.

    The token budget is the longest answer the grammar allows, in UTF-8 bytes (a token holds at
    least one byte), so a quote is never cut by the token limit.

    Args:
        chat_model: an injected :class:`~rag.llm.base.ChatModel` whose backend supports grammars.
        settings: :class:`QuoteSettings`; its fields may also be given as keywords.
        name: answerer name.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        settings: QuoteSettings | None = None,
        *,
        name: str = "local+quote",
        **overrides: object,
    ) -> None:
        self.settings = settings_with(QuoteSettings, settings, overrides)
        self.chat_model = chat_model
        self.name = name
        self.prompt_version = QUOTE_VERSION

    @property
    def shards(self) -> int:
        """Pinned shards :func:`~rag.answer.run.answer_all` may use (the model's, since a call is
        all it does)."""
        return int(getattr(self.chat_model, "shards", 1))

    def _budget(self, quotes: list[Quote], yes_no: bool) -> int:
        longest = sorted((len(f"{q.text} [{q.n}].".encode()) for q in quotes), reverse=True)
        picked = longest[: self.settings.max_sentences]
        return sum(picked) + len(picked) + (len("Yes, ") if yes_no else 0) + 1

    def answer(self, question: str, context: Context) -> Answer:
        """Ask the model under the quote grammar; no candidate sentence: the refusal."""
        t0 = time.perf_counter()
        s = self.settings
        quotes, counts = quote_candidates(
            context, max_words=s.max_words, min_words=s.min_words, max_quotes=s.max_quotes
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
            max_sentences=s.max_sentences,
            yes_no=yes_no,
        )
        c = self.chat_model.complete(
            build_messages(question, context),
            temperature=0.0,
            max_tokens=self._budget(quotes, yes_no),
            prompt_version=self.prompt_version,
            grammar=grammar,
            repeat_penalty=s.repeat_penalty,
        )
        return answer_from_completion(c, context, self.name, self.prompt_version, trace=trace)


__all__ = ["Quote", "QuoteAnswerer", "QuoteSettings", "quote_candidates"]
