"""Canonical text normalisation, shared by the parser and by evidence matching.

PDF text differs from the "same" text typed elsewhere in a handful of systematic ways: typographic
ligatures (``ﬁ`` for ``fi``), curly quotes and dashes, hyphenated line breaks (``retrie-\\nval``),
soft hyphens, odd spaces and runs of whitespace. :func:`normalize` removes exactly those
differences so two texts compare equal when a reader would call them equal. :func:`match_key`
goes further for fuzzy matching: it keeps only letters and digits (casefolded) and remembers where
each kept character came from, so a match found in the key maps back to the original text.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from functools import lru_cache

#: Typographic ligatures (Unicode "Alphabetic Presentation Forms") and their letters.
LIGATURES: dict[str, str] = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
    "\ua732": "AA",
    "\ua733": "aa",
    "\u0132": "IJ",
    "\u0133": "ij",
    "\u0152": "OE",
    "\u0153": "oe",
}

#: Quotes, dashes, odd spaces and invisible characters mapped to plain ASCII (or removed).
PUNCTUATION: dict[str, str] = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u00b4\u0060", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f", " "),
    **dict.fromkeys("\u00ad\u200b\u200c\u200d\u2060\ufeff", ""),
    "\u2026": "...",
}

_LIGATURE_TABLE = str.maketrans(LIGATURES)
_PUNCT_TABLE = str.maketrans(PUNCTUATION)
# A hyphen ending a line, between a letter and a lowercase letter: a typesetter's word break.
_HYPHEN_BREAK = re.compile(r"(?<=[^\W\d_])-[ \t]*\n\s*(?=[a-z])")
_WS = re.compile(r"\s+")
_HYPHENS = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u00ad")


def expand_ligatures(text: str) -> str:
    """Replace typographic ligatures by their letters (``ﬁ`` → ``fi``)."""
    return text.translate(_LIGATURE_TABLE)


def plain_punctuation(text: str) -> str:
    """Map curly quotes, dashes and odd spaces to ASCII; drop soft hyphens and zero-width marks."""
    return text.translate(_PUNCT_TABLE)


def join_hyphenated(text: str) -> str:
    """Join words broken across lines by a hyphen (``retrie-\\nval`` → ``retrieval``).

    Only a hyphen at a line end, after a letter and before a lowercase letter, is removed; real
    compounds in running text (``pre-trained``) are untouched. The parser makes the finer call of
    keeping a compound's hyphen at a line break (see :mod:`rag.corpus.parse`).
    """
    return _HYPHEN_BREAK.sub("", text)


def collapse_whitespace(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def verbatim_form(text: str) -> str:
    """Page text in the form verbatim quotes are copied in: hyphenated line breaks joined and
    whitespace collapsed, nothing else changed (ligatures, quotes and dashes stay as extracted),
    so a quote can be checked against its page with a plain substring test."""
    return collapse_whitespace(join_hyphenated(text))


def normalize(text: str, *, casefold: bool = False, nfkc: bool = True) -> str:
    """The canonical normalisation used for comparing texts.

    Steps: ligatures expanded; NFKC (full-width forms, compatibility characters) when ``nfkc``;
    quotes/dashes/spaces made plain; hyphenated line breaks joined; whitespace collapsed; and
    casefolded when ``casefold``.
    """
    text = expand_ligatures(text)
    if nfkc:
        text = unicodedata.normalize("NFKC", text)
    text = join_hyphenated(plain_punctuation(text))
    text = collapse_whitespace(text)
    return text.casefold() if casefold else text


def _key_chars(ch: str) -> str:
    """What one original character contributes to the match key ("" for none, " " for a gap)."""
    if ch.isalnum():
        lig = LIGATURES.get(ch)
        if lig is not None:
            return lig.casefold()
        folded = unicodedata.normalize("NFKC", ch).casefold()
        return "".join(c for c in folded if c.isalnum()) or " "
    if ch in PUNCTUATION and PUNCTUATION[ch] == "":
        return ""
    return " "


@lru_cache(maxsize=4096)
def _char_key(ch: str) -> str:
    return _key_chars(ch)


@lru_cache(maxsize=256)
def match_key_with_offsets(text: str) -> tuple[str, array]:
    """The fuzzy-match key of ``text`` plus, per key character, its index in ``text``.

    The key keeps letters and digits only (ligatures expanded, NFKC, casefolded); every other run
    of characters becomes one space, except hyphens, which vanish with any whitespace right after
    them (so ``pre-trained``, ``pre-\\ntrained`` and ``pretrained`` share a key).
    ``offsets[i]`` is the index in ``text`` of the character that produced ``key[i]``;
    ``len(offsets) == len(key)``. Cached (treat the returned array as read-only).
    """
    out: list[str] = []
    offsets = array("l")
    pending_space = -1
    after_hyphen = False
    for i, ch in enumerate(text):
        if ch in _HYPHENS:
            after_hyphen = True
            continue
        piece = _char_key(ch)
        if not piece:
            continue
        if piece == " ":
            # Whitespace right after a hyphen is a line break inside a word ("pre-\ntrained").
            if out and pending_space < 0 and not (after_hyphen and ch.isspace()):
                pending_space = i
            continue
        after_hyphen = False
        if pending_space >= 0:
            out.append(" ")
            offsets.append(pending_space)
            pending_space = -1
        out.append(piece)
        offsets.extend([i] * len(piece))
    return "".join(out), offsets


@lru_cache(maxsize=32768)
def match_key(text: str) -> str:
    """The fuzzy-match key of ``text`` (see :func:`match_key_with_offsets`), cached."""
    return match_key_with_offsets(text)[0]
