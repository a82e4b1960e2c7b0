"""Dense vector index over (ids, vectors): exact faiss inner product by default; HNSW, IVF-Flat and
IVF-PQ as approximate options (which one a corpus size gets is :mod:`rag.index.choose`'s rule).

Vectors are L2-normalised by the embedders, so inner product is cosine similarity. The default
``IndexFlatIP`` is exact and deterministic; ties are broken by id. The approximate kinds:

- ``hnsw``: a navigable small-world graph (Malkov & Yashunin, TPAMI 2018), built single-threaded
  so the graph (and so its results) is reproducible;
- ``ivf_flat``: k-means cells, ``nprobe`` of ``nlist`` scanned exactly (Jégou et al., "Product
  quantization for nearest neighbor search", TPAMI 2011, the inverted file part);
- ``ivf_pq``: the same cells with vectors compressed to ``pq_m`` bytes (product quantisation of the
  residuals, same paper); with ``refine_k_factor`` > 1 the top ``refine_k_factor × k`` PQ
  candidates are re-scored exactly against the raw vectors, which a loaded index memory-maps from
  ``vectors.npy`` instead of reading into RAM.

IVF k-means is trained on a fixed-seed sample, so rebuilds give the same cells. Their recall
against exact search is measured by :meth:`DenseIndex.recall_vs_exact`; the exact ``IndexFlatIP``
that check needs is only built for an approximate index when asked (it doubles the memory).

Saved indexes record their parameters, the embedder and chunk fingerprints, faiss/numpy versions
and :data:`FORMAT_VERSION`; :func:`load_or_build` rebuilds when any of them changed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from rag.errors import IndexBuildError, RetrievalError
from rag.index.saved import load_saved
from rag.index.vectors import exact_rescore, vectors_fingerprint
from rag.shard import thread_count

logger = logging.getLogger(__name__)

#: Bump when the on-disk layout or search semantics change; older saved indexes are rebuilt.
FORMAT_VERSION = 2  # 2: IVF kinds, ann.faiss file for every approximate kind


#: Query batches smaller than this are searched single-threaded (faiss's BLAS threshold is 20).
SMALL_BATCH = 20


def omp_threads(n: int) -> AbstractContextManager[None]:
    """Temporarily set faiss's OpenMP thread count (process-wide), restoring it afterwards."""
    return thread_count(faiss.omp_get_max_threads, faiss.omp_set_num_threads, n)


