"""Which dense index a corpus of ``n`` vectors gets, following faiss's published guidelines.

faiss wiki, "Guidelines to choose an index": exact ``Flat`` when it is affordable (the baseline, and
the only exact one); ``HNSW`` when memory is not a concern; ``IVF`` with ``nlist`` between 4·√N and
16·√N cells; ``PQ`` codes when the raw vectors do not fit. The rule turns that into numbers for
this project's targets (recall@10 ≥ 0.95 against exact, p50 ≤ 10 ms on one thread, ≤ 1 GB):

1. ``flat`` while one exact query is predicted to take at most ``latency_budget_ms`` on one thread
   (``n × FLAT_NS_PER_VECTOR``, the CPU time per vector measured by ``rag bench scale``: exact
   search is memory-bandwidth bound, ~160 ns per 384-d vector here) and the vectors fit
   ``memory_budget_bytes``: about 62k vectors (12× the corpus);
2. else ``ivf_flat`` with nlist = 4·√N and nprobe = :data:`IVF_NPROBE` while the raw vectors fit;
3. else ``ivf_pq`` with ``dim/8``-byte codes in RAM, the only kind whose memory does not hold the
   raw vectors, and an exact re-rank: the top :data:`PQ_REFINE_K_FACTOR` × k PQ candidates are
   re-scored against the raw vectors memory-mapped from disk (``disk_bytes``). Plain IVF-PQ's
   recall@10 was at most 0.80 at every measured size (0.51 at 30×, 0.19 at 1,000×): PQ codes cannot
   order near-duplicates. At 1,000× (5.19M vectors, ``python -m rag.bench.scale_1000``,
   ``outputs/bench/scale_1000.json``) nlist = √N, nprobe 16 and 256 × k candidates gave recall@10
   0.973 at p50 6.3 ms on one thread with the vectors in the OS page cache, 149 ms reading every
   candidate from disk (64 × k: 0.899). The cells are √N there, not 4·√N: the coarse assignment
   costs N × nlist × dim, and one thread built the √N cells in 7 min. The re-rank is
   ``DenseSettings.refine_k_factor``: :class:`~rag.index.dense.DenseIndex` builds the IVF-PQ part
   in RAM from all vectors, and a saved one memory-maps its raw vectors when loaded.

HNSW is not on the ladder, by measurement: with faiss's efConstruction=40 its recall@10 fell as
the corpus grew (M=16, efSearch=64: 0.99 at 1×, 0.94 at 10×, 0.79 at 30×, 0.52 at 100×; even
efSearch=512 gave 0.72 at 100×), while IVF-Flat at nprobe=16 held 0.96-0.98 at every measured size
(0.974 at 100×, 0.9 ms per query) with less memory per vector. HNSW remains available as an
explicit setting (``DenseSettings(kind="hnsw")``).
The nprobe is the smallest on the benchmark grid that kept recall@10 ≥ 0.95 at every measured size
(``outputs/bench/scale.json``); beyond the measured sizes it is an extrapolation, and the vectors
there are replicated copies of the real corpus (see :mod:`rag.bench.scale`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag.errors import ConfigError
from rag.index.dense import DenseSettings, effective_nlist

#: one-thread CPU time of exact inner-product search per stored 384-d vector (ns), measured by
#: ``rag bench scale`` (flat p50 CPU ms / n: 143-164 ns from 2× to 30×); scales linearly with dim.
FLAT_NS_PER_VECTOR = 160.0
#: HNSW graph size assumed by :func:`predicted_memory` (faiss's M=16 at level 0).
HNSW_M = 16
#: IVF cells scanned per query (nlist = 4·√N).
IVF_NPROBE = 16
#: bytes per stored float (faiss keeps float32).
FLOAT_BYTES = 4
#: IVF-PQ rung: candidates per wanted result re-scored against the raw vectors on disk, and cells
#: scanned (nlist = √N): the cheapest point of the 1,000× grid with recall@10 ≥ 0.95 (nprobe
#: 8/16/32/64 × 1/4/16/64/256 candidates per result; ``outputs/bench/scale_1000.json``).
PQ_REFINE_K_FACTOR = 256
PQ_NPROBE = 16


@dataclass(frozen=True)
class IndexChoice:
    """The rule's pick: :class:`~rag.index.dense.DenseIndex` settings, predicted bytes, and why."""

    settings: DenseSettings
    memory_bytes: int
    reason: str
    #: raw vectors kept on disk, memory-mapped for the re-rank (0: none).
    disk_bytes: int = 0

    @property
    def refine_k_factor(self) -> int:
        """IVF-PQ: PQ candidates per result re-scored exactly (0: no re-rank)."""
        return self.settings.refine_k_factor

    def as_dict(self) -> dict[str, Any]:
        keep = {
            "flat": ("kind",),
            "hnsw": ("kind", "m", "ef_construction", "ef_search"),
            "ivf_flat": ("kind", "nlist", "nprobe"),
            "ivf_pq": ("kind", "nlist", "nprobe", "pq_m", "pq_nbits"),
        }[self.settings.kind]
        extra = {"refine_k_factor": self.refine_k_factor, "disk_bytes": self.disk_bytes}
        return {
            **self.settings.model_dump(include=set(keep)),
            **{k: v for k, v in extra.items() if v},
            "memory_bytes": self.memory_bytes,
            "reason": self.reason,
        }


