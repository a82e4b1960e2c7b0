"""Split an answer into sentences, citations and atomic claims, and detect refusals.

Deterministic rules, so a judge's input is reproducible and testable by hand:

1. **Sentences.** The package's one splitter in its ``"answer"`` mode
   (:func:`rag.text.sentences.split_sentences`): lines (bullets, numbered items) are split first,
   then sentences within a line (abbreviations and initials are not boundaries). Citation markers
   placed right after the period (``... works. [2] Next``) belong to the sentence before them.
2. **Citations.** ``[n]``, ``[1, 3]``, ``[1; 3]``, ``[1-3]`` (a range, at most 20 ids) and runs
   such as ``[1][2]`` are parsed to sorted-unique integer ids per sentence and removed from the
   text.
   Bracketed text that is not a list of integers (``[CLS]``, ``[0.5]``) is left alone.
3. **Claims.** A sentence is cut (conservatively, never inside a list) at ``;`` and at
   ``, and`` / ``, but`` / ``, while`` / ``, whereas`` / ``, so`` when the part after the cut starts
   a new clause: its first word is a subject word (``it``, ``the``, ``this``, ``they`` ...) or a
   capitalised word, and both parts have at least :data:`MIN_CLAIM_WORDS` words. ``A, B, and C``
   lists stay one claim, since splitting them would need the predicate copied into each item.
   Claims keep the sentence's citations.
4. **Non-claims.** Questions, sentences of fewer than :data:`MIN_CLAIM_WORDS` words and refusal
   sentences carry no claim. An answer with no claim is a ``"refusal"`` if it contains a refusal
   sentence and ``"no_claims"`` otherwise; neither is ever scored (see
   :mod:`rag.evaluation.citations`).

Refusal wording follows what grounded answerers are prompted to say ("the sources do not contain
the answer", "I cannot find ...").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rag.text import sentences as splitter
from rag.text.sentences import CITE_GROUP

if TYPE_CHECKING:
    from rag.answer.context import Context

logger = logging.getLogger(__name__)

#: Version of these rules; part of every cache key that depends on claim splitting.
CLAIMS_VERSION = "claims-v2"
#: A claim (or a claim-bearing sentence) has at least this many word tokens.
MIN_CLAIM_WORDS = 3
#: Largest citation range expanded (``[1-20]``); wider ranges are not treated as citations.
MAX_RANGE = 20

AnswerStatus = Literal["answered", "refusal", "no_claims"]

_SUBJECT_WORDS = frozenset(
    "it its they their them this these that those there the a an we our he she his her "
    "each both all most some many none one".split()
)
_CONJUNCTIONS = ("and", "but", "while", "whereas", "so")

_CITE_RE = re.compile(CITE_GROUP)
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-.]*")
_CLAUSE_CUT_RE = re.compile(r"\s*;\s*|,\s+(?=(?:" + "|".join(_CONJUNCTIONS) + r")\s)")

_REFUSAL_PATTERNS = [
    r"\b(?:sources?|context|documents?|passages?|papers?|excerpts?|references?)\s+"
    r"(?:provided\s+|given\s+)?(?:do|does|did)\s*(?:not|n't)\s+"
    r"(?:contain|mention|provide|include|say|specify|discuss|address|state|report|give|cover|"
    r"describe|answer|offer|have)",
    r"\b(?:i|we)\s+(?:cannot|can't|can\s+not|could\s+not|couldn't|am\s+unable\s+to|"
    r"was\s+unable\s+to|are\s+unable\s+to|were\s+unable\s+to)\s+"
    r"(?:find|answer|determine|locate|tell|identify|confirm)",
    r"\bthere\s+(?:is|was)\s+no\s+(?:relevant\s+)?(?:information|mention|evidence|data)\b",
    r"\b(?:not|in)\s*(?:enough|sufficient)\s+(?:information|evidence|context)\b",
    r"\binsufficient\s+(?:information|evidence|context)\b",
    r"\b(?:unable|not\s+possible|impossible)\s+to\s+(?:answer|determine|tell)\b",
    r"\b(?:i|we)\s+(?:do\s+not|don't)\s+know\b",
    r"\bcannot\s+be\s+(?:answered|determined|found)\b",
    r"\b(?:is|are|was|were)\s+not\s+(?:mentioned|stated|specified|discussed|provided|given|"
    r"reported|described|covered)\s+in\s+the\s+(?:provided\s+|given\s+|retrieved\s+)?"
    r"(?:sources?|context|documents?|passages?|papers?|excerpts?)",
    r"\bno\s+(?:relevant\s+)?information\s+(?:is|was)\s+(?:available|provided|found|given)\b",
]
_REFUSAL_RE = re.compile("|".join(f"(?:{p})" for p in _REFUSAL_PATTERNS), re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Sentence:
    """One answer sentence.

    Attributes:
        text: the sentence with its citation markers removed.
        citations: sorted unique source ids cited by the sentence.
        claims: the atomic claims of the sentence (empty for non-claims).
        refusal: whether the sentence says the sources lack the answer.
    """

    text: str
    citations: tuple[int, ...]
    claims: tuple[str, ...]
    refusal: bool


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """An answer split into sentences and claims, with its status."""

    text: str
    sentences: tuple[Sentence, ...]

    @property
    def claims(self) -> list[str]:
        """All claims in order."""
        return [c for s in self.sentences for c in s.claims]

    @property
    def claim_sentences(self) -> list[Sentence]:
        """The sentences that carry at least one claim (the units of citation recall)."""
        return [s for s in self.sentences if s.claims]

    @property
    def has_refusal(self) -> bool:
        """Whether any sentence is a refusal (also true for partial answers)."""
        return any(s.refusal for s in self.sentences)

    @property
    def status(self) -> AnswerStatus:
        """``answered`` when there is a claim, else ``refusal`` or ``no_claims``."""
        if self.claims:
            return "answered"
        return "refusal" if self.has_refusal else "no_claims"


def parse_citations(text: str) -> tuple[str, tuple[int, ...]]:
    """Remove citation markers from ``text`` and return (clean text, sorted unique ids).

    ``[1, 3]``, ``[1;3]``, ``[1-3]`` and ``[1][2]`` are all recognised; ranges wider than
    :data:`MAX_RANGE` and non-integer brackets are kept as text.
    """
    ids: set[int] = set()

    def _take(m: re.Match[str]) -> str:
        found: set[int] = set()
        for part in re.split(r"[,;]", m.group(0).strip("[] ")):
            bounds = [int(x) for x in re.split(r"[-\u2013]", part.strip())]
            lo, hi = bounds[0], bounds[-1]
            if hi < lo or hi - lo >= MAX_RANGE:
                return m.group(0)
            found.update(range(lo, hi + 1))
        ids.update(found)
        return ""

    clean = _CITE_RE.sub(_take, text)
    clean = re.sub(r"\s+([.,;:!?)])", r"\1", clean)
    clean = re.sub(r"\s{2,}", " ", clean).strip()
    return clean, tuple(sorted(ids))


def source_sentences(
    context: Context, min_words: int, max_words: int
) -> Iterator[tuple[int, int, str]]:
    """``(n, position, text)`` for each sentence of source [n] of ``context`` that has
    ``min_words``..``max_words`` words once white space is collapsed and citation markers are
    removed: the sentences an extractive answerer may copy (``position`` counts every sentence)."""
    for src in context.sources:
        text = re.sub(r"\s+", " ", src.text).strip()
        for i, raw in enumerate(splitter.split_sentences(text, mode="answer")):
            clean, _ = parse_citations(raw)
            if min_words <= len(clean.split()) <= max_words:
                yield src.n, i, clean


def _n_words(text: str) -> int:
    return len(_WORD_RE.findall(text))


def _starts_clause(part: str) -> bool:
    words = part.split()
    if words and words[0].lower() in _CONJUNCTIONS:
        words = words[1:]
    if not words:
        return False
    first = words[0].strip("\"'(")
    return first.lower() in _SUBJECT_WORDS or first[:1].isupper()


def split_claims(sentence: str) -> list[str]:
    """Split one citation-free sentence into atomic claims (rule 3 of the module docstring).

    Returns an empty list when the sentence carries no claim (a question, a refusal or fewer
    than :data:`MIN_CLAIM_WORDS` words). Trailing sentence punctuation is dropped from claims.
    """
    s = sentence.strip()
    if not s or s.endswith("?") or is_refusal(s) or _n_words(s) < MIN_CLAIM_WORDS:
        return []
    s = s.rstrip(" .!")
    parts: list[str] = []
    start = 0
    for m in _CLAUSE_CUT_RE.finditer(s):
        left, right = s[start : m.start()], s[m.end() :]
        is_semicolon = ";" in m.group(0)
        if _n_words(left) < MIN_CLAIM_WORDS or _n_words(right) < MIN_CLAIM_WORDS:
            continue
        if not is_semicolon and not _starts_clause(right):
            continue
        parts.append(left)
        start = m.end()
    parts.append(s[start:])
    claims = []
    for p in parts:
        p = p.strip(" ,;")
        first, _, rest = p.partition(" ")
        if first.lower() in _CONJUNCTIONS and rest:
            p = rest
        claims.append(p)
    return claims


def is_refusal(text: str) -> bool:
    """Whether ``text`` says the sources do not contain the answer (or that it cannot be given)."""
    return bool(_REFUSAL_RE.search(text))


def parse_answer(answer: str) -> ParsedAnswer:
    """Split an answer into :class:`Sentence` records with citations, claims and refusals."""
    sentences = []
    for raw in splitter.split_sentences(answer, mode="answer"):
        clean, cites = parse_citations(raw)
        refusal = is_refusal(clean)
        claims = () if refusal else tuple(split_claims(clean))
        sentences.append(Sentence(text=clean, citations=cites, claims=claims, refusal=refusal))
    return ParsedAnswer(text=answer, sentences=tuple(sentences))
