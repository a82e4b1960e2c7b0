"""Noisy-context baselines: the retrieved chunks plus random chunks of other papers.

Two perturbations from the RAG-robustness literature (Chen et al., 2024, "Benchmarking Large
Language Models in Retrieval-Augmented Generation", noise robustness and negative rejection;
Cuconasu et al., 2024, "The Power of Noise"):

- :func:`add_distractors`: the ``k`` retrieved hits plus ``m`` chunks drawn at random from papers
  none of the hits comes from, scored below every real hit (so "edges" ordering puts them in the
  middle);
- the same with the gold-relevant chunks removed first (``drop``): does the answerer stay
  faithful, or decline, when the evidence is gone?

Draws are seeded per question (``seed`` and the question id), so a re-run sees the same noise.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence

from rag.errors import ConfigError
from rag.types import Chunk, Hit


def _rng(seed: int, qid: str) -> random.Random:
    h = hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def add_distractors(
    qid: str,
    hits: Sequence[Hit],
    pool: Sequence[Chunk],
    m: int,
    *,
    seed: int = 0,
    drop: Iterable[str] = (),
) -> list[Hit]:
    """``hits`` without the ``drop`` chunk ids, plus ``m`` random chunks of other papers.

    Raises:
        ConfigError: ``m`` < 0, or fewer than ``m`` chunks of other papers in ``pool``.
    """
    if m < 0:
        raise ConfigError(f"m={m}: the number of distractor chunks must be >= 0")
    drop_ids = set(drop)
    kept = [h for h in hits if h.chunk_id not in drop_ids]
    papers = {h.paper_id for h in hits}
    others = sorted((c for c in pool if c.paper_id not in papers), key=lambda c: c.chunk_id)
    if len(others) < m:
        raise ConfigError(f"only {len(others)} chunks of other papers in the pool, need m={m}")
    floor = min((h.score for h in hits), default=0.0)
    picked = _rng(seed, qid).sample(others, m)
    noise = [
        Hit(c.chunk_id, c.paper_id, c.page_start, c.section, c.text, floor - 1.0 - i)
        for i, c in enumerate(picked)
    ]
    return kept + noise


def noisy_hits(
    hits_by_qid: Mapping[str, Sequence[Hit]],
    pool: Sequence[Chunk],
    m: int,
    *,
    seed: int = 0,
    relevant: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, list[Hit]]:
    """:func:`add_distractors` for every question; with ``relevant`` (chunk qrels) the chunks
    graded > 0 are removed first."""
    out = {}
    for qid, hits in hits_by_qid.items():
        drop = [d for d, g in (relevant or {}).get(qid, {}).items() if g > 0]
        out[qid] = add_distractors(qid, hits, pool, m, seed=seed, drop=drop)
    return out


__all__ = ["add_distractors", "noisy_hits"]
