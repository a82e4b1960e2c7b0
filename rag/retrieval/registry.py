"""Rerankers by name, as profiles and the CLI spell them (``"fuse:e5-small"``, ``"ict-minilm"``).

Kept apart from :mod:`rag.retrieval.rerank` (the reranker classes) and :mod:`rag.retrieval.ict`
(the trained model), which it both loads, so neither of those imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag.errors import ConfigError
from rag.ir import Reranker
from rag.retrieval.rerank import CrossEncoderReranker, EmbedderReranker, FirstStageFusion


def load_reranker(name: str) -> Reranker:
    """A reranker by name: embedder names joined by ``+`` (bi-encoder re-scoring, z-score ensemble)
    such as ``"e5-small"`` or ``"minilm+e5-small"``, ``"ict-minilm"`` for the cross-encoder trained
    here by ``rag train-ict`` (:mod:`rag.retrieval.ict`), or ``"cross-encoder:<path or id>"`` for a
    sentence-transformers CrossEncoder whose weights are available locally. The prefix ``"fuse:"``
    (e.g. ``"fuse:minilm+e5-small"``) fuses that reranker's order with the first stage's by RRF
    (:class:`~rag.retrieval.rerank.FirstStageFusion`)."""
    from rag.index.embed import load_embedder

    if name.startswith("fuse:"):
        return FirstStageFusion(load_reranker(name.split(":", 1)[1]))
    if name.startswith("cross-encoder:"):
        return CrossEncoderReranker(name.split(":", 1)[1])
    if name == "ict-minilm":
        from rag.retrieval.ict import load_ict_reranker

        return load_ict_reranker()
    parts = [p for p in name.split("+") if p]
    if not parts:
        raise ConfigError(
            f"reranker name {name!r} is empty; use e.g. 'e5-small' or 'cross-encoder:<path>'"
        )
    return EmbedderReranker([load_embedder(p) for p in parts])


def reranker_for(retrievers: Sequence[str], name: str) -> Reranker | None:
    """The ``rerank`` row's second stage, loaded only when ``retrievers`` has a ``rerank`` row.

    Loading costs seconds (e5-small: ~7 s to expand its weights), which a profile without the
    row (the default report's) should not pay.
    """
    return load_reranker(name) if "rerank" in retrievers else None


def load_rerankers(names: Sequence[str]) -> tuple[dict[str, Reranker], dict[str, str]]:
    """Load each named reranker once; those that cannot load are returned as ``{name: reason}``."""
    loaded: dict[str, Reranker] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            loaded[name] = load_reranker(name)
        except ConfigError as e:
            skipped[f"rerank:{name}"] = str(e)
    return loaded, skipped
