"""Slow first loads, bounded: a component (the reranker, the judge, a chat model) loads once on a
background thread, and a request waits for it at most ``timeout_s``; past that it gets
:class:`StillLoading`, which the service answers with a 503 and ``Retry-After`` while the load
goes on. A load that fails is tried again by the next request that needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from rag.errors import RagError

T = TypeVar("T")

#: Seconds a client is told to wait before asking again while a component loads.
RETRY_AFTER_S = 10


class StillLoading(RagError):
    """A component a request needs is still loading after the request's bounded wait."""

    def __init__(self, what: str, waited_s: float) -> None:
        super().__init__(
            f"{what} is still loading after {waited_s:g} s (its first load); retry in "
            f"{RETRY_AFTER_S} s"
        )
        self.what = what


class Loader:
    """Components by key, each loaded once on one background thread (loads run one at a time).

    Args:
        timeout_s: the longest a request waits for a load (None: as long as it takes).
    """

    def __init__(self, timeout_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._futures: dict[str, Future[Any]] = {}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="load")

    def get(self, key: str, load: Callable[[], T], what: str | None = None) -> T:
        """The component ``key``, loading it with ``load`` the first time.

        Raises:
            StillLoading: the load has not finished within ``timeout_s``.
            Exception: whatever the load raised (the next call loads again).
        """
        with self._lock:
            fut = self._futures.get(key)
            if fut is None or (fut.done() and fut.exception() is not None):
                fut = self._futures[key] = self._pool.submit(load)
        try:
            return fut.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise StillLoading(what or key, self.timeout_s or 0.0) from None

    def loaded(self, key: str) -> bool:
        """Whether ``key`` has finished loading without an error."""
        fut = self._futures.get(key)
        return fut is not None and fut.done() and fut.exception() is None


class StillRunning(StillLoading):
    """A request's model work is still running after its bounded wait; it goes on, and its
    completions are cached, so the same request asked again is answered from the cache."""

    def __init__(self, what: str, waited_s: float) -> None:
        RagError.__init__(
            self,
            f"{what} is still running after {waited_s:g} s; it goes on and its result is cached, "
            f"so the same request in {RETRY_AFTER_S} s or later is answered at once",
        )
        self.what = what


class Bounded:
    """Runs a request's work on a small pool of its own and waits at most ``timeout_s`` for it
    (None: as long as it takes); past that, :class:`StillRunning` while the work goes on."""

    def __init__(self, timeout_s: float | None, workers: int = 2) -> None:
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="request")

    def run(self, fn: Callable[[], T], what: str) -> T:
        """``fn()``, or :class:`StillRunning` when it takes longer than ``timeout_s``."""
        if self.timeout_s is None:
            return fn()
        fut = self._pool.submit(fn)
        try:
            return fut.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise StillRunning(what, self.timeout_s) from None
