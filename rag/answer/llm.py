"""A chat model answering from the grounded prompt: free, grammar-constrained or closed book.

The model is injected (any :class:`~rag.llm.base.ChatModel`: the local SmolLM2, an API model, a
client of the local test server); it is asked at temperature 0, and the prompt version (with the
grammar version when constrained) enters the cache key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rag.answer.base import Answer, answer_from_completion, make_answer, settings_with
from rag.answer.context import Context
from rag.answer.grammar import GRAMMAR_VERSION, answer_grammar
from rag.answer.prompts import (
    CLOSED_BOOK_VERSION,
    PROMPT_VERSION,
    REFUSAL,
    build_closed_book_messages,
    build_messages,
)
from rag.answer.questions import is_yes_no_question
from rag.llm.base import ChatModel
from rag.llm.errors import UnusableReply
from rag.llm.model import complete_checked


class LLMSettings(BaseModel):
    """How :class:`LLMAnswerer` asks its model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(256, ge=1, le=32768, description="Answer token budget.")
    constrained: bool = Field(
        False,
        description="Decode under rag.answer.grammar.answer_grammar (cited sentences or the "
        "refusal); needs a backend that supports grammars (the local llama.cpp engine).",
    )
    closed_book: bool = Field(False, description="Answer with no sources (the baseline).")
    repeat_penalty: float = Field(
        1.2, ge=1.0, le=2.0, description="llama.cpp repeat penalty under the grammar."
    )
    max_sentences: int = Field(3, ge=1, le=5, description="Sentence cap of the grammar.")


class LLMAnswerer:
    """A chat model answering from the grounded prompt (temperature 0, cached, costed).

    With ``constrained`` the answer is decoded under :func:`rag.answer.grammar.answer_grammar`:
    1..``max_sentences`` sentences, each ending in citations of this prompt's sources, or
    :data:`~rag.answer.prompts.REFUSAL`; "Yes, "/"No, " first and no refusal for a yes/no question
    (:func:`rag.answer.questions.is_yes_no_question`).

    Args:
        chat_model: any injected :class:`~rag.llm.base.ChatModel`.
        settings: :class:`LLMSettings`; its fields may also be given as keywords.
        name: answerer name (default: the model's name).
    """

    def __init__(
        self,
        chat_model: ChatModel,
        settings: LLMSettings | None = None,
        *,
        name: str | None = None,
        **overrides: object,
    ) -> None:
        self.settings = settings_with(LLMSettings, settings, overrides)
        self.chat_model = chat_model
        self.name = name or chat_model.name

    @property
    def shards(self) -> int:
        """Pinned shards :func:`~rag.answer.run.answer_all` may use (the model's, since a call is
        all it does)."""
        return int(getattr(self.chat_model, "shards", 1))

    @property
    def prompt_version(self) -> str:
        """The version string that enters the cache key and the traces."""
        s = self.settings
        base = CLOSED_BOOK_VERSION if s.closed_book else PROMPT_VERSION
        return f"{base}+{GRAMMAR_VERSION}" if s.constrained else base

    def answer(self, question: str, context: Context) -> Answer:
        """Ask the model; usage, cost, latency and cache state come from its Completion."""
        s = self.settings
        if s.closed_book:
            messages = build_closed_book_messages(question)
            numbers: list[int] = []
        else:
            messages = build_messages(question, context)
            numbers = [src.n for src in context.sources]
        kwargs: dict[str, Any] = {}
        if s.constrained:
            kwargs["grammar"] = answer_grammar(
                numbers,
                refusal=REFUSAL,
                max_sentences=s.max_sentences,
                yes_no=is_yes_no_question(question),
            )
            kwargs["repeat_penalty"] = s.repeat_penalty
        try:  # an empty reply is returned as an empty answer, as before, but never cached
            c = complete_checked(
                self.chat_model,
                messages,
                _not_empty,
                temperature=0.0,
                max_tokens=s.max_tokens,
                prompt_version=self.prompt_version,
                **kwargs,
            )
        except UnusableReply:
            return make_answer("", context, self.name, prompt_version=self.prompt_version)
        return answer_from_completion(c, context, self.name, self.prompt_version)


def _not_empty(text: str) -> None:
    """Refuse a reply with no text (the parser check of :func:`complete_checked`)."""
    if not text.strip():
        raise UnusableReply("the model", "an empty answer")


__all__ = ["LLMAnswerer", "LLMSettings"]
