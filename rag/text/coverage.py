"""Term coverage: what share of a question's (or claim's) terms a text contains.

The extractive answerers decline unless a sentence covers enough of the question's distinct
terms, and the offline judge measures how much of a claim its context covers; both ask this one
question of already tokenized terms, so the tokenizer stays the caller's choice (BM25 terms for
the answerers, content stems for the judge).

Fuzzy quote matching in :mod:`rag.evaluation.evidence` is a different measure (characters of a
quote aligned inside a window of text), not term coverage.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


def term_coverage(
    terms: Sequence[str],
    found: Collection[str],
    weights: Mapping[str, float] | None = None,
) -> float:
    """Share of ``terms`` that occur in ``found``; 0.0 when there are no terms.

    Every entry of ``terms`` counts once per occurrence, so pass distinct terms for "share of
    the distinct terms". With ``weights`` (e.g. IDF), each term counts with its weight, and a term
    without one takes the largest weight (an unseen term is as rare as the rarest seen one):
    ``sum(w_t for t in terms if t in found) / sum(w_t for t in terms)``.

    Args:
        terms: the query's or claim's terms.
        found: the terms of the text (a set, for fast membership).
        weights: optional per-term weights.
    """
    if not terms:
        return 0.0
    if weights is None:
        return sum(t in found for t in terms) / len(terms)
    default = max(weights.values(), default=1.0)
    ws = [weights.get(t, default) for t in terms]
    return sum(w for t, w in zip(terms, ws, strict=True) if t in found) / sum(ws)


__all__ = ["term_coverage"]
