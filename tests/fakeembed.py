"""A deterministic bag-of-words embedder for tests: each word hashes to one of 64 dimensions."""

from __future__ import annotations

import hashlib
import re

import numpy as np


class BowEmbedder:
    """L2-normalised counts of md5-hashed words; no model, same vectors on every machine."""

    name = "bow-test"
    dim = 64
    fingerprint = "test:bow64"
    batch_size = 32

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in re.findall(r"[a-z0-9]+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vec(t) for t in texts])

    encode_queries = encode_passages
