"""Conversational query rewriting: a follow-up question plus its history → a standalone query.

A follow-up such as "How is this model trained?" retrieves poorly on its own: the entity it
refers to lives in an earlier turn. Rewriting puts it back before retrieval (the "query
rewriting"/"question condensing" step of conversational RAG; Vakulenko et al., "Question
Rewriting for Conversational Question Answering", WSDM 2021).

**When a message is rewritten** (:func:`skip_reason`, the same rule for every rewriter): never when
there is no earlier user turn, never when the client asks to bypass rewriting, and never when the
message is *self-contained*, which here means it contains none of the referring expressions of
:data:`REFERENCE_RE` (personal pronouns *it/its/they/them/their* and demonstrative phrases such as
*this model*, *these methods*, *the same approach*, *the former/latter*). A message without one has
nothing to resolve, so rewriting it could only drift away from what the user typed.

**The rule rewriter** (:func:`rule_rewrite`, no model) resolves every referring expression to the
*antecedent*: the first name-like token (:func:`name_tokens`) of the most recent earlier user turn
that has one; names are what follow-ups point back to ("InferSent", "CoVe", "BM25"). With no name
in the history it appends the keywords of the previous user turn instead, so retrieval at least
sees its topic. **The LLM rewriter** (:class:`LLMRewriter`) asks an injected chat model with a
versioned prompt and falls back, visibly, to the message itself when the reply is unusable.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag.llm.base import ChatModel, Message
from rag.retrieval.variants import keyword_variant

log = logging.getLogger(__name__)

#: Bump when the rewrite prompt text changes (part of the LLM cache key).
REWRITE_PROMPT_VERSION = "rewrite-v1"

_NOUNS = (
    "model|models|method|methods|approach|approaches|system|systems|architecture|architectures|"
    "technique|techniques|framework|frameworks|paper|papers|work|encoder|encoders|network|"
    "networks|algorithm|algorithms|dataset|datasets|benchmark|benchmarks|one|ones|variant|"
    "retriever|retrievers|embeddings|vectors|representations"
)
#: Referring expressions a follow-up uses for something named earlier.
REFERENCE_RE = re.compile(
    rf"\b(?:(?:this|that|these|those|the\s+same|the\s+above|said)\s+(?:{_NOUNS})"
    r"|the\s+(?:former|latter)|it|its|they|them|their)\b",
    re.IGNORECASE,
)
#: Acronyms too generic to be what a follow-up refers to.
GENERIC_NAMES = frozenset(
    "QA NLP NLI LSTM LSTMs RNN RNNs CNN CNNs MT IR LLM LLMs GPU GPUs CPU F1 AI ML API SOTA "
    "TF-IDF BLEU ROUGE EM MRR MAP URL PDF OOV".split()
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-]*[A-Za-z0-9]")


def name_tokens(text: str) -> list[str]:
    """Name-like tokens of ``text`` in order: a word (letters, digits, inner hyphens) that is not
    the sentence's first word and has an upper-case letter after its first character
    ("InferSent", "fastText", "BERT") or mixes letters and digits ("BM25", "word2vec", "GPT-2");
    generic acronyms (:data:`GENERIC_NAMES`) are left out."""
    out: list[str] = []
    for i, m in enumerate(_TOKEN.finditer(text)):
        w = m.group(0)
        if i == 0 or w in GENERIC_NAMES or w in out:
            continue
        camel = any(c.isupper() for c in w[1:])
        alnum = any(c.isdigit() for c in w) and any(c.isalpha() for c in w)
        if camel or alnum:
            out.append(w)
    return out


def has_reference(message: str) -> bool:
    """True when ``message`` contains a referring expression (:data:`REFERENCE_RE`)."""
    return REFERENCE_RE.search(message) is not None


@dataclass(frozen=True, slots=True)
class Rewrite:
    """The standalone query retrieval uses, and how it was obtained.

    Attributes:
        query: what retrieval runs with (the message itself when not rewritten).
        rewritten: whether ``query`` differs from the message by a rewrite.
        rewriter: "rules", the LLM rewriter's name, or "none".
        reason: why the message was or was not rewritten (one line a client can show).
    """

    query: str
    rewritten: bool
    rewriter: str
    reason: str


def _user_turns(history: Sequence[Mapping[str, str]]) -> list[str]:
    return [m["content"] for m in history if m.get("role") == "user" and m.get("content")]


def skip_reason(history: Sequence[Mapping[str, str]], message: str, *, bypass: bool) -> str | None:
    """Why ``message`` is not rewritten ("bypass_rewrite", "no history", "self-contained"), or
    None when it should be."""
    if bypass:
        return "bypass_rewrite"
    if not _user_turns(history):
        return "no history"
    if not has_reference(message):
        return "self-contained"
    return None


def antecedent(history: Sequence[Mapping[str, str]]) -> str | None:
    """The first name-like token of the most recent earlier user turn that has one."""
    for turn in reversed(_user_turns(history)):
        names = name_tokens(turn)
        if names:
            return names[0]
    return None


def _replace(m: re.Match[str], name: str) -> str:
    word = m.group(0).lower()
    return f"{name}'s" if word in ("its", "their") else name


def rule_rewrite(history: Sequence[Mapping[str, str]], message: str) -> str:
    """Resolve the referring expressions of ``message`` with rules (see the module docstring)."""
    name = antecedent(history)
    if name is not None:
        return REFERENCE_RE.sub(lambda m: _replace(m, name), message)
    turns = _user_turns(history)
    topic = keyword_variant(turns[-1]) if turns else ""
    return f"{message} ({topic})" if topic else message


def rewrite_messages(history: Sequence[Mapping[str, str]], message: str) -> list[Message]:
    """The versioned prompt (:data:`REWRITE_PROMPT_VERSION`) asking for a standalone question."""
    lines = []
    for m in list(history)[-6:]:
        who = "User" if m.get("role") == "user" else "Assistant"
        lines.append(f"{who}: {m.get('content', '').strip()[:400]}")
    convo = "\n".join(lines)
    return [
        {
            "role": "system",
            "content": "You rewrite follow-up questions into standalone questions.",
        },
        {
            "role": "user",
            "content": (
                f"Conversation:\n{convo}\n\nFollow-up question: {message.strip()}\n\n"
                "Rewrite the follow-up question so that it can be understood without the "
                "conversation: replace words like 'it', 'they' or 'this model' with the name they "
                "refer to. Reply with the rewritten question only."
            ),
        },
    ]


def parse_rewrite(text: str, *, max_words: int = 60) -> str:
    """The first usable line of a model's reply ("" when there is none)."""
    for raw in text.splitlines():
        line = re.sub(
            r"^(?:standalone|rewritten)?\s*(?:question|query)?\s*:\s*", "", raw.strip(), flags=re.I
        )
        line = line.strip().strip("\"'`“”‘’").strip()
        if line and len(line.split()) <= max_words and _TOKEN.search(line):
            return line
    return ""


