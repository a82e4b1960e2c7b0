"""The index-choice rule (rag.index.choose): its pick at given sizes and budgets, and that every
pick is a buildable DenseIndex configuration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rag.errors import ConfigError
from rag.index.choose import (
    FLAT_NS_PER_VECTOR,
    IVF_NPROBE,
    PQ_NPROBE,
    PQ_REFINE_K_FACTOR,
    choose_index,
    predicted_memory,
)
from rag.index.dense import DenseIndex, effective_nlist

#: the largest n whose predicted one-thread exact query fits 10 ms (from the rule's constant)
FLAT_LIMIT = int(10e6 / FLAT_NS_PER_VECTOR)


@pytest.mark.parametrize(
    ("n", "kind"),
    [
        (5_193, "flat"),  # the real corpus, 1x
        (51_930, "flat"),  # 10x
        (FLAT_LIMIT, "flat"),
        (FLAT_LIMIT + 1, "ivf_flat"),  # exact search would exceed 10 ms
        (155_790, "ivf_flat"),  # 30x
        (519_300, "ivf_flat"),  # 100x: the raw vectors (761 MB) fit 1 GB
        (5_193_000, "ivf_pq"),  # 1,000x: the raw vectors (7.4 GB) stay on disk for the re-rank
    ],
)
def test_choice_by_size(n, kind):
    c = choose_index(n, 384)
    assert c.settings.kind == kind
    assert c.memory_bytes <= 1 << 30
    assert f"{n:,}" in c.reason


def test_memory_budget_moves_the_choice_down_faiss_s_ladder():
    n = 519_300
    raw = n * 384 * 4
    assert choose_index(n, memory_budget_bytes=int(raw * 1.02)).settings.kind == "ivf_flat"
    pq = choose_index(n, memory_budget_bytes=raw // 2)
    assert pq.settings.kind == "ivf_pq" and pq.settings.pq_m == 48
    assert pq.memory_bytes < raw // 10  # 48-byte codes + ids instead of 1536-byte vectors
    ivf = choose_index(n, memory_budget_bytes=int(raw * 1.02)).settings
    assert ivf.nlist == round(4 * math.sqrt(n)) and ivf.nprobe == IVF_NPROBE
    # a generous latency budget keeps exact search even at 100x
    assert (
        choose_index(n, latency_budget_ms=1000, memory_budget_bytes=4 << 30).settings.kind == "flat"
    )


def test_pq_rung_is_the_configuration_measured_at_1000x():
    n = 5_193_000
    c = choose_index(n, 384)
    s = c.settings
    assert (s.kind, s.nlist, s.nprobe, s.pq_m) == ("ivf_pq", round(math.sqrt(n)), PQ_NPROBE, 48)
    assert c.refine_k_factor == PQ_REFINE_K_FACTOR > 1 and c.disk_bytes == n * 384 * 4
    assert c.memory_bytes == n * (48 + 8) + round(math.sqrt(n)) * 384 * 4  # codes, ids, centroids
    d = c.as_dict()
    assert d["refine_k_factor"] == PQ_REFINE_K_FACTOR and d["disk_bytes"] == n * 384 * 4
    # the rungs above keep their keys: no re-rank, nothing on disk
    assert "refine_k_factor" not in choose_index(519_300).as_dict()
    assert "disk_bytes" not in choose_index(5_193).as_dict()


def test_predicted_memory_orders_kinds_and_rejects_unknown():
    n = 100_000
    mem = {k: predicted_memory(k, n, 384) for k in ("flat", "hnsw", "ivf_flat", "ivf_pq")}
    assert mem["ivf_pq"] < mem["flat"] < mem["ivf_flat"] < mem["hnsw"]
    with pytest.raises(ConfigError, match="annoy"):
        predicted_memory("annoy", n, 384)
    with pytest.raises(ConfigError, match="n=0"):
        choose_index(0)


def test_every_pick_builds_and_its_memory_estimate_holds():
    rng = np.random.default_rng(0)
    n, dim = 4_000, 32
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    ids = [str(i) for i in range(n)]
    raw = n * dim * 4
    for budget, latency in [
        (1 << 30, 10.0),
        (1 << 30, 1e-4),
        (int(raw * 1.1), 1e-4),
        (raw // 2, 1e-4),
    ]:
        c = choose_index(n, dim, memory_budget_bytes=budget, latency_budget_ms=latency)
        extra = {"pq_nbits": 4} if c.settings.kind == "ivf_pq" else {}
        s = c.settings.model_dump() | extra
        idx = DenseIndex(ids, x, **s)
        assert idx.settings.kind == c.settings.kind
        if c.settings.kind in ("flat", "hnsw", "ivf_flat"):  # estimate within 15 % of faiss's size
            assert abs(idx.memory_bytes() - c.memory_bytes) / c.memory_bytes < 0.15
    assert effective_nlist(519_300) == round(4 * math.sqrt(519_300))  # faiss: 4·√N cells
    assert effective_nlist(n) == n // 39  # small n: capped so each cell has >= 39 training points
    assert effective_nlist(100) == 2  # capped: >= 39 training points per cell
