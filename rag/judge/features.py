"""Claim-vs-context features for the offline judge: embedding alignment plus deterministic checks.

No NLI model can be installed here, so support is estimated from signals that each catch one way a
claim goes wrong: how well the claim aligns with the best sentence / 2-sentence window / whole
context (cosine of normalised sentence embeddings), how much of its content (words, IDF-weighted
words, bigrams) the context covers, and hard mismatches — numbers, named entities or acronyms
missing from the context, negation that differs from the best-aligned sentence, and opposite
direction words (``increases`` vs ``reduces``), the cue of most SciFact contradictions
(Wadden et al., 2020, "Fact or Fiction: Verifying Scientific Claims").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag.text.coverage import term_coverage
from rag.text.sentences import split_sentences

#: Bump when any feature changes: it is part of the fitted model's cache key.
FEATURE_VERSION = "judge-features-v2"

FEATURE_NAMES: tuple[str, ...] = (
    "cos_max",
    "cos_second",
    "cos_top3",
    "cos_window",
    "cos_context",
    "cov_best",
    "cov_best_lexical",
    "cov_context",
    "idf_cov_context",
    "bigram_cov_context",
    "num_missing",
    "has_number",
    "entity_missing",
    "negation_mismatch",
    "direction_conflict",
    "claim_len",
    "cov_top2",
    "idf_cov_best",
    "bigram_best",
    "num_present",
    "hedge_best",
    "cos_x_cov",
    "cos_gap",
)

_STOPWORDS = frozenset(
    """a an the and or of in on at to for from by with as is are was were be been being this that
    these those it its their there here which who whom whose what when where why how than then
    thus also can could may might must should would will shall do does did has have had having
    into onto over under between among through during about after before such via per both each
    other some any all most more very so if but only same our we they he she his her them us
    i you your one s""".split()
)
_NEGATIONS = frozenset(
    """no not never none nor without cannot neither lack lacks lacking absent absence fail fails
    failed unable nothing nobody n't""".split()
)
_UP = (
    "increas",
    "higher",
    "more",
    "greater",
    "improv",
    "enhanc",
    "promot",
    "elevat",
    "rais",
    "upregulat",
    "activat",
    "stimulat",
    "induc",
    "accelerat",
    "boost",
    "gain",
    "rise",
    "larger",
    "better",
    "positive",
)
_DOWN = (
    "decreas",
    "lower",
    "less",
    "fewer",
    "reduc",
    "inhibit",
    "suppress",
    "impair",
    "declin",
    "downregulat",
    "diminish",
    "attenuat",
    "prevent",
    "block",
    "loss",
    "smaller",
    "worse",
    "negative",
    "drop",
    "slow",
)
_HEDGES = frozenset(
    "may might suggest suggests suggested possible possibly associated could unclear".split()
)
_WORD_NUMBERS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "twice": "2",
    "half": "0.5",
}
_TOKEN_RE = re.compile(r"n't|[a-z0-9]+")
_NUMBER_RE = re.compile(r"(?<![A-Za-z])\d+(?:[.,]\d+)?")
_ENTITY_RE = re.compile(r"\b(?=\w*[A-Z0-9])(?=\w*[A-Za-z])[A-Za-z0-9][\w\-]*\b")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens, with ``n't`` split off as a negation."""
    text = text.lower().replace("n't", " n't").replace("-", "")
    return _TOKEN_RE.findall(text)


def stem(word: str) -> str:
    """A light suffix stripper: ``reduce``, ``reduces``, ``reduced``, ``reducing`` -> ``reduc``."""
    for suf in ("ies", "ing", "ed", "es", "s"):
        if word.endswith(suf) and len(word) - len(suf) >= 3 and not word.endswith("ss"):
            word = word[: -len(suf)] + ("y" if suf == "ies" else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def content_stems(text: str) -> list[str]:
    """Stems of the non-stopword tokens, in order."""
    return [stem(t) for t in tokens(text) if t not in _STOPWORDS and t not in _NEGATIONS]


def numbers(text: str) -> set[str]:
    """Numbers in ``text`` (digits and number words), normalised (``2.50`` -> ``2.5``)."""
    out = set()
    for m in _NUMBER_RE.findall(text):
        v = m.replace(",", "")
        out.add(v.rstrip("0").rstrip(".") if "." in v else v)
    out.update(_WORD_NUMBERS[t] for t in tokens(text) if t in _WORD_NUMBERS)
    return out


def entities(text: str) -> set[str]:
    """Acronyms and names with digits or inner capitals (``BRCA1``, ``mTOR``), lower-cased.

    A capital only at the start of the text is not an entity cue.
    """
    out = set()
    for m in _ENTITY_RE.finditer(text):
        w = m.group(0)
        inner_upper = any(c.isupper() for c in w[1:])
        if inner_upper or any(c.isdigit() for c in w) and any(c.isalpha() for c in w):
            out.add(w.lower().replace("-", ""))
    return out


def _negations(text: str) -> int:
    return sum(t in _NEGATIONS for t in tokens(text))


def _directions(text: str) -> tuple[bool, bool]:
    toks = tokens(text)
    up = any(t.startswith(_UP) for t in toks)
    down = any(t.startswith(_DOWN) for t in toks)
    return up, down


def _bigrams(words: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(words, words[1:], strict=False))


@dataclass(frozen=True, slots=True)
class ContextUnits:
    """A context split into the texts that get embedded: its sentences and the whole context."""

    sentences: tuple[str, ...]
    whole: str

    @property
    def texts(self) -> list[str]:
        return [*self.sentences, self.whole]


def context_units(context: str, max_sentences: int = 200) -> ContextUnits:
    """Split a context into sentences (at most ``max_sentences``)."""
    sents = tuple(split_sentences(context, mode="answer")[:max_sentences]) or (
        context.strip() or " ",
    )
    return ContextUnits(sents, context.strip() or " ")


def window_vectors(sentence_vecs: np.ndarray) -> np.ndarray:
    """Vectors of consecutive sentence pairs: the normalised sum of the two sentence vectors.

    A cheap stand-in for embedding each 2-sentence window (which would double the embedding
    cost); a claim that spans two sentences aligns with their sum better than with either.
    """
    if len(sentence_vecs) < 2:
        return sentence_vecs[:0]
    w = sentence_vecs[:-1] + sentence_vecs[1:]
    return w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)