class LLMRewriter:
    """Rewrites with an injected chat model (temperature 0, cached by the model's cache).

    Attributes:
        fallbacks: replies with no usable line; the message itself is used then (and logged).
    """

    def __init__(self, llm: ChatModel, *, max_tokens: int = 64) -> None:
        self.llm, self.max_tokens = llm, max_tokens
        self.name = f"llm[{llm.name}|{REWRITE_PROMPT_VERSION}]"
        self.fallbacks = 0
        self.calls = 0

    def __call__(self, history: Sequence[Mapping[str, str]], message: str) -> str:
        self.calls += 1
        reply = self.llm.complete(
            rewrite_messages(history, message),
            temperature=0.0,
            max_tokens=self.max_tokens,
            prompt_version=REWRITE_PROMPT_VERSION,
        )
        out = parse_rewrite(reply.text)
        if not out:
            self.fallbacks += 1
            log.warning("%s: unusable rewrite %r; using the message", self.name, reply.text[:80])
            return message
        return out


def rewrite(
    history: Sequence[Mapping[str, str]],
    message: str,
    *,
    bypass: bool = False,
    llm_rewriter: LLMRewriter | None = None,
) -> Rewrite:
    """The standalone query for ``message`` given the earlier turns ``history``.

    Uses ``llm_rewriter`` when given, the rule rewriter otherwise; :func:`skip_reason` decides
    whether either runs at all.
    """
    why = skip_reason(history, message, bypass=bypass)
    if why is not None:
        return Rewrite(message, False, "none", why)
    if llm_rewriter is not None:
        q, who = llm_rewriter(history, message), llm_rewriter.name
    else:
        q, who = rule_rewrite(history, message), "rules"
    changed = q.strip() != message.strip()
    return Rewrite(q, changed, who, "resolved references" if changed else "nothing to resolve")
