r"""GBNF grammars that constrain a local model's answer to cited sentences or the refusal.

llama.cpp can restrict decoding to a context-free grammar (GBNF, "GGML BNF"): at each step only
tokens that keep the text inside the grammar may be sampled. :func:`answer_grammar` builds, per
question, a grammar whose language is exactly

- :data:`rag.answer.prompts.REFUSAL`-style refusal text (passed in), or
- 1..``max_sentences`` sentences, each ``Body [n].`` / ``Body [n][m].`` where every ``n`` is one
  of the source numbers of *this* prompt (a model cannot cite a source it was not given), and the
  body is 3..``max_words`` words of at most :data:`MAX_WORD_CHARS` characters, with no brackets,
  newlines or sentence-ending punctuation (a decimal point between digits is allowed), so a
  sentence cannot hide a line break or an uncited sentence, and a rambling one is closed with its
  citation instead of running uncited into the token limit (without a word cap a small model
  fills its budget with one uncited sentence; without a per-word cap it glues words together).

With ``yes_no=True`` the answer must start with ``Yes, `` or ``No, `` and the grammar has no
refusal branch: given one, a small model takes the refusal on yes/no questions and never follows
the prompt's "start with Yes or No" rule; declining a yes/no question is left to a gate before
generation (:class:`rag.answer.gate.GatedAnswerer`).
With no sources (closed book) sentences carry no citation.

:func:`quote_grammar` is the second language: every answer sentence is a verbatim sentence of a
source followed by that source's citation, so the model only chooses *which* source sentences
answer (:class:`rag.answer.quote.QuoteAnswerer`).

The grammar text is part of the LLM cache key (the :class:`rag.llm.model.CachedChatModel`
hashes it), so changing a rule never reuses an old answer. Literals are escaped by
:func:`gbnf_literal`, which follows llama.cpp's GBNF escapes (JSON escaping is not compatible:
``\b``, ``\f`` and UTF-16 surrogate pairs are not GBNF).
"""

from __future__ import annotations

from collections.abc import Sequence

from rag.errors import ConfigError

#: Version of the grammar rules (also in the answerer's prompt version, so in the cache key): a
#: word cap per body, a character cap per word, and no refusal branch for a yes/no question.
GRAMMAR_VERSION = "gbnf-v4"
#: Version of :func:`quote_grammar` (also in the quote answerer's prompt version).
QUOTE_GRAMMAR_VERSION = "quote-v1"


#: Longest word a body may hold; without it a model evades the word cap by gluing words together
#: ("lessthanofallthequeries...") until the token limit.
MAX_WORD_CHARS = 30


_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def gbnf_literal(text: str) -> str:
    r"""A GBNF string literal that matches exactly ``text``.

    llama.cpp's grammar parser knows the escapes ``\\ \" \n \r \t \[ \]`` and ``\xHH``,
    ``\uHHHH``, ``\UHHHHHHHH`` (code points, not UTF-16 units). Printable ASCII stays as it is;
    every other character becomes a code-point escape, so the grammar file is ASCII whatever the
    PDF held.

    Raises:
        ConfigError: ``text`` holds NUL or a lone surrogate (no literal can match them: llama.cpp
            ends strings at NUL, and a surrogate is no character of UTF-8 output).
    """
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif 0x20 <= cp < 0x7F:
            out.append(ch)
        elif cp == 0 or 0xD800 <= cp <= 0xDFFF:
            raise ConfigError(f"no GBNF literal can match U+{cp:04X} in {text[:60]!r}")
        elif cp <= 0xFF:
            out.append(f"\\x{cp:02X}")
        elif cp <= 0xFFFF:
            out.append(f"\\u{cp:04X}")
        else:
            out.append(f"\\U{cp:08X}")
    out.append('"')
    return "".join(out)


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
        yes_no: the answer starts with "Yes, " or "No, " and cannot be the refusal.

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
    if yes_no:
        lines = ["root ::= answer"]
    else:
        lines = ["root ::= refusal | answer", f"refusal ::= {gbnf_literal(refusal)}"]
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
        lines.append("cite ::= " + " | ".join(gbnf_literal(f"[{n}]") for n in nums))
        lines.append(f'sentence ::= body " " cite{{1,{max_citations}}} "."')
        lines.append(f'yn-sentence ::= ("Yes, " | "No, ") ynbody " " cite{{1,{max_citations}}} "."')
    else:
        lines.append('sentence ::= body "."')
        lines.append('yn-sentence ::= ("Yes, " | "No, ") ynbody "."')
    return "\n".join(lines) + "\n"


def quote_grammar(
    quotes: Sequence[tuple[str, int]],
    *,
    refusal: str,
    max_sentences: int = 2,
    yes_no: bool = False,
) -> str:
    """GBNF text whose answers are verbatim source sentences, each with its source's citation.

    The language is the refusal, or 1..``max_sentences`` of the ``quotes`` joined by one space,
    each written ``<text> [n].``; the sentences appear in the order given (the prompt's order),
    each at most once, so an answer cannot repeat a line. For ``yes_no`` the answer starts with
    ``Yes, `` or ``No, `` and there is no refusal branch (as in :func:`answer_grammar`).
    With no quote the only answer is the refusal.

    Rules: ``q-i ::= "<text_i> [n_i]."``; ``pick-k-j`` (at most k quotes from i >= j) ::=
    ``q-j (" " pick-(k-1)-(j+1))? | pick-k-(j+1)``, so the grammar has O(max_sentences x quotes)
    rules, not one per ordered tuple.

    Args:
        quotes: ``(sentence text without its final punctuation, source number)`` in prompt order.
        refusal: the exact refusal sentence.
        max_sentences: at most this many quoted sentences (1..5).
        yes_no: the answer starts "Yes, " or "No, " and cannot be the refusal.

    Raises:
        ConfigError: a bound out of range, a source number below 1, an empty quote or refusal.
    """
    if not 1 <= max_sentences <= 5:
        raise ConfigError(f"max_sentences={max_sentences}: use 1..5")
    if not refusal.strip():
        raise ConfigError("refusal text is empty")
    for text, n in quotes:
        if n < 1:
            raise ConfigError(f"quote {text[:40]!r} cites source {n}: must be >= 1")
        if not text.strip():
            raise ConfigError(f"empty quote for source [{n}]")
    refusal_rule = f"refusal ::= {gbnf_literal(refusal)}"
    if not quotes:
        return f"root ::= refusal\n{refusal_rule}\n"
    lines = ["root ::= answer"] if yes_no else ["root ::= refusal | answer", refusal_rule]
    prefix = '("Yes, " | "No, ") ' if yes_no else ""
    lines.append(f"answer ::= {prefix}pick-{max_sentences}-1")
    last = len(quotes)
    for i, (text, n) in enumerate(quotes, start=1):
        lines.append(f"q-{i} ::= {gbnf_literal(f'{text} [{n}].')}")
    for k in range(1, max_sentences + 1):
        for j in range(1, last + 1):
            more = f' (" " pick-{k - 1}-{j + 1})?' if k > 1 and j < last else ""
            rest = f" | pick-{k}-{j + 1}" if j < last else ""
            lines.append(f"pick-{k}-{j} ::= q-{j}{more}{rest}")
    return "\n".join(lines) + "\n"


__all__ = [
    "GRAMMAR_VERSION",
    "QUOTE_GRAMMAR_VERSION",
    "answer_grammar",
    "gbnf_literal",
    "quote_grammar",
]