class DenseSettings(BaseModel):
    """Dense index parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["flat", "hnsw", "ivf_flat", "ivf_pq"] = Field(
        "flat", description="Exact IndexFlatIP, HNSW, IVF-Flat or IVF-PQ."
    )
    m: int = Field(32, ge=4, le=128, description="HNSW: neighbours per node (M).")
    ef_construction: int = Field(200, ge=8, le=2048, description="HNSW: build-time beam width.")
    ef_search: int = Field(128, ge=8, le=4096, description="HNSW: query-time beam width.")
    nlist: int = Field(0, ge=0, description="IVF: k-means cells (0: 4*sqrt(n), see choose.py).")
    nprobe: int = Field(16, ge=1, description="IVF: cells scanned per query.")
    pq_m: int = Field(48, ge=1, description="IVF-PQ: sub-quantisers = bytes per vector.")
    pq_nbits: int = Field(8, ge=4, le=12, description="IVF-PQ: bits per sub-quantiser code.")
    train_seed: int = Field(1234, description="IVF: seed of the k-means training sample.")
    refine_k_factor: int = Field(
        0, ge=0, le=4096, description="IVF-PQ: candidates per result re-scored exactly (0: none)."
    )

    @model_validator(mode="after")
    def _refine_needs_pq(self) -> DenseSettings:
        if self.refine_k_factor and self.kind != "ivf_pq":
            raise ValueError(f"refine_k_factor applies to kind 'ivf_pq' only, not {self.kind!r}")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        # without a re-rank the dump (and so every cache key built from it) is the field-less one
        out = handler(self)
        if not self.refine_k_factor:
            out.pop("refine_k_factor", None)
        return out


#: faiss wants at least this many training points per k-means centroid (it warns below 39).
MIN_POINTS_PER_CENTROID = 39
#: training sample cap per centroid: more costs k-means time and barely moves the cells.
MAX_POINTS_PER_CENTROID = 40
#: k-means iterations for the IVF cells (faiss's IVF default).
IVF_KMEANS_ITER = 10


def effective_nlist(n: int, nlist: int = 0) -> int:
    """IVF cells for ``n`` vectors: ``nlist`` or 4*sqrt(n), capped so each cell gets >= 39 training
    points (faiss's k-means floor), at least 1."""
    want = nlist or round(4 * n**0.5)
    return max(1, min(want, n // MIN_POINTS_PER_CENTROID))


def library_versions() -> dict[str, str]:
    """faiss and numpy versions, recorded in saved indexes."""
    return {"faiss": faiss.__version__, "numpy": np.__version__}


def ivf_train_sample(vectors: np.ndarray, centroids: int, seed: int) -> np.ndarray:
    """A fixed-seed sample of at most 40 points per k-means centroid to train on."""
    n, cap = len(vectors), centroids * MAX_POINTS_PER_CENTROID
    if n <= cap:
        return vectors
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(vectors[np.sort(rng.choice(n, cap, replace=False))])


def train_quantizer(vectors: np.ndarray, nlist: int, seed: int = 1234) -> Any:
    """The IVF coarse quantizer: k-means (fixed seed, :data:`IVF_KMEANS_ITER` iterations) of a
    sample into ``nlist`` centroids, in an ``IndexFlatIP``."""
    dim = vectors.shape[1]
    km = faiss.Clustering(dim, nlist)
    km.seed, km.niter = seed, IVF_KMEANS_ITER
    km.spherical = True  # inner-product cells over unit vectors
    quantizer = faiss.IndexFlatIP(dim)
    try:
        km.train(ivf_train_sample(vectors, nlist, seed), quantizer)
    except RuntimeError as e:
        raise IndexBuildError(
            f"IVF k-means of {len(vectors)} vectors into {nlist} failed: {e}"
        ) from e
    return quantizer


def build_ivf(
    vectors: np.ndarray,
    settings: DenseSettings,
    *,
    quantizer: Any = None,
    assign: np.ndarray | None = None,
) -> tuple[Any, Any, np.ndarray]:
    """Train and fill an IVF-Flat or IVF-PQ index; returns ``(index, quantizer, assignments)``.

    A ``quantizer`` already trained (same vectors, nlist and seed) and its ``assign`` ments can be
    passed to skip k-means and the coarse assignment, e.g. to build IVF-PQ on IVF-Flat's cells.
    """
    s, (n, dim) = settings, vectors.shape
    nlist = effective_nlist(n, s.nlist)
    if quantizer is None:
        quantizer = train_quantizer(vectors, nlist, s.train_seed)
    if s.kind == "ivf_flat":
        idx = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    elif s.kind == "ivf_pq":
        idx = faiss.IndexIVFPQ(
            quantizer, dim, nlist, s.pq_m, s.pq_nbits, faiss.METRIC_INNER_PRODUCT
        )
    else:
        raise IndexBuildError(f"build_ivf: kind {s.kind!r} is not an IVF kind")
    if s.kind == "ivf_pq":  # the quantizer is trained: faiss trains only the PQ codebooks
        idx.pq.cp.seed, idx.pq.cp.niter = s.train_seed, IVF_KMEANS_ITER
        try:
            idx.train(ivf_train_sample(vectors, 2**s.pq_nbits, s.train_seed))
        except RuntimeError as e:
            raise IndexBuildError(f"build_ivf: PQ training failed for {s}: {e}") from e
    else:
        idx.is_trained = True  # IVF-Flat needs nothing beyond the cells
    if assign is None:
        _, a = quantizer.search(vectors, 1)
        assign = np.ascontiguousarray(a[:, 0], dtype=np.int64)
    idx.add_core(n, faiss.swig_ptr(vectors), None, faiss.swig_ptr(assign))
    idx.nprobe = min(s.nprobe, nlist)
    return idx, quantizer, assign


class _Storage:
    """Exposes a faiss flat index's float32 storage to numpy and keeps that index alive: the array's
    ``base`` is this object, so the view can never outlive the memory it points to."""

    def __init__(self, flat: Any, n: int, dim: int, owner: Any) -> None:
        self.owner = owner  # the index that owns the memory (HNSW owns its flat storage)
        self.__array_interface__ = {
            "shape": (n, dim),
            "typestr": "<f4",
            "data": (int(flat.get_xb()), True),  # read-only: the index owns the values
            "version": 3,
        }


def _storage_view(flat: Any, n: int, dim: int, owner: Any = None) -> np.ndarray:
    """The vectors stored in a flat faiss index, as a read-only (n, dim) array without a copy;
    ``owner`` (default ``flat``) is kept alive by the array."""
    return np.asarray(_Storage(flat, n, dim, owner if owner is not None else flat))


class DenseIndex:
    """Inner-product search over normalised vectors.

    Args:
        ids: one unique id per row of ``vectors``.
        vectors: float32 array (n, dim).
        kind, m, ef_construction, ef_search: see :class:`DenseSettings`.
        embedder_fingerprint, chunk_fingerprint: provenance recorded when saved.
    """

    def __init__(
        self,
        ids: list[str],
        vectors: np.ndarray,
        *,
        kind: Literal["flat", "hnsw", "ivf_flat", "ivf_pq"] = "flat",
        m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        nlist: int = 0,
        nprobe: int = 16,
        pq_m: int = 48,
        pq_nbits: int = 8,
        train_seed: int = 1234,
        refine_k_factor: int = 0,
        embedder_fingerprint: str = "",
        chunk_fingerprint: str = "",
    ) -> None:
        self.settings = DenseSettings(
            kind=kind,
            m=m,
            ef_construction=ef_construction,
            ef_search=ef_search,
            nlist=nlist,
            nprobe=nprobe,
            pq_m=pq_m,
            pq_nbits=pq_nbits,
            train_seed=train_seed,
            refine_k_factor=refine_k_factor,
        )
        if kind == "ivf_pq" and vectors.shape[-1] % pq_m:
            raise IndexBuildError(
                f"DenseIndex: pq_m={pq_m} must divide the vector dimension {vectors.shape[-1]}"
            )
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(ids):
            raise IndexBuildError(
                f"DenseIndex: vectors of shape {vectors.shape} do not match {len(ids)} ids"
            )
        if not ids:
            raise IndexBuildError("DenseIndex: nothing to index; pass at least one vector")
        if len(set(ids)) != len(ids):
            raise IndexBuildError("DenseIndex: ids must be unique")
        if not np.isfinite(vectors).all():
            raise IndexBuildError("DenseIndex: vectors contain NaN or inf; re-embed")
        self.ids = list(ids)
        self.dim = vectors.shape[1]
        self.embedder_fingerprint = embedder_fingerprint
        self.chunk_fingerprint = chunk_fingerprint
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self._rank = np.empty(len(ids), dtype=np.int64)
        self._rank[order] = np.arange(len(ids))
        self._set_vectors(vectors)
        self._ann: Any = None
        if self.settings.kind == "hnsw":
            self._ann = self._build_hnsw()
            self.vectors = self._hnsw_view(self._ann)
        elif self.settings.kind in ("ivf_flat", "ivf_pq"):
            self._ann = self._build_ivf()

    def _set_vectors(self, vectors: np.ndarray) -> None:
        """Keep one float32 copy: for flat it is the faiss index's own storage (a view)."""
        self._exact_index: Any = None
        if self.settings.kind == "flat":
            self._exact_index = faiss.IndexFlatIP(self.dim)
            self._exact_index.add(vectors)
            self.vectors = _storage_view(self._exact_index, len(self.ids), self.dim)
        else:
            self.vectors = vectors

    def _hnsw_view(self, idx: Any) -> np.ndarray:
        """The HNSW graph's own float32 storage as an array: no second copy of the vectors."""
        return _storage_view(faiss.downcast_index(idx.storage), len(self.ids), self.dim, owner=idx)

    @property
    def _exact(self) -> Any:
        if self._exact_index is None:  # approximate kinds: built on first exact search only
            self._exact_index = faiss.IndexFlatIP(self.dim)
            self._exact_index.add(self.vectors)
        return self._exact_index

    def _build_hnsw(self) -> Any:
        s = self.settings
        idx = faiss.IndexHNSWFlat(self.dim, s.m, faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efConstruction = s.ef_construction
        with omp_threads(1):  # a multithreaded build inserts in a racy order
            idx.add(self.vectors)
        idx.hnsw.efSearch = s.ef_search
        return idx

    def _build_ivf(self) -> Any:
        idx, quantizer, _ = build_ivf(self.vectors, self.settings)
        self._ivf_quantizer = quantizer  # the IVF index does not own it; keep it alive
        return idx

    def __len__(self) -> int:
        return len(self.ids)

    def _check(self, qvecs: np.ndarray, k: int) -> np.ndarray:
        if not isinstance(k, int | np.integer) or k <= 0:
            raise RetrievalError(f"DenseIndex.search: k must be a positive int, got {k!r}")
        q = np.ascontiguousarray(qvecs, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise RetrievalError(
                f"DenseIndex.search: query vectors of shape {np.shape(qvecs)}, index dim {self.dim}"
            )
        return q

    def _exact_search(self, q: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        n = len(self.ids)
        k = min(k, n)
        want = min(n, k + 8)
        out: list[list[tuple[str, float]]] = []
        scores, idx = self._exact.search(q, want)
        for row in range(q.shape[0]):
            s, ix = scores[row], idx[row]
            w = want
            # a tie straddling the cut: fetch deeper until the boundary is strict (or all docs)
            while w < n and s[w - 1] >= s[k - 1]:
                w = min(n, w * 2)
                s2, ix2 = self._exact.search(q[row : row + 1], w)
                s, ix = s2[0], ix2[0]
            ok = ix >= 0
            s, ix = s[ok], ix[ok]
            order = np.lexsort((self._rank[ix], -s))[:k]
            out.append([(self.ids[ix[i]], float(s[i])) for i in order])
        return out

    def search(self, qvecs: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` (id, score) per query vector, best first, ties by id ascending.

        Fewer than :data:`SMALL_BATCH` queries are searched with one OpenMP thread: faiss then
        splits a single query over the database, and the threads' synchronisation then costs
        tens of milliseconds per query where one thread searches 10k x 384 vectors in under one.
        """
        q = self._check(qvecs, k)
        if q.shape[0] < SMALL_BATCH:
            with omp_threads(1):
                return self._search(q, k)
        return self._search(q, k)

    def _search(self, q: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        if self._ann is None:
            return self._exact_search(q, k)
        k = min(k, len(self.ids))
        refine = self.settings.refine_k_factor
        scores, idx = self._ann.search(q, k * refine if refine > 1 else k)
        out = []
        for row, (s, ix) in enumerate(zip(scores, idx, strict=True)):
            if refine > 1:
                ix, s = exact_rescore(self.vectors, ix, q[row])
            else:
                s, ix = s[ix >= 0], ix[ix >= 0]
            order = np.lexsort((self._rank[ix], -s))[:k]
            out.append([(self.ids[ix[i]], float(s[i])) for i in order])
        return out

    def memory_bytes(self) -> int:
        """Bytes of the searchable faiss structure (serialised size; vectors for flat)."""
        if self._ann is None:
            return int(self.vectors.nbytes)
        return int(faiss.serialize_index(self._ann).nbytes)

    def recall_vs_exact(self, queries: np.ndarray, k: int = 10) -> float:
        """Mean share of the exact top-``k`` ids that this index returns (1.0 for flat)."""
        q = self._check(queries, k)
        exact = self._exact_search(q, k)
        got = self.search(q, k)
        recalls = [
            len({i for i, _ in g} & {i for i, _ in e}) / len(e)
            for g, e in zip(got, exact, strict=True)
        ]
        return float(np.mean(recalls))

    # -- persistence --------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        """Everything that built this index."""
        return {
            "format_version": FORMAT_VERSION,
            "settings": self.settings.model_dump(),
            "embedder_fingerprint": self.embedder_fingerprint,
            "chunk_fingerprint": self.chunk_fingerprint,
            "n": len(self.ids),
            "dim": self.dim,
            "vectors_sha256": vectors_fingerprint(self.ids, self.vectors),
            "versions": library_versions(),
        }

    def save(self, directory: str | Path) -> Path:
        """Write vectors.npy, ids.json, meta.json (and ann.faiss for approximate kinds)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "vectors.npy", self.vectors)
        (d / "ids.json").write_text(json.dumps(self.ids, ensure_ascii=False))
        if self._ann is not None:
            faiss.write_index(self._ann, str(d / "ann.faiss"))
        (d / "meta.json").write_text(json.dumps(self.meta(), indent=2, sort_keys=True))
        return d

    @classmethod
    def load(cls, directory: str | Path, expected_meta: dict[str, Any] | None = None) -> DenseIndex:
        """Load a saved index; IndexBuildError if it is missing, of another format or library
        version, or if any key of ``expected_meta`` (settings, fingerprints, ...) differs."""
        d = Path(directory)
        try:
            meta = json.loads((d / "meta.json").read_text())
            ids = json.loads((d / "ids.json").read_text())
            # IVF-PQ keeps its raw vectors on disk: only its codes are meant to be in RAM
            pq = (meta.get("settings") or {}).get("kind") == "ivf_pq"
            vectors = np.load(d / "vectors.npy", mmap_mode="r" if pq else None)
        except (OSError, ValueError) as e:
            raise IndexBuildError(f"no readable dense index at {d}: {e}; build it first") from e
        want: dict[str, Any] = {"format_version": FORMAT_VERSION, "versions": library_versions()}
        want.update(expected_meta or {})
        bad = [
            f"{k}: saved {meta.get(k)!r}, wanted {v!r}" for k, v in want.items() if meta.get(k) != v
        ]
        if bad:
            raise IndexBuildError(f"dense index at {d} was built differently: {'; '.join(bad)}")
        if vectors_fingerprint(ids, vectors) != meta.get("vectors_sha256"):
            raise IndexBuildError(f"dense index at {d}: vectors do not match meta.json; rebuild")
        s = DenseSettings.model_validate(meta["settings"])
        self = cls.__new__(cls)
        self.settings = s
        self.ids, self.dim = ids, vectors.shape[1]
        self.embedder_fingerprint = meta["embedder_fingerprint"]
        self.chunk_fingerprint = meta["chunk_fingerprint"]
        self._rank = np.empty(len(ids), dtype=np.int64)
        self._rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
        self._set_vectors(np.ascontiguousarray(vectors, dtype=np.float32))
        self._ann = None
        if s.kind != "flat":
            try:
                self._ann = faiss.read_index(str(d / "ann.faiss"))
            except RuntimeError as e:
                raise IndexBuildError(f"dense index at {d}: unreadable ann.faiss ({e})") from e
            if s.kind == "hnsw":
                self._ann.hnsw.efSearch = s.ef_search
                self.vectors = self._hnsw_view(self._ann)
            else:
                self._ann.nprobe = min(s.nprobe, self._ann.nlist)
        return self


def load_or_build(
    directory: str | Path,
    build: Callable[[], DenseIndex],
    *,
    settings: DenseSettings | None = None,
    embedder_fingerprint: str,
    chunk_fingerprint: str,
) -> DenseIndex:
    """Load the index in ``directory`` if it matches the settings and fingerprints; otherwise call
    ``build()`` (which embeds and constructs), save the result and return it."""
    settings = settings or DenseSettings()
    expected = {
        "settings": settings.model_dump(),
        "embedder_fingerprint": embedder_fingerprint,
        "chunk_fingerprint": chunk_fingerprint,
    }
    saved = load_saved(lambda: DenseIndex.load(directory, expected), directory, "dense index")
    if saved is not None:
        return saved
    idx = build()
    got = {k: idx.meta()[k] for k in expected}
    if got != expected:
        raise IndexBuildError(
            f"load_or_build: build() returned an index with {got}, expected {expected}"
        )
    idx.save(directory)
    return idx
