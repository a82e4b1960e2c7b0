"""Contradiction cues for the offline judge: negation, antonyms, numbers, comparatives, flips.

Alignment features (:mod:`rag.judge.features`) see *whether* a context speaks about a claim; a
contradicted claim aligns as well as a supported one, which is why the v1 judge passed 42 of 71
SciFact dev contradictions. SciFact's contradicting claims are mostly the supporting claim with
its polarity reversed — a negation added, an antonym swapped (``increases`` -> ``decreases``,
``positively`` -> ``negatively``), a number or a comparison changed (Wadden et al., 2020, §3).
So this module compares the claim with the context sentences it aligns with best and reports:

* **negation** — the claim is negated (``not``, ``no``, ``never``, ``fails to``, ``lack``,
  ``in-``/``un-`` adjectives such as ``ineffective``) and whether its negation parity differs from
  the aligned sentence's;
* **antonyms** — a word only the claim has and a word only the sentence has form an antonym
  pair (:data:`ANTONYM_PAIRS`);
* **signed direction** — the direction (up/down) times the negation sign, opposite in claim and
  sentence (``does not reduce`` vs ``increased``);
* **numbers** — the claim's numbers are absent from a sentence that carries other numbers;
* **comparatives** — ``more``/``less`` or ``higher``/``lower`` *than* flipped;
* **flip gain** — the claim with its polarity flipped (:func:`flip_claim`) is embedded and
  compared with the context: when the flipped claim aligns better than the claim, the context
  more likely says the opposite. It is the one cue that uses the embedder; the others are rules.

Every function is deterministic and testable on hand-written pairs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

from rag.judge.features import numbers, stem, tokens

#: Bump when a cue changes: it is part of the v2 judge's cache key.
CONTRAST_VERSION = "contrast-v1"

CONTRAST_NAMES: tuple[str, ...] = (
    "claim_negated",
    "claim_absolute",
    "neg_mismatch_best",
    "neg_mismatch_top3",
    "antonym_best",
    "antonym_top3",
    "direction_flip_best",
    "direction_flip_top3",
    "number_conflict",
    "comparative_flip",
    "flip_gain",
    "flip_gain_pos",
    "cue_any_x_cos",
)

_NEGATION_WORDS = frozenset(
    """no not never none nor neither cannot without lack lacks lacking lacked absent absence
    fail fails failed failing unable nothing nobody n't unrelated unaffected insignificant
    nonsignificant ineffective inefficient inactive independent unchanged unlikely""".split()
)
#: Phrases read as one negation (their words are not counted again).
_NEGATION_PHRASES = ("no longer", "rather than", "instead of")

#: Antonym groups, as stems (``stem`` of :mod:`rag.judge.features`) or stem prefixes: a word
#: matches a side when its stem starts with one of the side's entries.
ANTONYM_PAIRS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        (
            "increas",
            "higher",
            "high",
            "rais",
            "elevat",
            "upregulat",
            "up-regulat",
            "gain",
            "rise",
            "rose",
            "more",
            "greater",
            "larger",
            "enhanc",
            "promot",
            "improv",
            "accelerat",
            "stimulat",
            "activat",
            "induc",
            "boost",
            "augment",
            "exceed",
            "potentiat",
            "amplif",
            "overexpress",
            "better",
            "stronger",
            "faster",
            "longer",
            "expan",
        ),
        (
            "decreas",
            "lower",
            "low",
            "reduc",
            "downregulat",
            "down-regulat",
            "loss",
            "lost",
            "declin",
            "less",
            "fewer",
            "smaller",
            "impair",
            "inhibit",
            "suppress",
            "attenuat",
            "slow",
            "diminish",
            "block",
            "prevent",
            "abolish",
            "abrogat",
            "deplet",
            "repress",
            "worse",
            "weaker",
            "shorter",
            "drop",
            "fell",
            "fall",
            "lessen",
            "contract",
        ),
    ),
    (("positiv",), ("negativ", "invers")),
    (
        ("effectiv", "efficac", "beneficial", "benefit", "safe", "protect"),
        ("ineffectiv", "harm", "unsafe", "toxic", "detriment", "adverse", "risk"),
    ),
    (
        ("same", "similar", "identical", "comparabl", "equal", "equival"),
        ("differ", "distinct", "dissimilar", "unequal"),
    ),
    (("presen", "detect"), ("absen", "undetect")),
    (
        ("necessar", "requir", "essential", "indispensabl", "critical", "crucial"),
        ("dispensabl", "unnecessar", "redundant"),
    ),
    (("sufficient",), ("insufficient",)),
    (
        ("common", "frequent", "prevalent", "major", "most"),
        ("rare", "infrequent", "uncommon", "minor", "least"),
    ),
    (("early", "earlier", "before", "prior"), ("late", "later", "after")),
    (("strong",), ("weak",)),
    (("sensitiv", "susceptib"), ("resist", "toleran", "insensitiv")),
    (("agonist", "activator"), ("antagonist", "repressor")),
    (("correlat", "associat", "link", "relat"), ("uncorrelat", "unassociat", "unlink", "unrelat")),
    (("significant",), ("insignificant", "nonsignificant")),
    (("dependent",), ("independent",)),
    (("accurat", "reliabl"), ("inaccurat", "unreliabl")),
    (("men", "male", "boy"), ("women", "female", "girl")),
    (("upstream",), ("downstream",)),
    (("dominant",), ("recessiv",)),
    (("all", "always", "every"), ("none", "never", "some", "only")),
)
_ABSOLUTES = frozenset(
    "all always never none only every exclusively entirely completely solely sole must".split()
)
_COMPARATIVE_RE = re.compile(
    r"\b(more|less|fewer|higher|lower|greater|smaller|larger|better|worse|longer|shorter|"
    r"increased|decreased|reduced|elevated)\b(?:\s+\w+){0,3}?\s+(?:than|compared)",
    re.IGNORECASE,
)
_FLIP_WORDS = {
    "increase": "decrease",
    "increases": "decreases",
    "increased": "decreased",
    "increasing": "decreasing",
    "decrease": "increase",
    "decreases": "increases",
    "decreased": "increased",
    "decreasing": "increasing",
    "higher": "lower",
    "lower": "higher",
    "more": "less",
    "less": "more",
    "fewer": "more",
    "greater": "smaller",
    "smaller": "greater",
    "larger": "smaller",
    "reduces": "increases",
    "reduce": "increase",
    "reduced": "increased",
    "reducing": "increasing",
    "enhances": "inhibits",
    "enhance": "inhibit",
    "enhanced": "inhibited",
    "inhibits": "enhances",
    "inhibit": "enhance",
    "inhibited": "enhanced",
    "promotes": "inhibits",
    "promote": "inhibit",
    "promoted": "inhibited",
    "improves": "worsens",
    "improve": "worsen",
    "improved": "worsened",
    "positively": "negatively",
    "negatively": "positively",
    "positive": "negative",
    "negative": "positive",
    "upregulates": "downregulates",
    "downregulates": "upregulates",
    "upregulated": "downregulated",
    "downregulated": "upregulated",
    "activates": "inhibits",
    "activated": "inhibited",
    "suppresses": "activates",
    "suppressed": "activated",
    "elevated": "reduced",
    "raises": "lowers",
    "lowers": "raises",
    "better": "worse",
    "worse": "better",
    "effective": "ineffective",
    "ineffective": "effective",
    "associated": "unassociated",
    "high": "low",
    "low": "high",
    "prevents": "causes",
    "causes": "prevents",
    "protects": "harms",
    "safe": "unsafe",
}
_AUX_RE = re.compile(
    r"\b(is|are|was|were|can|could|does|do|did|has|have|had|will|may|might|should)\b",
    re.IGNORECASE,
)
_NEG_AUX_RE = re.compile(
    r"\b(is|are|was|were|can|could|does|do|did|has|have|had|will|may|might|should)\s+not\b|"
    r"\b(doesn't|don't|didn't|isn't|aren't|wasn't|weren't|cannot|can't)\b",
    re.IGNORECASE,
)


def negation_count(text: str) -> int:
    """Negation cues in ``text`` (words like ``not``/``never``/``fails``, negative adjectives)."""
    low = text.lower()
    n = sum(low.count(p) for p in _NEGATION_PHRASES)
    for p in _NEGATION_PHRASES:
        low = low.replace(p, " ")
    return n + sum(t in _NEGATION_WORDS for t in tokens(low))


def is_negated(text: str) -> bool:
    """Odd negation parity: ``not`` negates, ``not ... without`` does not."""
    return negation_count(text) % 2 == 1


def _matches(word: str, s: str, entry: str) -> bool:
    # Short entries must be the whole word (``more`` is not ``moreover``).
    if len(entry) <= 4:
        return entry in (word, s)
    return s.startswith(entry) or word.startswith(entry)


@functools.lru_cache(maxsize=1 << 16)
def _side(word: str) -> tuple[int, int] | None:
    """(antonym group, side) of a word, or None. Memoised: a pure function of the word, and the
    scan over every antonym entry was most of the judge's own (non-embedding) time."""
    s = stem(word)
    for g, (a, b) in enumerate(ANTONYM_PAIRS):
        # Negative side first: ``ineffective`` must not match ``effectiv``.
        if any(_matches(word, s, p) for p in b):
            return g, 1
        if any(_matches(word, s, p) for p in a):
            return g, 0
    return None


