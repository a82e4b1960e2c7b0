"""Atomic file writes: a temporary file in the target's folder, then one ``os.replace``.

A reader (or a process killed mid-write) sees the old file or the new one, never half of one:
``os.replace`` within one folder is atomic on POSIX and Windows. The temporary file is named
``.<name>.<pid>.<thread>.tmp`` beside the target, so two writers never share it, a folder listing
skips it (dot file) and globs on the target's suffix do not match it; it is removed when the write
fails. Files get the ordinary mode (umask), as ``Path.write_text`` gives them. Durability across a
power cut is opt-in (``fsync=True``): flushing to disk costs milliseconds per file, which the
caches and records written here do not need.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


def temp_name(path: Path) -> Path:
    """The temporary file a write to ``path`` goes through (this process and thread only)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s new content to; on a clean exit move it onto
    ``path``, on an exception delete it and leave ``path`` as it was.

    For writers that take a file name (``torch.save``, safetensors, ONNX export) or stream lines:
    ``with atomic_path(p) as tmp, tmp.open("w") as f: ...``. The parent folder is created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8", fsync: bool = False
) -> Path:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` atomically; return ``path``.

    ``fsync=True`` also flushes the file and then its folder to disk, so the new content survives a
    power cut, not just a killed process.
    """
    path = Path(path)
    blob = data.encode(encoding) if isinstance(data, str) else data
    with atomic_path(path) as tmp, tmp.open("wb") as f:
        f.write(blob)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    if fsync:
        fsync_dir(path.parent)
    return path


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename into it) to disk; a no-op where folders cannot be
    opened (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
