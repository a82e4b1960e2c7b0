"""Ray Data embedding (rag.index.ray_embed): same vectors as the serial path, same cache, resumes.

One local Ray for the module (``ray.init`` costs seconds); the bag-of-words test embedder is built
inside each Ray actor from its importable class, like a real model would be."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from rag.errors import ConfigError, IndexBuildError
from rag.index.embed_cache import embed_texts
from rag.index.ray_embed import machine_plan, ray_embed_texts
from tests.fakeembed import BowEmbedder
from tests.isolation import RAY_DRIVER_ENV, restored_env

TEXTS = [
    "dense retrieval with dual encoders",
    "BM25 is a strong lexical baseline for scientific search",
    "product quantization compresses vectors into short codes",
    "graphs of navigable small worlds",
    "inverted files scan a few cells",
    "retrieval augmented generation cites its sources",
    "the cat",
    "x",
]


class FailingBow(BowEmbedder):
    """Fails on the shortest text, which the longest-first order embeds last."""

    def encode_passages(self, texts):
        if "x" in texts:
            raise RuntimeError("embedder crashed")
        return super().encode_passages(texts)


@pytest.fixture(scope="module")
def local_ray():
    with restored_env(*RAY_DRIVER_ENV):
        yield
        ray.shutdown()


def test_ray_vectors_equal_serial_and_share_the_cache(tmp_cache, local_ray):
    ids = [f"t{i}" for i in range(len(TEXTS))]
    serial = embed_texts(ids, TEXTS, BowEmbedder(), cache=False, show_progress=False)
    stats: dict = {}
    got = ray_embed_texts(ids, TEXTS, BowEmbedder, block_size=3, show_progress=False, stats=stats)
    np.testing.assert_allclose(got, serial, atol=1e-6, rtol=0)
    assert stats["embedded"] == len(TEXTS) and stats["blocks"] == 3 and stats["concurrency"] >= 1

    # the serial path now finds every vector in the cache the Ray job wrote (no model calls)
    class NoCalls(BowEmbedder):
        def encode_passages(self, texts):
            raise AssertionError(f"re-embedded {texts}")

    np.testing.assert_allclose(embed_texts(ids, TEXTS, NoCalls(), show_progress=False), serial)


def test_failed_job_resumes_without_recomputing_finished_blocks(tmp_cache, local_ray):
    ids = [f"t{i}" for i in range(len(TEXTS))]
    with pytest.raises(IndexBuildError, match="1 of 4 block.*embedder crashed"):
        ray_embed_texts(ids, TEXTS, FailingBow, block_size=2, show_progress=False)
    stats: dict = {}
    got = ray_embed_texts(ids, TEXTS, BowEmbedder, block_size=2, show_progress=False, stats=stats)
    # every block but the crashed one ("the cat", "x": the two shortest) was committed, however
    # the actor's progress raced the driver's reads (it failed under load when errors were raised)
    assert stats["cached"] == len(TEXTS) - 2, "blocks that finished were committed"
    assert stats["cached"] + stats["embedded"] == len(TEXTS)
    serial = embed_texts(ids, TEXTS, BowEmbedder(), cache=False, show_progress=False)
    np.testing.assert_allclose(got, serial, atol=1e-6, rtol=0)
    with pytest.raises(ConfigError, match="concurrency"):
        ray_embed_texts(["new"], ["a new text"], BowEmbedder, concurrency=0, show_progress=False)


def test_machine_plan():
    assert machine_plan(2) == {"concurrency": 1, "threads": 2}
    assert machine_plan(16) == {"concurrency": 8, "threads": 2}
    assert machine_plan(1) == {"concurrency": 1, "threads": 1}
