"""Synchronisation for tests that drive other processes or threads: poll for the state the next
step needs, with a deadline, instead of sleeping for a time that is long enough on a quiet
machine and too short on a loaded one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, what: str, timeout_s: float = 120.0, interval_s: float = 0.02
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    Raises:
        AssertionError: ``timeout_s`` passed first (the message names ``what`` was awaited).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