def sides(text: str) -> set[tuple[int, int]]:
    """All (antonym group, side) pairs the words of ``text`` fall on."""
    return {sd for t in tokens(text) if (sd := _side(t)) is not None}


def antonym_conflict(claim: str, sentence: str) -> list[tuple[str, str]]:
    """Antonym pairs (claim word, sentence word) where the claim word is absent from the sentence
    and the sentence word absent from the claim, e.g. ``("decreased", "elevated")``."""
    ct, st = tokens(claim), tokens(sentence)
    c_stems, s_stems = {stem(t) for t in ct}, {stem(t) for t in st}
    c_only = [t for t in ct if stem(t) not in s_stems]
    s_only = [t for t in st if stem(t) not in c_stems]
    s_sides = {}
    for t in s_only:
        sd = _side(t)
        if sd is not None:
            s_sides.setdefault(sd, t)
    out = []
    for t in c_only:
        sd = _side(t)
        if sd is not None and (sd[0], 1 - sd[1]) in s_sides:
            pair = (t, s_sides[(sd[0], 1 - sd[1])])
            if pair not in out:
                out.append(pair)
    return out


def direction(text: str) -> int:
    """Signed direction: +1 up, -1 down, 0 none or both, times -1 when the text is negated."""
    toks = tokens(text)
    sds = [_side(t) for t in toks]
    up = any(sd == (0, 0) for sd in sds)
    down = any(sd == (0, 1) for sd in sds)
    d = 0 if up == down else (1 if up else -1)
    return -d if is_negated(text) else d


