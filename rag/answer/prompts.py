"""The versioned prompts of the LLM answerers and the one refusal every answerer uses.

A prompt version is part of the LLM cache key: it changes whenever the prompt text changes, so a
cached answer is never served for a different prompt. The grounded prompt asks the model to answer
only from the numbered sources, cite every factual sentence as ``[n]`` and say :data:`REFUSAL`
when the sources lack the answer (a sentence :func:`rag.answer.claims.is_refusal` recognises).
"""

from __future__ import annotations

from rag.answer.context import Context
from rag.answer.grammar import GRAMMAR_VERSION, QUOTE_GRAMMAR_VERSION
from rag.llm.base import Message

#: Version of the grounded-answer prompt; changes whenever the prompt text changes.
PROMPT_VERSION = "grounded-v1"
#: The same prompt decoded under the answer grammar (:mod:`rag.answer.grammar`).
CONSTRAINED_VERSION = f"{PROMPT_VERSION}+{GRAMMAR_VERSION}"
#: The same prompt decoded under the quote grammar (:func:`rag.answer.grammar.quote_grammar`).
QUOTE_VERSION = f"{PROMPT_VERSION}+{QUOTE_GRAMMAR_VERSION}"
#: Version of the closed-book prompt (no sources).
CLOSED_BOOK_VERSION = "closed-book-v1"
#: What every answerer says when the sources do not hold the answer.
REFUSAL = "The sources do not contain the answer."

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


__all__ = [
    "CLOSED_BOOK_PROMPT",
    "CLOSED_BOOK_VERSION",
    "CONSTRAINED_VERSION",
    "PROMPT_VERSION",
    "QUOTE_VERSION",
    "REFUSAL",
    "SYSTEM_PROMPT",
    "build_closed_book_messages",
    "build_messages",
]
