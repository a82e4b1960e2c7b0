"""Request spacing for a polite client: at least ``min_interval`` seconds between request starts."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


class RateLimiter:
    """Spaces request starts at least ``min_interval`` seconds apart (thread-safe).

    With a ``stamp`` file the last start time (wall clock) is also shared across processes, so a
    run restarted right after a kill still waits out the interval of the one before it.
    """

    def __init__(
        self,
        min_interval: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        stamp: Path | None = None,
    ) -> None:
        self.min_interval = min_interval
        self._clock = time.time if stamp is not None else clock
        self._sleep = sleep
        self._stamp = stamp
        self._last: float | None = None
        self._lock = threading.Lock()

    def _previous(self) -> float | None:
        if self._stamp is None:
            return self._last
        try:
            shared = float(self._stamp.read_text(encoding="ascii"))
        except (OSError, ValueError):
            return self._last
        # A stamp from the future (clock change) must not block for long.
        shared = min(shared, self._clock())
        return shared if self._last is None else max(shared, self._last)

    def wait(self) -> float:
        """Block until a request may start; returns the seconds slept."""
        with self._lock:
            slept = 0.0
            last = self._previous()
            if last is not None:
                slept = max(0.0, last + self.min_interval - self._clock())
                if slept > 0:
                    self._sleep(slept)
            self._last = self._clock()
            if self._stamp is not None:
                try:
                    self._stamp.write_text(repr(self._last), encoding="ascii")
                except OSError as e:
                    log.warning("cannot record request time in %s: %s", self._stamp, e)
            return slept