def comparatives(text: str) -> set[int]:
    """Directions of ``X-er than`` / ``X-ed compared`` phrases in ``text`` (+1 / -1)."""
    out = set()
    for m in _COMPARATIVE_RE.finditer(text):
        sd = _side(m.group(1).lower())
        if sd is not None and sd[0] == 0:
            out.add(1 if sd[1] == 0 else -1)
    return out


def number_conflict(claim: str, sentence: str) -> bool:
    """The claim states numbers, the sentence states others, and they share none."""
    cn, sn = numbers(claim), numbers(sentence)
    return bool(cn) and bool(sn) and not (cn & sn)


def flip_claim(claim: str) -> str:
    """The claim with its polarity reversed, for the flip-gain cue.

    Removes a negation (``does not improve`` -> ``does improve``); otherwise swaps the first
    direction/antonym word (``increases`` -> ``decreases``); otherwise negates the first auxiliary
    (``is`` -> ``is not``); otherwise prefixes ``It is not true that``.
    """
    if _NEG_AUX_RE.search(claim):
        return _NEG_AUX_RE.sub(
            lambda m: (
                m.group(1)
                or {"cannot": "can", "can't": "can"}.get(
                    m.group(2).lower(), m.group(2).lower().replace("n't", "")
                )
            ),
            claim,
            count=1,
        )
    for neg in (" no ", " not ", " never "):
        if neg in f" {claim} ":
            return f" {claim} ".replace(neg, " ", 1).strip()
    words = claim.split(" ")
    for i, w in enumerate(words):
        core = w.strip(".,;:()")
        repl = _FLIP_WORDS.get(core.lower())
        if repl is not None:
            if core[:1].isupper():
                repl = repl[:1].upper() + repl[1:]
            words[i] = w.replace(core, repl, 1)
            return " ".join(words)
    if _AUX_RE.search(claim):
        return _AUX_RE.sub(lambda m: m.group(1) + " not", claim, count=1)
    return f"It is not true that {claim[:1].lower()}{claim[1:]}"


