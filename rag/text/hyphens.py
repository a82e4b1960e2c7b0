"""Words a PDF split across blocks with a line-end hyphen, joined when the paper says how.

The parser resolves a line-end hyphen *inside* a block (:func:`rag.corpus.pdf_lines.join_lines`),
but a word broken at the end of a column or a page ends one block and opens the next, and the
chunkable text joins blocks with ``"\\n\\n"``: ``atten-\\n\\ntion``, which an answer shows as
``atten- tion`` and which BM25 reads as the two non-words ``atten`` and ``tion``.

The rule reads the paper itself, as the parser's does. A *split* is a word, a hyphen, whitespace
holding at least one line break, and a word starting with a lower-case letter. Let ``j`` be how
often the paper spells the joined form (``attention``) and ``h`` how often the hyphenated form
(``self-attention``), counted over the paper's text as whole words, casefolded, hyphenated
compounds kept whole (the split itself counts as neither: it reads as ``atten`` and ``tion``).

A split with a single letter on either side of the break (``p-\\n\\ni``, ``x-\\n\\ni``) is
notation, not a word break (hyphenation leaves at least two letters on each side; TeX's English
minimums are 2 and 3), and is left as it is. Otherwise:

* ``j >= h`` and ``j > 0``: the hyphen was the typesetter's, join without it (``attention``);
* ``h > j``: the paper writes the compound with a hyphen, join keeping it (``self-attention``);
* ``j == h == 0``: the paper gives no evidence, leave the text as it is (``best-\\n\\nand`` in
  "best- and worst-case", a hyphen that ends a list item).

Ties go to the joined form as in the parser. A split whose second half is capitalised or a digit
is never a split here (a new sentence, ``GPT-4``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: A word as the paper's vocabulary counts it (hyphenated compounds kept whole), as the parser does.
WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
#: Letters a word break leaves on each side at least.
MIN_SIDE = 2
SPLIT = re.compile(
    r"(?<![\w-])(?P<head>[^\W\d_]+(?:-[^\W\d_]+)*)-(?P<gap>[ \t]*\n\s*)(?P<tail>[a-z][^\W\d_]*)"
)


@dataclass(frozen=True, slots=True)
class Join:
    """One split resolved: the text as it was (``atten-\\n\\ntion``) and as it became."""

    before: str
    after: str


def vocabulary(texts: Iterable[str]) -> Counter[str]:
    """How often the texts spell each word (casefolded, hyphenated compounds whole)."""
    vocab: Counter[str] = Counter()
    for t in texts:
        vocab.update(w.casefold() for w in WORD.findall(t))
    return vocab


def join_splits(text: str, vocab: Counter[str]) -> tuple[str, list[Join]]:
    """``text`` with every split the vocabulary resolves joined (see the module docstring), and
    the joins made; unresolved splits and everything else are left as they are."""
    joins: list[Join] = []

    def fix(m: re.Match[str]) -> str:
        head, tail = m.group("head"), m.group("tail")
        j = vocab[f"{head}{tail}".casefold()]
        h = vocab[f"{head}-{tail}".casefold()]
        if j == h == 0 or len(tail) < MIN_SIDE or len(head.rsplit("-", 1)[-1]) < MIN_SIDE:
            return m.group(0)
        after = f"{head}{tail}" if j >= h else f"{head}-{tail}"
        joins.append(Join(m.group(0), after))
        return after

    return SPLIT.sub(fix, text), joins
