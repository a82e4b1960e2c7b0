"""Unit-length float32 vectors: the one normalisation every embedder applies, the fingerprint of
what an index holds, and the exact re-scoring of approximate candidates.

Embedders return L2-normalised float32 rows so that inner product is cosine similarity; a zero
vector stays zero rather than dividing by zero.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np


def normalise(v: np.ndarray) -> np.ndarray:
    """Rows of ``v`` at unit L2 norm, as contiguous float32 (a 1-d vector becomes one row)."""
    v = np.asarray(v, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return np.ascontiguousarray(v / n, dtype=np.float32)


def vectors_fingerprint(ids: list[str], vectors: np.ndarray) -> str:
    """sha256 of ids and vector bytes: identifies exactly what was indexed."""
    h = hashlib.sha256()
    h.update(json.dumps(ids).encode())
    for start in range(0, len(vectors), 65536):  # in blocks: a memory-mapped file stays on disk
        h.update(np.ascontiguousarray(vectors[start : start + 65536], dtype=np.float32).data)
    return h.hexdigest()


def exact_rescore(
    vectors: np.ndarray, rows: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The valid candidate ``rows`` (faiss pads with -1) in file order, and their exact inner
    products with the query ``q``: the re-rank step of IVF-PQ, in few pages of a mapped file."""
    rows = np.sort(rows[rows >= 0])
    return rows, vectors[rows] @ q