def compute_idf(documents: Sequence[str]) -> dict[str, float]:
    """Smoothed inverse document frequency ``log((1 + N) / (1 + df)) + 1`` of content stems."""
    df: dict[str, int] = {}
    for doc in documents:
        for w in set(content_stems(doc)):
            df[w] = df.get(w, 0) + 1
    n = len(documents)
    return {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in sorted(df.items())}


def claim_features(
    claim: str,
    units: ContextUnits,
    claim_vec: np.ndarray,
    unit_vecs: np.ndarray,
    idf: Mapping[str, float],
) -> tuple[dict[str, float], dict]:
    """Features of one (claim, context) pair and a trace naming the best-aligned sentence.

    ``unit_vecs`` are the L2-normalised embeddings of ``units.texts`` in order.
    """
    n_s = len(units.sentences)
    sims = unit_vecs @ claim_vec
    s_sims = np.sort(sims[:n_s])[::-1]
    w_sims = window_vectors(unit_vecs[:n_s]) @ claim_vec
    best_i = int(np.argmax(sims[:n_s]))
    best = units.sentences[best_i]
    claim_words = content_stems(claim)
    sent_sets = [set(content_stems(s)) for s in units.sentences]
    ctx_words = content_stems(units.whole)
    ctx_set = set(ctx_words)
    claim_nums = numbers(claim)
    ctx_nums = numbers(units.whole)
    missing_nums = sorted(claim_nums - ctx_nums)
    claim_ents = entities(claim)
    ctx_text = units.whole.lower().replace("-", "")
    missing_ents = sorted(e for e in claim_ents if e not in ctx_text)
    c_up, c_down = _directions(claim)
    b_up, b_down = _directions(best)
    conflict = (c_up and not c_down and b_down and not b_up) or (
        c_down and not c_up and b_up and not b_down
    )
    feats = {
        "cos_max": float(s_sims[0]),
        "cos_second": float(s_sims[1] if n_s > 1 else s_sims[0]),
        "cos_top3": float(s_sims[:3].mean()),
        "cos_window": float(w_sims.max() if len(w_sims) else s_sims[0]),
        "cos_context": float(sims[-1]),
        "cov_best": term_coverage(claim_words, sent_sets[best_i]),
        "cov_best_lexical": max(term_coverage(claim_words, s) for s in sent_sets),
        "cov_context": term_coverage(claim_words, ctx_set),
        "idf_cov_context": term_coverage(claim_words, ctx_set, idf),
        "bigram_cov_context": (
            len(_bigrams(claim_words) & _bigrams(ctx_words)) / len(_bigrams(claim_words))
            if len(claim_words) > 1
            else 0.0
        ),
        "num_missing": float(min(len(missing_nums), 3)),
        "has_number": float(bool(claim_nums)),
        "entity_missing": len(missing_ents) / len(claim_ents) if claim_ents else 0.0,
        "negation_mismatch": float((_negations(claim) > 0) != (_negations(best) > 0)),
        "direction_conflict": float(conflict),
        "claim_len": math.log1p(len(claim_words)),
    }
    covs = [term_coverage(claim_words, s) for s in sent_sets]
    top = sorted(range(n_s), key=lambda i: (-covs[i], i))[:2]
    claim_bigrams = _bigrams(claim_words)
    feats |= {
        "cov_top2": term_coverage(claim_words, set().union(*(sent_sets[i] for i in top))),
        "idf_cov_best": max(term_coverage(claim_words, s, idf) for s in sent_sets),
        "bigram_best": max(
            len(claim_bigrams & _bigrams(content_stems(s))) / len(claim_bigrams)
            if claim_bigrams
            else 0.0
            for s in units.sentences
        ),
        "num_present": float(bool(claim_nums & ctx_nums)),
        "hedge_best": float(any(t in _HEDGES for t in tokens(best))),
        "cos_x_cov": feats["cos_max"] * feats["cov_best"],
        "cos_gap": feats["cos_max"] - feats["cos_top3"],
    }
    feats = {k: round(v, 6) for k, v in feats.items()}
    trace = {
        "best_sentence": best,
        "missing_numbers": missing_nums,
        "missing_entities": missing_ents,
    }
    return feats, trace
