"""Unit-length float32 vectors: the one normalisation every embedder applies.

Embedders return L2-normalised float32 rows so that inner product is cosine similarity; a zero
vector stays zero rather than dividing by zero.
"""

from __future__ import annotations

import numpy as np


def normalise(v: np.ndarray) -> np.ndarray:
    """Rows of ``v`` at unit L2 norm, as contiguous float32 (a 1-d vector becomes one row)."""
    v = np.asarray(v, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.ascontiguousarray(v / n, dtype=np.float32)
