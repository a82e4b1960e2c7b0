"""Rule-made entailment pairs: a true sentence altered into a claim whose label is known by rule.

Human-labelled entailment data in the lab's domain is scarce (~900 SciFact train pairs), too few to
teach a sentence encoder inference. Following FactCC (Kryscinski et al., 2020) and the way
SciFact's own CONTRADICT claims were written (Wadden et al., 2020, §3: a true claim altered), each
function here takes a source sentence (the *premise*) and returns a claim (the *hypothesis*) with
the label the change guarantees, or ``None`` when the rule does not apply:

* **contradicted** — :func:`flip_direction` (``increases`` → ``decreases``, ``outperforms`` →
  ``underperforms``), :func:`toggle_negation` (``is`` → ``is not`` and back), :func:`change_number`
  (a standalone figure scaled or shifted, its format kept), :func:`swap_entity` (a model, dataset
  or method name replaced by another named in the same document), :func:`reverse_comparison`
  (``A outperforms B`` → ``B outperforms A``), :func:`change_quantifier` (``all`` → ``no``,
  ``always`` → ``never``);
* **supported** — :func:`sub_span` (one clause of the sentence), :func:`drop_parenthetical`,
  :func:`restate_number` (``85%`` → ``85 percent``, ``3`` → ``three``), :func:`report_frame`
  (``The study reports that …``);
* **not said** — :func:`add_detail` (the sentence plus a specific detail from elsewhere in the
  document), :func:`hedge_to_certain` (``may improve`` → ``will improve``); the nearest *other*
  sentence of the document is paired by :mod:`rag.judge.nli_data`.

Every function is deterministic given its ``rng`` and testable on fixed sentences
(``tests/test_judge_synth.py``). Labels follow the 3-way head's order :data:`NLI_LABELS`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

NliLabel = Literal["not_said", "supported", "contradicted"]
#: The 3-way head's classes, in logit order.
NLI_LABELS: tuple[NliLabel, ...] = ("not_said", "supported", "contradicted")

#: Bump when a rule changes: part of the content key of the built data.
SYNTH_VERSION = "synth-v1"


@dataclass(frozen=True, slots=True)
class Pair:
    """One training pair: a premise (the source), a hypothesis (the claim) and how it was made."""

    premise: str
    hypothesis: str
    label: NliLabel
    kind: str


_DIRECTION = {
    "increase": "decrease",
    "increases": "decreases",
    "increased": "decreased",
    "increasing": "decreasing",
    "higher": "lower",
    "improve": "degrade",
    "improves": "degrades",
    "improved": "degraded",
    "improving": "degrading",
    "outperform": "underperform",
    "outperforms": "underperforms",
    "outperformed": "underperformed",
    "better": "worse",
    "best": "worst",
    "larger": "smaller",
    "greater": "smaller",
    "faster": "slower",
    "positive": "negative",
    "positively": "negatively",
    "enhances": "reduces",
    "enhanced": "reduced",
    "promotes": "inhibits",
    "promoted": "inhibited",
    "activates": "inhibits",
    "activated": "inhibited",
    "rises": "falls",
    "rose": "fell",
    "gains": "losses",
    "upregulated": "downregulated",
    "strong": "weak",
    "stronger": "weaker",
    "effective": "ineffective",
    "beneficial": "harmful",
    "benefits": "harms",
    "more": "less",
    "maximize": "minimize",
    "maximizes": "minimizes",
}
DIRECTION_PAIRS: dict[str, str] = {**_DIRECTION, **{v: k for k, v in _DIRECTION.items()}}
# "less" would map back to "more" and "smaller" to one of two words: keep the first reading.
DIRECTION_PAIRS.update(
    {
        "smaller": "larger",
        "less": "more",
        "reduces": "increases",
        "reduced": "increased",
        "inhibits": "promotes",
        "inhibited": "promoted",
    }
)

_AUX = r"is|are|was|were|can|does|do|did|has|have|had|will|would|should|must"
#: Auxiliaries a negation is inserted after; ``may``/``might``/``could`` are left out (``may not``
#: does not contradict ``may``).
_AUX_RE = re.compile(rf"\b({_AUX})\b(?! not\b)(?!n't)", re.IGNORECASE)
_NEGATED_RE = re.compile(rf"\b({_AUX}) not\b|\b(cannot)\b", re.IGNORECASE)

_QUANTIFIERS = {
    "all": "no",
    "always": "never",
    "never": "always",
    "every": "no",
    "most": "few",
    "many": "few",
    "few": "many",
    "none": "all",
    "consistently": "rarely",
    "rarely": "consistently",
}

#: A standalone number: not glued to letters or a hyphen (``GPT-3``, ``p53``, ``ResNet50`` stay).
_NUMBER_RE = re.compile(r"(?<![\w\-.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w\-]|\.\d)(\s?%)?")
#: Names a paper uses for models, datasets and methods: two capitals, or a capital and a digit.
_ENTITY_RE = re.compile(r"\b(?=\w*[A-Z]\w*[A-Z0-9])[A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*\b")
_COMPARE_RE = re.compile(
    r"\b([A-Z][\w\-]*(?: [A-Z0-9][\w\-]*)?) (outperforms|outperformed|beats|beat|surpasses|"
    r"surpassed|exceeds|exceeded|is better than|was better than|is preferred over) "
    r"([A-Z][\w\-]*(?: [A-Z0-9][\w\-]*)?)"
)
#: A figure right after these words names a table, figure or section, not a quantity.
_REF_BEFORE = re.compile(
    r"(?:Table|Tab\.|Figure|Fig\.|Section|Sec\.|Eq\.|Equation|Appendix|Step|Layer)\s*$",
    re.IGNORECASE,
)
_PAREN_RE = re.compile(r"\s*\([^()]{1,120}\)")
_CLAUSE_RE = re.compile(r"(?:;|, (?:and|but|while|whereas|which|although)) ")
_SMALL = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_HEDGE_RE = re.compile(r"\b(may|might|could|can potentially|can) (\w+)", re.IGNORECASE)


def _match_case(new: str, old: str) -> str:
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _replace_word(text: str, table: dict[str, str], rng: random.Random) -> str | None:
    """``text`` with one word (chosen by ``rng`` among those in ``table``) replaced."""
    spots = [m for m in re.finditer(r"[A-Za-z][A-Za-z\-]*", text) if m.group(0).lower() in table]
    if not spots:
        return None
    m = rng.choice(spots)
    new = _match_case(table[m.group(0).lower()], m.group(0))
    return text[: m.start()] + new + text[m.end() :]


def flip_direction(sentence: str, rng: random.Random) -> str | None:
    """Contradicted: one direction or polarity word replaced by its opposite."""
    return _replace_word(sentence, DIRECTION_PAIRS, rng)


def toggle_negation(sentence: str, rng: random.Random) -> str | None:
    """Contradicted: ``is`` → ``is not`` (or a negation removed) at one auxiliary verb.

    Sentences with two or more negations are skipped (a removed one may not flip the meaning).
    """
    negs = list(_NEGATED_RE.finditer(sentence))
    if len(negs) + len(re.findall(r"\b(no|never|n't)\b", sentence)) > 1:
        return None
    if negs:
        m = negs[0]
        keep = m.group(1) or "can"
        return sentence[: m.start()] + _match_case(keep, m.group(0)) + sentence[m.end() :]
    if re.search(r"\b(no|never|without|may|might|could)\b|n't", sentence, re.IGNORECASE):
        return None
    spots = list(_AUX_RE.finditer(sentence))
    if not spots:
        return None
    m = rng.choice(spots[:2])
    return sentence[: m.end()] + " not" + sentence[m.end() :]


def _format_like(value: float, text: str) -> str:
    if "," in text:
        return f"{round(value):,}"
    if "." in text:
        places = len(text.split(".")[1])
        return f"{value:.{places}f}"
    return str(round(value))


def change_number(sentence: str, rng: random.Random) -> str | None:
    """Contradicted: one standalone figure changed by a factor or a shift, its format kept.

    Years (1900–2030) move by a few years; percentages and scores shift by a visible amount; a
    figure that would not change after formatting is skipped.
    """
    spots = [
        m for m in _NUMBER_RE.finditer(sentence) if not _REF_BEFORE.search(sentence, 0, m.start())
    ]
    if not spots:
        return None
    m = rng.choice(spots)
    text, pct = m.group(1), m.group(2) or ""
    value = float(text.replace(",", ""))
    if "." not in text and 1900 <= value <= 2030 and not pct:
        new = str(int(value) + rng.choice((-3, -2, 2, 3)))
    elif pct or (0 < value <= 100 and "." in text):
        step = max(abs(value) * rng.choice((0.2, 0.3, 0.5)), 1.0 if not 0 < value < 1 else 0.1)
        value2 = (
            value + step
            if value + step <= (100 if pct else 1e9) and rng.random() < 0.5
            else value - step
        )
        if value2 <= 0:
            value2 = value + step
        new = _format_like(value2, text)
    else:
        new = _format_like(
            value * rng.choice((2, 3, 0.5)) if value >= 2 else value + rng.choice((2, 3)), text
        )
    if new == text:
        return None
    return sentence[: m.start(1)] + new + sentence[m.end(1) :]


def document_entities(sentences: Sequence[str]) -> list[str]:
    """The model, dataset and method names of a document, in order of first use."""
    seen: dict[str, None] = {}
    for s in sentences:
        for m in _ENTITY_RE.finditer(s):
            name = m.group(0)
            # all-capital words of six letters or more are section labels (RESULTS), not names
            if len(name) >= 2 and not (name.isalpha() and name.isupper() and len(name) >= 6):
                seen.setdefault(name)
    return list(seen)


def swap_entity(sentence: str, others: Sequence[str], rng: random.Random) -> str | None:
    """Contradicted: one name replaced by another name of the same document not in the sentence.

    Names of one kind are not told apart (a model may be swapped for a dataset): the claim is
    still false of the source, which is what the label says.
    """
    here = [
        m
        for m in _ENTITY_RE.finditer(sentence)
        if m.start() > 0
        and len(m.group(0)) >= 2
        and not (m.group(0).isalpha() and m.group(0).isupper() and len(m.group(0)) >= 6)
    ]
    pool = [
        e
        for e in others
        if e not in sentence and not any(e in h.group(0) or h.group(0) in e for h in here)
    ]
    if not here or not pool:
        return None
    m, new = rng.choice(here), rng.choice(pool)
    return sentence[: m.start()] + new + sentence[m.end() :]


def reverse_comparison(sentence: str, rng: random.Random) -> str | None:
    """Contradicted: ``A outperforms B`` → ``B outperforms A``."""
    m = _COMPARE_RE.search(sentence)
    if not m or m.group(1) == m.group(3):
        return None
    return sentence[: m.start()] + f"{m.group(3)} {m.group(2)} {m.group(1)}" + sentence[m.end() :]


def change_quantifier(sentence: str, rng: random.Random) -> str | None:
    """Contradicted: a quantifier or frequency word replaced by one that excludes it."""
    return _replace_word(sentence, _QUANTIFIERS, rng)


def _as_sentence(text: str) -> str:
    text = text.strip().rstrip(",;:")
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def sub_span(sentence: str, rng: random.Random) -> str | None:
    """Supported: the first clause of a sentence that has several (a part the sentence asserts).

    Only the leading clause is taken: later clauses often lean on it (``which``, ``it``).
    """
    parts = _CLAUSE_RE.split(sentence, maxsplit=1)
    if len(parts) < 2 or len(parts[0].split()) < 6:
        return None
    return _as_sentence(parts[0])


def drop_parenthetical(sentence: str, rng: random.Random) -> str | None:
    """Supported: the sentence without its parenthetical remarks."""
    out = _PAREN_RE.sub("", sentence)
    return out if out != sentence and len(out.split()) >= 6 else None


def restate_number(sentence: str, rng: random.Random) -> str | None:
    """Supported: one figure written another way (``85%`` ↔ ``85 percent``, ``3`` → ``three``,
    ``1,000`` → ``1000``)."""
    for m in _NUMBER_RE.finditer(sentence):
        text, pct = m.group(1), m.group(2)
        if pct:
            new = f"{text} percent"
        elif "," in text:
            new = text.replace(",", "")
        elif (
            text.isdigit()
            and int(text) <= 10
            and not re.match(r"\s*(?:\)|\]|%|\.\d)", sentence[m.end() :])
        ):
            new = _SMALL[int(text)]
        else:
            continue
        return sentence[: m.start()] + new + sentence[m.end() :]
    m = re.search(r"(\d+(?:\.\d+)?) percent\b", sentence)
    if m:
        return sentence[: m.start()] + f"{m.group(1)}%" + sentence[m.end() :]
    return None


_FRAMES = (
    "The study reports that ",
    "The authors find that ",
    "According to the paper, ",
    "The paper states that ",
    "It was found that ",
)


def report_frame(sentence: str, rng: random.Random) -> str | None:
    """Supported: the sentence as an answer reports it (``The authors find that …``)."""
    if not sentence[:1].isalpha() or sentence.split()[0].isupper():
        return None
    body = sentence[:1].lower() + sentence[1:]
    return rng.choice(_FRAMES) + body


def add_detail(sentence: str, details: Sequence[str], rng: random.Random) -> str | None:
    """Not said: the sentence plus a specific detail (a name from elsewhere in the document) that
    it does not give."""
    pool = [d for d in details if d not in sentence]
    if not pool or not sentence.endswith("."):
        return None
    d = rng.choice(pool)
    tail = rng.choice((f" on {d}", f" when compared with {d}", f" in experiments with {d}"))
    return sentence[:-1] + tail + "."


def hedge_to_certain(sentence: str, rng: random.Random) -> str | None:
    """Not said: a possibility stated as a certainty (``may improve`` → ``will always improve``)."""
    m = _HEDGE_RE.search(sentence)
    if not m or m.group(2).lower() in ("be", "not", "also"):
        return None
    return (
        sentence[: m.start()]
        + _match_case("will", m.group(1))
        + f" always {m.group(2)}"
        + sentence[m.end() :]
    )


#: The single-sentence rules by name, with the label each guarantees.
RULES: dict[str, tuple[NliLabel, Callable[[str, random.Random], str | None]]] = {
    "direction": ("contradicted", flip_direction),
    "negation": ("contradicted", toggle_negation),
    "number": ("contradicted", change_number),
    "comparison": ("contradicted", reverse_comparison),
    "quantifier": ("contradicted", change_quantifier),
    "sub_span": ("supported", sub_span),
    "parenthetical": ("supported", drop_parenthetical),
    "number_restated": ("supported", restate_number),
    "report_frame": ("supported", report_frame),
    "hedge_to_certain": ("not_said", hedge_to_certain),
}


def variants(sentence: str, document: Sequence[str], rng: random.Random) -> list[Pair]:
    """Every rule that applies to ``sentence`` (its document supplies names and details)."""
    out = []
    for kind, (label, rule) in RULES.items():
        claim = rule(sentence, rng)
        if claim and claim != sentence:
            out.append(Pair(sentence, claim, label, kind))
    names = document_entities([s for s in document if s != sentence])
    claim = swap_entity(sentence, names, rng)
    if claim:
        out.append(Pair(sentence, claim, "contradicted", "entity"))
    claim = add_detail(sentence, names, rng)
    if claim:
        out.append(Pair(sentence, claim, "not_said", "extra_detail"))
    return out


__all__ = [
    "DIRECTION_PAIRS",
    "NLI_LABELS",
    "RULES",
    "SYNTH_VERSION",
    "NliLabel",
    "Pair",
    "add_detail",
    "change_number",
    "change_quantifier",
    "document_entities",
    "drop_parenthetical",
    "flip_direction",
    "hedge_to_certain",
    "report_frame",
    "restate_number",
    "reverse_comparison",
    "sub_span",
    "swap_entity",
    "toggle_negation",
    "variants",
]
