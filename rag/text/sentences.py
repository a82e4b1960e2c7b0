"""One sentence splitter for the whole package: character spans, one abbreviation list.

Chunking (sentence and section windows), the claim splitter of answers, the extractive answerer,
the offline judge's context units and the ICT pseudo-queries all cut text here, so "a sentence"
means the same thing in every stage.

A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by whitespace and
a capital letter, digit or opening bracket/quote. Not a boundary: a period after a known
abbreviation (:data:`ABBREVIATIONS`: ``e.g.``, ``i.e.``, ``et al.``, ``Fig.``, ``Eq.``, ``cf.``,
``vs.`` …), after initials (``J. Smith``, ``U.S. Army``), or inside a number (``3.14``
has no whitespace after its period). A lowercase start never opens a sentence, so ``etc. and``
stays whole while ``etc. The`` (nearly always a sentence end) splits; the price is that a sentence
ending in a listed abbreviation (``… by Mikolov et al. We``) is not split.

Generated answers differ from paper text in one way, selected by ``citations=True`` (the
``"answer"`` mode of :func:`split_sentences`): citation markers such as ``[1]`` or ``[2, 3]``
written *after* the final period belong to the sentence they close (``… is fast. [1] It …``). In
paper text a bracketed number after a period opens the next sentence (a reference-list entry
``[12] A. Author …``), so the ``"paper"`` mode leaves it there.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from rag.errors import ConfigError

#: How :func:`split_sentences` cuts: paper prose, or answers and numbered sources.
SplitMode = Literal["paper", "answer"]
SPLIT_MODES: tuple[str, ...] = get_args(SplitMode)

#: Tokens ending in "." that do not end a sentence when followed by a capital or a digit.
ABBREVIATIONS = frozenset(
    """al. e.g. i.e. cf. vs. viz. fig. figs. eq. eqs. sec. secs. tab. tabs. ref. refs. app.
    appx. alg. def. thm. lem. prop. cor. no. nos. vol. pp. p. ch. approx. resp. dr. mr. ms. mrs.
    prof. st. jr. sr. inc. ltd. co. corp. dept. univ. ed. eds. e.t.c. w.r.t. a.k.a. incl.
    est. max. min. avg. std. var. abs.""".split()
)

#: A citation group as answers write it: ``[1]``, ``[1, 2]``, ``[1-3]``, ``[2; 4]``.
CITE_GROUP = r"\[\s*\d+(?:\s*[-\u2013]\s*\d+)?(?:\s*[,;]\s*\d+(?:\s*[-\u2013]\s*\d+)?)*\s*\]"

_CLOSERS = r"[\"'”’)\]]*"
_STARTS = r"(?=[\"'“‘(\[]?[A-Z0-9])"
_BOUNDARY = re.compile(r"([.!?])" + _CLOSERS + r"(\s+)" + _STARTS)
_BOUNDARY_CITES = re.compile(r"([.!?])" + _CLOSERS + r"(?:\s*" + CITE_GROUP + r")*(\s+)" + _STARTS)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+")
_LAST_TOKEN = re.compile(r"(\S+)$")
_INITIALS = re.compile(r"^(?:[A-Za-z]\.)+$")


def _is_abbreviation(text: str, period: int) -> bool:
    """Whether the token ending at ``text[period] == "."`` is an abbreviation or initials."""
    last = _LAST_TOKEN.search(text, max(0, period - 40), period + 1)
    # Leading brackets/quotes do not hide an abbreviation: "(e.g." and "(Fig.".
    core = last.group(1).lstrip("([\"'“‘").lower() if last else ""
    return core in ABBREVIATIONS or bool(_INITIALS.match(core))


def sentence_spans(text: str, *, citations: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` character ranges of the sentences of ``text``, without edge spaces.

    Args:
        text: any text; newlines are ordinary whitespace here.
        citations: keep ``[n]`` markers that follow a sentence's period with that sentence
            (generated answers); see the module docstring.
    """
    out: list[tuple[int, int]] = []
    start = 0
    for m in (_BOUNDARY_CITES if citations else _BOUNDARY).finditer(text):
        if m.group(1) == "." and _is_abbreviation(text, m.start(1)):
            continue
        _append_trimmed(text, start, m.start(2), out)
        start = m.end(2)
    _append_trimmed(text, start, len(text), out)
    return out


def split_sentences(text: str, mode: SplitMode = "paper") -> list[str]:
    """The sentences of ``text`` as strings, cut by one of two named modes.

    Args:
        text: any text.
        mode: ``"paper"``: paper prose (chunks, quote candidates); newlines are ordinary
            whitespace and a bracketed number after a period opens the next sentence.
            ``"answer"``: generated answers and the sources shown to an answerer or judge; every
            line is split on its own, a leading list bullet (``-``, ``*``, ``•``, ``1.``, ``2)``)
            is dropped since a line break ends a sentence even without a period, and citation
            markers after a period stay with the sentence they close (see the module docstring).

    Raises:
        ConfigError: an unknown ``mode``.
    """
    if mode == "paper":
        return [text[a:b] for a, b in sentence_spans(text)]
    if mode != "answer":
        raise ConfigError(f"sentence split mode {mode!r}: use one of {list(SPLIT_MODES)}")
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        out += [line[a:b] for a, b in sentence_spans(line, citations=True)]
    return out


def _append_trimmed(text: str, a: int, b: int, out: list[tuple[int, int]]) -> None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if b > a:
        out.append((a, b))
