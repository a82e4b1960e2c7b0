"""Query variants for multi-query retrieval and the HyDE hypothetical passage.

Two families:

* Deterministic variants, no model: a *keyword* form (question words and stopwords stripped, so a
  lexical or dense index is not distracted by "what does ... do") and a *declarative* form (a
  rule-based rewrite of the question into the opening of the sentence that would answer it:
  "What is X?" -> "X is", "How does X work?" -> "X works by"). Passages are statements, not
  questions, so the declarative form sits closer to them (the idea behind HyDE, without a model).
* LLM variants through an injected :class:`~rag.llm.base.ChatModel` (RAG-Fusion style paraphrases),
  with a versioned prompt, robust line parsing and a visible fallback to the deterministic variants
  when the model returns nothing usable.

HyDE (Gao et al., "Precise Zero-Shot Dense Retrieval without Relevance Labels", ACL 2023) asks the
model for a hypothetical passage answering the question; :func:`hypothetical_passage` writes it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from rag.llm.base import ChatModel, Message

log = logging.getLogger(__name__)

#: A variant function: (query, n) -> up to n variants, never including the query itself.
VariantFn = Callable[[str, int], list[str]]

#: Prompt versions: bump when the prompt text changes so LLM caches key on it.
MULTI_QUERY_PROMPT_VERSION = "mq-v1"
HYDE_PROMPT_VERSION = "hyde-v1"

QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how does do did is are was were can could should "
    "would will may might".split()
)
# A compact English stopword list (function words only; content words are kept on purpose).
STOPWORDS = frozenset(
    """a an the and or but nor of to in on at by for with from into onto over under about as than
    then that this these those it its it's they them their there here i me my we our you your he
    she his her be been being am has have had having not no so such very too also just only any
    some each every all both either neither other another more most much many few own same if
    while because until between through during before after above below up down out off again
    further once s t there's what's paper papers propose proposed use used using""".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-_.]*[A-Za-z0-9]|[A-Za-z0-9]")


def keyword_variant(query: str) -> str:
    """The query as content words only: question words and stopwords removed, order kept.

    Case is kept (acronyms such as "BM25" or "RAG" matter to a reader; tokenizers lowercase
    anyway). Returns "" when nothing is left.
    """
    words = [w for w in _WORD.findall(query)]
    kept = [w for w in words if w.lower() not in QUESTION_WORDS and w.lower() not in STOPWORDS]
    return " ".join(kept)


def _clean(q: str) -> str:
    return re.sub(r"\s+", " ", q).strip().rstrip("?.! ").strip()


# (pattern on the cleaned question, rewrite) — first match wins; patterns are case-insensitive.
# Verbs are not re-inflected (that needs a parser): "How does X improve Y?" -> "X improve Y by".
_DECLARATIVE_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"^how (?:does|do) (.+?) work$", re.I), lambda m: f"{m[1]} works by"),
    (re.compile(r"^how (?:does|do|did|can|could) (.+)$", re.I), lambda m: f"{m[1]} by"),
    (
        re.compile(r"^how (is|are|was|were) (.+?) (\w+ed)$", re.I),
        lambda m: f"{m[2]} {m[1]} {m[3]} by",
    ),
    (
        re.compile(r"^what (is|was|are|were) the (.+?) of (.+)$", re.I),
        lambda m: f"the {m[2]} of {m[3]} {m[1]}",
    ),
    (re.compile(r"^what (is|was|are|were) (.+)$", re.I), lambda m: f"{m[2]} {m[1]}"),
    (re.compile(r"^what (?:does|do|did) (.+)$", re.I), lambda m: m[1]),
    (re.compile(r"^which (\w+) (?:does|do|did) (.+)$", re.I), lambda m: f"the {m[1]} that {m[2]}"),
    (
        re.compile(r"^which (\w+) (is|are|was|were) (.+)$", re.I),
        lambda m: f"the {m[1]} {m[2]} {m[3]}",
    ),
    (re.compile(r"^why (?:does|do|did) (.+)$", re.I), lambda m: f"{m[1]} because"),
    (
        re.compile(r"^why (is|are|was|were) (.+?) (\w+)$", re.I),
        lambda m: f"{m[2]} {m[1]} {m[3]} because",
    ),
    (
        re.compile(r"^who (proposed|introduced|created|developed|wrote) (.+)$", re.I),
        lambda m: f"{m[2]} was {m[1].lower()} by",
    ),
    (re.compile(r"^when (was|were) (.+?) (\w+ed)$", re.I), lambda m: f"{m[2]} {m[1]} {m[3]} in"),
    (re.compile(r"^(?:does|do|did|is|are|can|could|was|were) (.+)$", re.I), lambda m: m[1]),
]


def declarative_variant(query: str) -> str:
    """A rule-based rewrite of a question into the opening of an answering statement.

    "What is dense passage retrieval?" -> "dense passage retrieval is"; "How does ColBERT work?"
    -> "ColBERT works by"; "Does X improve Y?" -> "X improve Y". A query matching no rule comes back
    cleaned of its trailing "?" (so it is still a valid, if identical, variant).
    """
    q = _clean(query)
    for pattern, rewrite in _DECLARATIVE_RULES:
        m = pattern.match(q)
        if m:
            return re.sub(r"\s+", " ", rewrite(m)).strip()
    return q


def _dedupe(candidates: list[str], original: str, n: int) -> list[str]:
    if n <= 0:
        return []
    seen = {_norm(original)}
    out: list[str] = []
    for c in candidates:
        key = _norm(c)
        if key and key not in seen:
            seen.add(key)
            out.append(c)
        if len(out) >= n:
            break
    return out


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def rule_variants(query: str, n: int = 2) -> list[str]:
    """Up to ``n`` deterministic variants (keyword form, then declarative form), deduplicated.

    A variant equal to the query (ignoring case and punctuation) or to an earlier variant is
    dropped, so fewer than ``n`` may come back.
    """
    return _dedupe([keyword_variant(query), declarative_variant(query)], query, n)


def multi_query_messages(query: str, n: int) -> list[Message]:
    """The versioned prompt asking for ``n`` rephrasings, one per line."""
    return [
        {
            "role": "system",
            "content": "You rewrite search queries for a search engine over scientific papers.",
        },
        {
            "role": "user",
            "content": (
                f"Write {n} different search queries that would find passages answering the "
                f"question below. Use other words and synonyms. One query per line, no numbering, "
                f"no explanations.\n\nQuestion: {query}"
            ),
        },
    ]


_BULLET = re.compile(r"^\s*(?:[-*•]+|\(?\d+[.):]|[A-Za-z][.)])\s+")
_PREAMBLE = re.compile(r"^(?:here are|sure|certainly|okay|ok\b|the following|queries?:)", re.I)


def parse_variant_lines(text: str, query: str, n: int, *, max_words: int = 40) -> list[str]:
    """Parse up to ``n`` variants from a model's reply, one per line, robustly.

    Strips bullets and numbering ("1.", "2)", "-", "*"), surrounding quotes and a leading
    "Query:" label; drops preambles ("Here are ..."), empty lines, lines longer than ``max_words``
    words (rambling), echoes of the original question and duplicates.
    """
    candidates: list[str] = []
    for raw in text.splitlines():
        line = _BULLET.sub("", raw.strip())
        line = re.sub(r"^(?:query|question|q)\s*\d*\s*[:\-]\s*", "", line, flags=re.I)
        line = line.strip().strip("\"'`“”‘’").strip()
        if not line or line.endswith(":") or _PREAMBLE.match(line):
            continue
        if len(line.split()) > max_words or not _WORD.search(line):
            continue
        candidates.append(line)
    return _dedupe(candidates, query, n)


class LLMVariants:
    """LLM-written query variants (a :data:`VariantFn`), falling back visibly to rule variants.

    Attributes:
        fallbacks: how many queries fell back to :func:`rule_variants` because the model's reply
            held no usable line (also logged as a warning), so a notebook can report it.
    """

    def __init__(
        self,
        llm: ChatModel,
        *,
        prompt_version: str = MULTI_QUERY_PROMPT_VERSION,
        max_tokens: int = 160,
    ) -> None:
        self.llm = llm
        self.prompt_version = prompt_version
        self.max_tokens = max_tokens
        self.name = f"llm-variants[{llm.name}|{prompt_version}]"
        self.fallbacks = 0
        self.calls = 0

    def __call__(self, query: str, n: int) -> list[str]:
        self.calls += 1
        reply = self.llm.complete(
            multi_query_messages(query, n),
            temperature=0.0,
            max_tokens=self.max_tokens,
            prompt_version=self.prompt_version,
        )
        variants = parse_variant_lines(reply.text, query, n)
        if not variants:
            self.fallbacks += 1
            log.warning(
                "%s: no usable variant in the model reply %r for query %r; "
                "falling back to rule variants",
                self.name,
                reply.text[:80],
                query,
            )
            return rule_variants(query, n)
        return variants


def hyde_messages(query: str) -> list[Message]:
    """The versioned HyDE prompt: write the passage of a paper that answers the question."""
    return [
        {"role": "system", "content": "You write passages of scientific papers."},
        {
            "role": "user",
            "content": (
                "Write a short passage from a research paper that answers the question. "
                f"Answer directly, in two or three sentences.\n\nQuestion: {query}\nPassage:"
            ),
        },
    ]


def hypothetical_passage(
    llm: ChatModel, query: str, *, prompt_version: str = HYDE_PROMPT_VERSION, max_tokens: int = 128
) -> str:
    """The LLM's hypothetical passage for ``query`` (HyDE); "" when the model returned nothing."""
    reply = llm.complete(
        hyde_messages(query), temperature=0.0, max_tokens=max_tokens, prompt_version=prompt_version
    )
    return reply.text.strip()
