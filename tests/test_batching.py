"""The query micro-batcher: each caller gets its own rows, concurrent callers share calls, a lone
caller waits for no window, an error reaches only its callers, closing drains the queue.

The encoder here is a plain function that records its calls; a gate (a threading.Event) holds a
call open so the test knows which requests arrive while an encode runs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from pydantic import ValidationError

from rag.serve.batching import (
    BatchedQueries,
    BatcherClosed,
    BatchSettings,
    QueryBatcher,
    batched,
    rows_exact,
)
from tests.fakeembed import BowEmbedder


def vec(text: str) -> np.ndarray:
    """A row that names its text: its length and its characters' code sum."""
    return np.asarray([len(text), sum(map(ord, text))], dtype=np.float32)


class Recorder:
    """``encode`` that records each call's texts; ``hold`` keeps the next call open until set."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on
        self.hold: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        self.entered.set()
        if self.hold is not None:
            hold, self.hold = self.hold, None
            assert hold.wait(10)
        if self.fail_on is not None and self.fail_on in texts:
            raise ValueError(f"cannot encode {self.fail_on!r}")
        return np.stack([vec(t) for t in texts])


def submit_while_held(batcher: QueryBatcher, enc: Recorder, texts: list[str], pool):
    """Hold a first call open, queue ``texts`` (one caller each) meanwhile, then release."""
    release = threading.Event()
    enc.hold = release
    first = pool.submit(batcher.encode, ["first"])
    assert enc.entered.wait(10)
    futures = [pool.submit(batcher.encode, [t]) for t in texts]
    deadline = time.monotonic() + 10
    while len(batcher._queue) < len(texts):  # every caller queued behind the held call
        assert time.monotonic() < deadline, "callers did not queue"
        time.sleep(0.001)
    release.set()
    return first, futures


def test_requests_queued_during_an_encode_share_the_next_call_and_get_their_own_rows():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=16))
    texts = [f"query number {i}" * (i + 1) for i in range(6)]
    with ThreadPoolExecutor(8) as pool:
        first, futures = submit_while_held(b, enc, texts, pool)
        assert first.result(10).tolist() == [vec("first").tolist()]
        for t, f in zip(texts, futures, strict=True):
            assert f.result(10).tolist() == [vec(t).tolist()]
    assert enc.calls[0] == ["first"]
    assert sorted(enc.calls[1]) == sorted(texts) and len(enc.calls) == 2
    assert (b.calls, b.texts, b.largest) == (2, 7, 6)
    b.close()


def test_a_call_holds_at_most_max_batch_texts_and_a_caller_keeps_its_texts_together():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=3))
    with ThreadPoolExecutor(8) as pool:
        first, futures = submit_while_held(b, enc, ["a", "b", "c", "d", "e"], pool)
        pair = pool.submit(b.encode, ["x", "y"])
        assert pair.result(10).tolist() == [vec("x").tolist(), vec("y").tolist()]
        assert [f.result(10)[0, 1] for f in futures] == [ord(c) for c in "abcde"]
    assert all(len(c) <= 3 for c in enc.calls)
    assert any(c[-2:] == ["x", "y"] or c[:2] == ["x", "y"] for c in enc.calls)
    b.close()


def test_a_lone_caller_is_encoded_at_once_whatever_the_window():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=16, max_wait_ms=20))
    for _ in range(20):
        b.encode(["alone"])
    # no call waited for the window (the batcher counts each wait it makes); its cost for a lone
    # caller is measured by python -m rag.bench.serve, not asserted here
    assert b.windows == 0 and b.calls == 20
    b.close()


def test_after_a_shared_call_the_window_gathers_callers_that_come_later():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=16, max_wait_ms=20))
    with ThreadPoolExecutor(8) as pool:
        first, futures = submit_while_held(b, enc, ["p", "q"], pool)
        [f.result(10) for f in futures]  # the shared call: the window opens for the next one
        together = threading.Barrier(3)

        def caller(t: str) -> np.ndarray:
            together.wait(10)
            return b.encode([t])

        later = [pool.submit(caller, t) for t in ("r", "s", "t")]
        assert [f.result(10)[0, 1] for f in later] == [ord(c) for c in "rst"]
    assert b.windows >= 1
    assert sorted(enc.calls[-1]) == ["r", "s", "t"], enc.calls
    b.close()


def test_an_error_reaches_only_the_caller_whose_text_causes_it():
    enc = Recorder(fail_on="bad")
    b = QueryBatcher(enc, BatchSettings(max_batch=16))
    with ThreadPoolExecutor(8) as pool:
        first, futures = submit_while_held(b, enc, ["good", "bad", "fine"], pool)
        assert first.result(10).shape == (1, 2)
        assert futures[0].result(10)[0, 1] == sum(map(ord, "good"))
        with pytest.raises(ValueError, match="cannot encode 'bad'"):
            futures[1].result(10)
        assert futures[2].result(10)[0, 1] == sum(map(ord, "fine"))
    assert b.encode(["after"])[0, 0] == len("after")  # the worker lives on
    b.close()


def test_an_encoder_returning_the_wrong_number_of_rows_fails_its_callers():
    b = QueryBatcher(lambda texts: np.zeros((len(texts) + 1, 2)), BatchSettings(max_batch=4))
    with pytest.raises(Exception, match="returned 2 rows for 1 texts"):
        b.encode(["one"])
    b.close()


def test_close_encodes_what_is_queued_then_refuses_new_texts():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=16))
    with ThreadPoolExecutor(8) as pool:
        release = threading.Event()
        enc.hold = release
        first = pool.submit(b.encode, ["first"])
        assert enc.entered.wait(10)
        queued = [pool.submit(b.encode, [t]) for t in ("u", "v")]
        while len(b._queue) < 2:
            time.sleep(0.001)
        closing = pool.submit(b.close)
        time.sleep(0.05)
        with pytest.raises(BatcherClosed):
            b.encode(["too late"])
        release.set()
        closing.result(10)
        assert first.result(10).shape == (1, 2)
        assert [f.result(10)[0, 1] for f in queued] == [ord("u"), ord("v")]
    assert not b._worker.is_alive()


def test_many_concurrent_callers_each_get_exactly_their_own_rows():
    enc = Recorder()
    b = QueryBatcher(enc, BatchSettings(max_batch=8, max_wait_ms=1))
    texts = [f"q{i} " + "w" * (i % 7) for i in range(200)]
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda t: b.encode([t]), texts))
    assert all(g.tolist() == [vec(t).tolist()] for g, t in zip(got, texts, strict=True))
    assert b.texts == 200 and b.largest > 1 and b.calls < 200
    b.close()


def test_settings_have_bounds_and_come_from_the_environment(monkeypatch):
    with pytest.raises(ValidationError):
        BatchSettings(max_batch=0)
    with pytest.raises(ValidationError):
        BatchSettings(max_wait_ms=50)
    with pytest.raises(ValidationError):
        BatchSettings(max_batch=4, window=2)
    assert BatchSettings().max_batch == 1
    monkeypatch.setenv("RAG_QUERY_BATCH_MAX_BATCH", "12")
    monkeypatch.setenv("RAG_QUERY_BATCH_MAX_WAIT_MS", "1.5")
    assert BatchSettings() == BatchSettings(max_batch=12, max_wait_ms=1.5)


def test_an_embedder_is_wrapped_only_when_a_batch_gives_every_text_its_own_bytes():
    emb = BowEmbedder()
    assert rows_exact(emb.encode_queries)
    assert batched(emb, None) is emb and batched(emb, BatchSettings()) is emb
    wrapped = batched(emb, BatchSettings(max_batch=8))
    assert isinstance(wrapped, BatchedQueries) and wrapped.name == emb.name
    text = "How does fastText represent sentences?"
    assert wrapped.encode_queries([text]).tobytes() == emb.encode_queries([text]).tobytes()
    assert wrapped.encode_passages([text]).tobytes() == emb.encode_passages([text]).tobytes()
    wrapped.close()

    class Padded(BowEmbedder):
        """A batch shifts every row by one ulp, as a padded or reordered reduction can."""

        def encode_queries(self, texts):
            v = super().encode_queries(texts)
            return np.nextafter(v, np.float32(np.inf)) if len(texts) > 1 else v

    padded = Padded()
    assert not rows_exact(padded.encode_queries)
    assert batched(padded, BatchSettings(max_batch=8)) is padded
