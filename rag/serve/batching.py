"""Dynamic micro-batching of query encoding: concurrent requests share one encoder call.

The service runs each request on a thread of the server's pool, and a ``/search`` spends most of
its time encoding its query. A :class:`QueryBatcher` puts one worker thread in front of the
encoder, as inference servers batch dynamically (Triton's dynamic batcher, TorchServe's
``batch_size`` / ``max_batch_delay``): a caller queues its texts and waits on a future; the worker
takes everything queued (at most ``max_batch`` texts), encodes it in one call and hands each caller
exactly its own rows. A lone request on an idle worker is encoded at once, so one client pays no
window; requests arriving while an encode runs go together into the next call. ``max_wait_ms``
adds a window under load only: after a call that served more than one caller, the worker waits up
to that long for the queue to fill.

Batching must not change a result, so :func:`batched` wraps an embedder only when one call over
probe texts returns, for every text, the bytes that text gets alone (a padded batch, or a
reduction whose order depends on the batch size, changes the last bits of a vector and can flip a
rounded score or a near tie); otherwise each request encodes its own query on its own thread. A
failed call is retried one caller at a time, so an error reaches only the caller whose texts cause
it.

The settings come from ``RAG_QUERY_BATCH_MAX_BATCH`` and ``RAG_QUERY_BATCH_MAX_WAIT_MS`` (the
service reads its environment at start); ``max_batch = 1``, the default, means no batcher. The
served MiniLM export encodes a list one text at a time (onnxruntime's batched rows differ from
single ones in the last bits), so there batching is exact but saves nothing, and it stays off;
the ``Batching`` section of ``docs/serve.md`` gives the measurements.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag.errors import RagError
from rag.ir import EmbedderLike

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], np.ndarray]

#: Texts the batch check encodes alone and together: two share a token count (a batch without
#: padding), the others differ in length (a padded batch), one is truncated.
PROBES = (
    "what is dense retrieval?",
    "what is sparse retrieval?",
    "How does fastText represent sentences?",
    "Which n-gram lengths does the subword skipgram use?",
    "Ünïcödé — résumé naïve café ≥ 0.5 α-β",
    " ".join(["retrieval augmented generation with citations"] * 80),
)


class BatchSettings(BaseSettings):
    """How query encodings are batched (environment: ``RAG_QUERY_BATCH_<FIELD>``)."""

    model_config = SettingsConfigDict(env_prefix="RAG_QUERY_BATCH_", extra="forbid", frozen=True)

    max_batch: int = Field(
        1, ge=1, le=256, description="Most texts encoded in one call (1: no batcher)."
    )
    max_wait_ms: float = Field(
        0.0,
        ge=0.0,
        le=20.0,
        description="After a call that served several callers, how long the worker waits for "
        "more before the next call (0: it takes what is queued).",
    )


class BatcherClosed(RagError):
    """A text was handed to a :class:`QueryBatcher` after :meth:`QueryBatcher.close`."""


class _Request:
    __slots__ = ("texts", "future")

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.future = texts, Future()


class QueryBatcher:
    """One worker thread that encodes the texts of concurrent callers in shared calls.

    Args:
        encode: ``texts -> (len(texts), dim)`` array; called from the worker thread only.
        settings: batch size and window.
        name: the worker thread's name.
    """

    def __init__(
        self, encode: Encode, settings: BatchSettings | None = None, *, name: str = "query-batch"
    ) -> None:
        self._encode, self.settings = encode, settings or BatchSettings()
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._closed = False
        #: encoder calls made, texts encoded, the most texts of one call, windows waited
        self.calls = self.texts = self.largest = self.windows = 0
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)
        self._worker.start()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The rows ``encode`` gives ``texts``, computed with whatever else is queued.

        Raises:
            BatcherClosed: after :meth:`close`.
            Exception: whatever the encoder raises for these texts.
        """
        req = _Request(list(texts))
        with self._cond:
            if self._closed:
                raise BatcherClosed("the query batcher is closed (the service is stopping)")
            self._queue.append(req)
            self._cond.notify()
        return req.future.result()

    def close(self, timeout: float | None = 30.0) -> None:
        """Refuse new texts, encode those already queued, and stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout)

    def _queued_texts(self) -> int:
        return sum(len(r.texts) for r in self._queue)

    def _take(self, max_texts: int) -> list[_Request]:
        batch = [self._queue.popleft()]
        n = len(batch[0].texts)
        while self._queue and n + len(self._queue[0].texts) <= max_texts:
            n += len(self._queue[0].texts)
            batch.append(self._queue.popleft())
        return batch

    def _run(self) -> None:
        try:
            self._loop()
        finally:  # the worker is gone: no caller may wait for it
            with self._cond:
                self._closed = True
                left = list(self._queue)
                self._queue.clear()
            for r in left:
                r.future.set_exception(BatcherClosed("the query batcher stopped"))

    def _loop(self) -> None:
        s = self.settings
        served_several = False
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:  # closed and drained
                    return
                if served_several and s.max_wait_ms > 0:
                    self.windows += 1
                    deadline = time.monotonic() + s.max_wait_ms / 1000
                    while not self._closed and self._queued_texts() < s.max_batch:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                batch = self._take(s.max_batch)
            served_several = len(batch) > 1
            self._serve(batch)

    def _serve(self, batch: list[_Request]) -> None:
        texts = [t for r in batch for t in r.texts]
        try:
            rows = np.asarray(self._encode(texts))
            if rows.shape[0] != len(texts):
                raise RagError(f"the encoder returned {rows.shape[0]} rows for {len(texts)} texts")
        except Exception as e:
            if len(batch) == 1:
                batch[0].future.set_exception(e)
            else:  # find whose texts fail: each caller alone
                for r in batch:
                    self._serve([r])
            return
        self.calls += 1
        self.texts += len(texts)
        self.largest = max(self.largest, len(texts))
        if len(batch) > 1:
            log.debug("query batch: %d texts of %d callers in one call", len(texts), len(batch))
        i = 0
        for r in batch:
            r.future.set_result(rows[i : i + len(r.texts)].copy())
            i += len(r.texts)


def rows_exact(encode: Encode, probes: Sequence[str] = PROBES) -> bool:
    """Whether one call over ``probes`` gives every probe the bytes it gets alone."""
    alone = [np.asarray(encode([t])) for t in probes]
    together = np.asarray(encode(list(probes)))
    return together.shape[0] == len(probes) and all(
        a.shape[0] == 1 and a.dtype == together.dtype and a[0].tobytes() == together[i].tobytes()
        for i, a in enumerate(alone)
    )


class BatchedQueries:
    """An embedder whose ``encode_queries`` goes through a :class:`QueryBatcher`; passages and
    every other attribute are the wrapped embedder's."""

    def __init__(self, embedder: EmbedderLike, settings: BatchSettings) -> None:
        self.inner, self.name = embedder, embedder.name
        self.batcher = QueryBatcher(embedder.encode_queries, settings)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return self.inner.encode_queries(texts)
        return self.batcher.encode(texts)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_passages(texts)

    def close(self) -> None:
        self.batcher.close()

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)


def batched(embedder: EmbedderLike, settings: BatchSettings | None) -> EmbedderLike:
    """``embedder`` with batched query encoding, or ``embedder`` itself when ``settings`` ask for
    no batching or a batched call would change a vector (:func:`rows_exact`, logged)."""
    if settings is None or settings.max_batch <= 1:
        return embedder
    if not rows_exact(embedder.encode_queries):
        log.warning(
            "query batching off: %s gives a text other bytes in a batch than alone",
            embedder.name,
        )
        return embedder
    log.info(
        "query batching on: up to %d texts a call, window %.1f ms",
        settings.max_batch,
        settings.max_wait_ms,
    )
    return BatchedQueries(embedder, settings)