def predicted_memory(kind: str, n: int, dim: int, *, m: int = HNSW_M, pq_m: int = 0) -> int:
    """Bytes faiss holds for ``n`` vectors of ``dim`` floats in an index of ``kind`` (estimate:
    HNSW adds 2·M int32 links per vector at level 0 plus ~5 % for upper levels; IVF adds one
    int64 id per vector and the centroids)."""
    raw = n * dim * FLOAT_BYTES
    nlist = effective_nlist(n)
    if kind == "flat":
        return raw
    if kind == "hnsw":
        return int(raw + n * 2 * m * 4 * 1.05)
    if kind == "ivf_flat":
        return raw + n * 8 + nlist * dim * FLOAT_BYTES
    if kind == "ivf_pq":  # the rung's √N cells
        return n * ((pq_m or dim // 8) + 8) + effective_nlist(n, pq_nlist(n)) * dim * FLOAT_BYTES
    raise ConfigError(f"predicted_memory: unknown index kind {kind!r}")


def pq_nlist(n: int) -> int:
    """IVF cells of the IVF-PQ rung: √N (see the module docstring)."""
    return round(n**0.5)


def choose_index(
    n: int,
    dim: int = 384,
    *,
    memory_budget_bytes: int = 1 << 30,
    latency_budget_ms: float = 10.0,
) -> IndexChoice:
    """Pick the dense index for ``n`` vectors of ``dim`` floats (see the module docstring).

    Raises:
        ConfigError: ``n`` or ``dim`` not positive, or a budget that is not positive.
    """
    if n <= 0 or dim <= 0:
        raise ConfigError(f"choose_index: n and dim must be positive, got n={n}, dim={dim}")
    if memory_budget_bytes <= 0 or latency_budget_ms <= 0:
        raise ConfigError(
            f"choose_index: budgets must be positive, got memory {memory_budget_bytes} B, "
            f"latency {latency_budget_ms} ms"
        )
    flat_ms = n * FLAT_NS_PER_VECTOR * dim / 384 / 1e6
    mem = {k: predicted_memory(k, n, dim) for k in ("flat", "hnsw", "ivf_flat", "ivf_pq")}
    budget_mb = memory_budget_bytes / 2**20
    if flat_ms <= latency_budget_ms and mem["flat"] <= memory_budget_bytes:
        return IndexChoice(
            DenseSettings(kind="flat"),
            mem["flat"],
            f"exact search of {n:,} vectors is predicted at {flat_ms:.1f} ms/query on one thread, "
            f"within {latency_budget_ms:g} ms: keep the exact, deterministic index",
        )
    nlist = effective_nlist(n)
    if mem["ivf_flat"] <= memory_budget_bytes:
        return IndexChoice(
            DenseSettings(kind="ivf_flat", nlist=nlist, nprobe=IVF_NPROBE),
            mem["ivf_flat"],
            f"exact search of {n:,} vectors would take ~{flat_ms:.0f} ms/query and the raw vectors "
            f"({mem['ivf_flat'] / 2**20:.0f} MB) fit {budget_mb:.0f} MB: IVF-Flat with "
            f"nlist=4·√N={nlist}, nprobe={IVF_NPROBE}",
        )
    pq_m, pq_cells = dim // 8, effective_nlist(n, pq_nlist(n))
    return IndexChoice(
        DenseSettings(
            kind="ivf_pq",
            nlist=pq_cells,
            nprobe=min(PQ_NPROBE, pq_cells),
            pq_m=pq_m,
            refine_k_factor=PQ_REFINE_K_FACTOR,
        ),
        predicted_memory("ivf_pq", n, dim, pq_m=pq_m),
        f"the raw {n:,} vectors ({mem['flat'] / 2**20:.0f} MB) exceed {budget_mb:.0f} MB: IVF-PQ "
        f"with {pq_m} bytes/vector in RAM, nlist=√N={pq_cells}, nprobe={PQ_NPROBE}, and the top "
        f"{PQ_REFINE_K_FACTOR}×k candidates re-ranked against the raw vectors memory-mapped "
        "from disk (the 1,000× benchmark)",
        disk_bytes=mem["flat"],
    )
