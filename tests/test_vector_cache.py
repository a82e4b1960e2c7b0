"""Nothing invalid enters the embedding cache, poison already there is recomputed, every engine
goes through one public cache API, and two runs over one cache embed each text once."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from rag.errors import IndexBuildError
from rag.index.embed_cache import VectorCache, cache_path, embed_texts, text_key
from tests.test_embed import CountingEmbedder

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [f"passage number {i} " * (1 + i % 3) for i in range(12)]
IDS = [f"c{i}" for i in range(12)]


class NaNEmbedder(CountingEmbedder):
    """The same fingerprint as a good model whose weights went bad: every third vector NaN."""

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        v = super().encode_passages(texts)
        v[::3] = np.nan
        return v


def _rows(fingerprint: str) -> int:
    with sqlite3.connect(cache_path(fingerprint)) as con:
        return con.execute("SELECT COUNT(*) FROM vec").fetchone()[0]


def test_a_nan_embedder_never_writes_and_a_rerun_recomputes(tmp_cache):
    with pytest.raises(IndexBuildError, match="not finite or not unit length"):
        embed_texts(IDS, TEXTS, NaNEmbedder(), show_progress=False, block_size=4)
    assert _rows("fake-v1") == 0
    good = CountingEmbedder()  # the model repaired: same fingerprint
    out = embed_texts(IDS, TEXTS, good, show_progress=False)
    assert np.isfinite(out).all() and sorted(good.seen) == sorted(set(TEXTS))


def test_poison_already_stored_is_dropped_and_recomputed(tmp_cache):
    emb = CountingEmbedder()
    embed_texts(IDS, TEXTS, emb, show_progress=False)
    with sqlite3.connect(cache_path(emb.fingerprint)) as con:  # as older code could leave it
        nan = np.full(emb.dim, np.nan, dtype=np.float32).tobytes()
        con.execute("UPDATE vec SET v = ? WHERE key = ?", (nan, text_key(TEXTS[0])))
        con.execute("UPDATE vec SET v = ? WHERE key = ?", (b"\0" * 12, text_key(TEXTS[1])))
    emb.seen.clear()
    out = embed_texts(IDS, TEXTS, emb, show_progress=False)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert sorted(emb.seen) == sorted([TEXTS[0], TEXTS[1]])


@pytest.mark.parametrize(
    "bad",
    [np.zeros((2, 8)), np.full((2, 8), np.inf), np.ones((2, 8)), np.eye(2, 7, dtype=np.float32)],
    ids=["zero", "inf", "not-unit", "wrong-dim"],
)
def test_put_refuses_invalid_vectors_and_writes_nothing(tmp_cache, bad):
    with VectorCache.open("fp", 8) as vc, pytest.raises(IndexBuildError):
        vc.put([b"a" * 32, b"b" * 32], bad)
    assert _rows("fp") == 0


def test_put_and_missing_round_trip(tmp_cache):
    v = np.eye(3, 8, dtype=np.float32)
    keys = [text_key(t) for t in ("a", "b", "c")]
    with VectorCache.open("fp", 8, name="fake") as vc:
        vc.put(keys[:2], v[:2])
        assert vc.missing(keys + keys[:1]) == [keys[2]]
        np.testing.assert_array_equal(vc.get(keys)[keys[1]], v[1])


def test_no_module_reaches_into_the_cache_internals():
    """The serial path, Ray embedding and the Ray pipeline all use VectorCache."""
    users = [p for p in (ROOT / "rag").rglob("*.py") if p.name != "embed_cache.py"]
    offenders = [
        p.relative_to(ROOT).as_posix()
        for p in users
        if "_open_cache" in p.read_text() or "_lookup(" in p.read_text()
    ]
    assert offenders == []
    for mod in ("ray_embed.py", "ray_pipeline.py"):
        assert "VectorCache" in (ROOT / "rag" / "index" / mod).read_text()


class SlowCounting(CountingEmbedder):
    """Counts every text encoded across all runs that share it; slow enough that two runs
    started together overlap."""

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        time.sleep(0.05)
        return super().encode_passages(texts)


def test_two_runs_on_one_cache_embed_each_text_once(tmp_cache):
    shared = SlowCounting()
    texts = [f"text {i} " * (1 + i % 5) for i in range(64)]
    ids = [str(i) for i in range(64)]
    stats = [{}, {}]
    outs: list[np.ndarray | None] = [None, None]
    start = threading.Barrier(2)

    def run(i: int) -> None:
        start.wait()
        outs[i] = embed_texts(ids, texts, shared, show_progress=False, block_size=8, stats=stats[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(shared.seen) == len(texts)  # each text embedded once over both runs
    assert sorted(shared.seen) == sorted(texts)
    assert stats[0]["embedded"] + stats[1]["embedded"] == len(texts)
    for s in stats:  # what a run did not find at its start, it embedded or saw done meanwhile
        assert s["cached"] + s["embedded"] + s["done_elsewhere"] == len(texts)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_many_openers_of_a_new_cache_at_once_all_get_it(tmp_cache):
    """Creating the file, switching it to WAL and writing its schema is one step under the cache's
    lock: openers racing on a new cache never see "database is locked"."""
    errors: list[BaseException] = []
    for round_ in range(12):
        fingerprint = f"race-{round_}"
        start = threading.Barrier(6)

        def open_once(fp: str = fingerprint, barrier: threading.Barrier = start) -> None:
            barrier.wait()
            try:
                with VectorCache.open(fp, 4, name="race") as vc:
                    vc.put([text_key(fp)], np.eye(1, 4, dtype=np.float32))
            except BaseException as e:  # collected: a thread's exception would be lost
                errors.append(e)

        threads = [threading.Thread(target=open_once) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert all(_rows(f"race-{r}") == 1 for r in range(12))


def test_an_existing_cache_opens_while_a_job_holds_its_lock(tmp_cache):
    with VectorCache.open("busy", 4) as vc:
        vc.put([text_key("a")], np.eye(1, 4, dtype=np.float32))
    held, release, opened = threading.Event(), threading.Event(), threading.Event()

    def job() -> None:
        with VectorCache.open("busy", 4) as vc, vc.lock():
            held.set()
            release.wait(10)

    t = threading.Thread(target=job)
    t.start()
    held.wait(10)

    def reader() -> None:
        with VectorCache.open("busy", 4) as vc:
            assert list(vc.get([text_key("a")])) == [text_key("a")]
        opened.set()

    r = threading.Thread(target=reader)
    r.start()
    try:
        assert opened.wait(5), "a reader waited for a running job's lock to open the cache"
    finally:
        release.set()
        t.join()
        r.join()
