"""Cross-process locks for one paper's fetch + parse in a PDF folder.

Two ingests into one PDF folder share the temp name ``.<id>.pdf.part`` (which is what lets a re-run
after a kill overwrite a half-written file). Without a lock the second opens that file for writing
while the first is still filling it, truncating it under the first one, which then verifies its own
stream, moves the file into place and parses a PDF with a hole in it. An advisory ``flock`` per
paper makes the second ingest wait, then find the first one's verified PDF in the cache.

POSIX ``fcntl.flock`` locks are released by the kernel when the process dies, so a ``kill -9``
never leaves a stale lock behind (the empty lock file stays and is reused).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


def lock_path(folder: Path, name: str) -> Path:
    """The lock file guarding ``folder/name`` (hidden, beside it)."""
    return folder / f".{name}.lock"


@contextmanager
def file_lock(path: Path) -> Iterator[float]:
    """Hold an exclusive advisory lock on ``path`` (created if missing); yields seconds waited."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    t0 = time.perf_counter()
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another process holding %s", path.name)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield time.perf_counter() - t0
    finally:
        os.close(fd)  # closing the descriptor releases the lock