def contrast_features(
    claim: str,
    sentences: Sequence[str],
    sims: np.ndarray,
    flip_sims: np.ndarray,
    top: int = 3,
) -> tuple[dict[str, float], dict]:
    """Contradiction cues of one claim against a context's sentences.

    Args:
        claim: the claim.
        sentences: the context's sentences.
        sims: cosine of the claim with each sentence.
        flip_sims: cosine of :func:`flip_claim` of the claim with each sentence.
        top: how many best-aligned sentences the ``*_top3`` cues look at.

    Returns:
        ``(features in CONTRAST_NAMES order as a dict, trace)``; the trace names the cues found.
    """
    order = sorted(range(len(sentences)), key=lambda i: (-float(sims[i]), i))[:top]
    best = sentences[order[0]]
    c_neg = is_negated(claim)
    c_dir = direction(claim)
    c_cmp = comparatives(claim)
    neg_mm, ant, dflip, cues = [], [], [], []
    for i in order:
        s = sentences[i]
        mm = c_neg != is_negated(s)
        pairs = antonym_conflict(claim, s)
        s_dir = direction(s)
        fl = c_dir * s_dir < 0
        neg_mm.append(mm)
        ant.append(bool(pairs))
        dflip.append(fl)
        if pairs:
            cues.append(f"antonyms {pairs[:2]} in sentence {i}")
        if fl:
            cues.append(f"direction {c_dir:+d} vs {s_dir:+d} in sentence {i}")
    cmp_flip = any(
        -d in comparatives(sentences[i]) and d not in comparatives(sentences[i])
        for i in order
        for d in c_cmp
    )
    num_conf = number_conflict(claim, best)
    if num_conf:
        cues.append(f"numbers {sorted(numbers(claim))} vs {sorted(numbers(best))[:5]}")
    if cmp_flip:
        cues.append("comparative flipped")
    gain = float(np.max(flip_sims) - np.max(sims)) if len(sims) else 0.0
    cos_best = float(sims[order[0]])
    any_cue = ant[0] or dflip[0] or (neg_mm[0]) or cmp_flip
    feats = {
        "claim_negated": float(c_neg),
        "claim_absolute": float(any(t in _ABSOLUTES for t in tokens(claim))),
        "neg_mismatch_best": float(neg_mm[0]),
        "neg_mismatch_top3": float(np.mean(neg_mm)),
        "antonym_best": float(ant[0]),
        "antonym_top3": float(np.mean(ant)),
        "direction_flip_best": float(dflip[0]),
        "direction_flip_top3": float(np.mean(dflip)),
        "number_conflict": float(num_conf),
        "comparative_flip": float(cmp_flip),
        "flip_gain": gain,
        "flip_gain_pos": max(gain, 0.0),
        "cue_any_x_cos": float(any_cue) * cos_best,
    }
    return {k: round(v, 6) for k, v in feats.items()}, {"contradiction_cues": cues}
