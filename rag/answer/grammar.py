"""GBNF grammars that constrain a local model's answer to cited sentences or the refusal.

llama.cpp can restrict decoding to a context-free grammar (GBNF, "GGML BNF"): at each step only
tokens that keep the text inside the grammar may be sampled. :func:`answer_grammar` builds, per
question, a grammar whose language is exactly

- :data:`rag.answer.generate.REFUSAL`-style refusal text (passed in), or
- 1..``max_sentences`` sentences, each ``Body [n].`` / ``Body [n][m].`` where every ``n`` is one
  of the source numbers of *this* prompt (a model cannot cite a source it was not given), and the
  body is 3..``max_words`` words of at most :data:`MAX_WORD_CHARS` characters, with no brackets,
  newlines or sentence-ending punctuation (a decimal point between digits is allowed), so a
  sentence cannot hide a line break or an uncited sentence, and a rambling one is closed with its
  citation instead of running uncited into the token limit (gbnf-v1 had no word cap: SmolLM2
  filled 96 tokens with one uncited sentence; v2 capped words, and it glued words together).

With ``yes_no=True`` the first sentence must start with ``Yes, `` or ``No, ``. With no sources
(closed book) sentences carry no citation. The grammar text is part of the LLM cache key (the
:class:`rag.llm.model.CachedChatModel` hashes it), so changing a rule never reuses an old answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rag.errors import ConfigError

#: Version of the grammar rules (also in the answerer's prompt version).
GRAMMAR_VERSION = "gbnf-v3"  # v2: <= max_words words per body; v3: <= 30 characters per word


#: Longest word a body may hold; without it the word cap was evaded by gluing words together
#: ("lessthanofallthequeries...") until the token limit.
MAX_WORD_CHARS = 30


def _literal(text: str) -> str:
    """A GBNF string literal (JSON escaping is compatible with GBNF's)."""
    return json.dumps(text, ensure_ascii=True)


def answer_grammar(
    source_numbers: Sequence[int],
    *,
    refusal: str,
    max_sentences: int = 3,
    max_citations: int = 2,
    max_words: int = 20,
    yes_no: bool = False,
) -> str:
    """GBNF text for one answer (see the module docstring).

    Args:
        source_numbers: the ``[n]`` numbers of the prompt's sources (empty: closed book).
        refusal: the exact refusal sentence.
        max_sentences: at most this many sentences (1..5).
        max_citations: at most this many ``[n]`` markers per sentence (1..5).
        max_words: at most this many words per sentence body (3..60): after them the grammar
            allows only the citation, so a rambling sentence is closed and cited instead of
            running into the token limit uncited.
        yes_no: the first sentence starts with "Yes, " or "No, ".

    Raises:
        ConfigError: a bound out of range or a source number below 1.
    """
    if not 1 <= max_sentences <= 5:
        raise ConfigError(f"max_sentences={max_sentences}: use 1..5")
    if not 1 <= max_citations <= 5:
        raise ConfigError(f"max_citations={max_citations}: use 1..5")
    if not 3 <= max_words <= 60:
        raise ConfigError(f"max_words={max_words}: use 3..60")
    nums = sorted(set(source_numbers))
    if any(n < 1 for n in nums):
        raise ConfigError(f"source numbers {nums}: must all be >= 1")
    if not refusal.strip():
        raise ConfigError("refusal text is empty")
    lines = [
        "root ::= refusal | answer",
        f"refusal ::= {_literal(refusal)}",
    ]
    first = "yn-sentence" if yes_no else "sentence"
    more = f'(" " sentence){{0,{max_sentences - 1}}}' if max_sentences > 1 else ""
    lines.append(f"answer ::= {first} {more}".rstrip())
    # body: first character a letter or digit; then no brackets, newlines or end punctuation
    # except a period between digits (0.5); bounded length so one sentence cannot run on.
    first_word = f"[A-Za-z0-9] wchar{{0,{MAX_WORD_CHARS - 1}}}"
    lines.append(f'body ::= {first_word} (" " word){{2,{max_words - 1}}}')
    lines.append(r'wchar ::= [^ \[\]\n\r.?!] | [0-9] "." [0-9]')
    lines.append(f"word ::= wchar{{1,{MAX_WORD_CHARS}}}")
    lines.append(f'ynbody ::= word (" " word){{1,{max_words - 2}}}')
    if nums:
        lines.append("cite ::= " + " | ".join(_literal(f"[{n}]") for n in nums))
        lines.append(f'sentence ::= body " " cite{{1,{max_citations}}} "."')
        lines.append(f'yn-sentence ::= ("Yes, " | "No, ") ynbody " " cite{{1,{max_citations}}} "."')
    else:
        lines.append('sentence ::= body "."')
        lines.append('yn-sentence ::= ("Yes, " | "No, ") ynbody "."')
    return "\n".join(lines) + "\n"


__all__ = ["GRAMMAR_VERSION", "answer_grammar"]
