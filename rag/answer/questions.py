"""Question forms: is it a yes/no question, and what statement does it ask about?

Two deterministic rules, so an answerer's decisions can be checked by hand:

1. **Yes/no questions** start with an auxiliary verb (``Does``, ``Is``, ``Can`` ...), possibly
   after a leading phrase closed by a comma (``In Lost in the Middle, do ...``), and is not a
   choice between alternatives (``Did A or B work better?``). The gold marks
   boolean questions (``answer_type == "boolean"``); this rule needs no gold, so it also works
   on a user's question, and the notebook reports how well it agrees with the gold marks.
2. **Declarative form**: the question with its question mark, a leading phrase before a
   yes/no auxiliary, the wh-word (leading or after a comma) and its auxiliary removed
   (``Does RoBERTa keep BERT's NSP objective?`` -> ``RoBERTa keep BERT's NSP objective``;
   ``Which n-gram lengths are extracted?`` -> ``n-gram lengths are extracted``). Not grammatical
   English, but it holds the question's content words in their order, which is what the offline
   judge's alignment features read when it scores "does this sentence support the statement".
"""

from __future__ import annotations

import re

_AUX = (
    "do does did is are was were can could will would should shall has have had may might must"
).split()
_WH = "what which who whom whose when where why how".split()
_AUX_RE = re.compile(r"^(?:" + "|".join(_AUX) + r")\b", re.IGNORECASE)
_LEAD_RE = re.compile(r"^[^,?]{1,120},\s+(?=(?:" + "|".join(_AUX) + r")\b)", re.IGNORECASE)
_MID_WH_RE = re.compile(
    r",\s+(?:" + "|".join(_WH) + r")\s+(?:(?:" + "|".join(_AUX) + r")\s+)?", re.IGNORECASE
)
_CHOICE_RE = re.compile(r"\bor\b(?!\s+not\b)", re.IGNORECASE)


def is_yes_no_question(question: str) -> bool:
    """Whether ``question`` asks for yes or no (rule 1 of the module docstring)."""
    q = question.strip()
    if _CHOICE_RE.search(q):  # "Did A or B work better?" asks to choose, not yes/no
        return False
    if _AUX_RE.match(q):
        return True
    return bool(_LEAD_RE.match(q))


def declarative_form(question: str) -> str:
    """The statement a question asks about (rule 2 of the module docstring)."""
    q = " ".join(question.strip().rstrip("?").split())
    q = _LEAD_RE.sub("", q)
    q = _MID_WH_RE.sub(", ", q, count=1)
    words = q.split()
    if words and words[0].lower() in _WH:
        words = words[1:]
        # "How many", "What kind of": these words belong to the wh-phrase
        if words and words[0].lower() in ("many", "much", "kind", "type", "sort"):
            words = words[1:]
            if words and words[0].lower() == "of":
                words = words[1:]
    if words and words[0].lower() in _AUX:
        words = words[1:]
    out = " ".join(words).strip()
    return out or question.strip()


__all__ = ["declarative_form", "is_yes_no_question"]
