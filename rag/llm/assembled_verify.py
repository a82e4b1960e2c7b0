"""A fetched model is verified each time it is used, at the cost of a ``stat`` when unchanged.

A model's *content digest* is the sha256 of the files its loader actually reads: for a GGUF file,
the file itself (so the digest is the pinned one); for a sentence-transformers folder, the sha256
of one ``"<relative path>\\0<file sha256>\\n"`` line per loaded file, in path order (files the
loader never opens — other weight formats, ONNX/OpenVINO exports, the README — are left out, so a
byte flipped in them changes nothing that is computed). ``rag models fetch`` records the folder's
digest in its marker once the pinned archive has been verified; :func:`verify` recomputes it on
every load and refuses a model whose bytes differ, naming both digests and the fetch command.

Each file's sha256 is memoised by its stat signature (size, inode, mtime, ctime) with
:func:`rag.llm.assembled_io.sha256_memo`, the PDF memo's scheme, so an unchanged model costs a few
``stat`` calls and any write to a file (which moves its ctime) forces a re-hash. The embedding
fingerprint of a fetched folder keys on this digest, never on the download's.

The functions take a model record (:class:`rag.llm.assembled.AssembledModel`: its ``name``,
``sha256`` and ``folder``) and never import it, so :mod:`rag.llm.assembled` can use them.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rag.llm.assembled_io import MARKER, read_marker, sha256_memo, sha256_of

log = logging.getLogger(__name__)

#: Marker key holding a folder's content digest.
FILES_KEY = "files_sha256"
#: Folder entries a sentence-transformers load never reads (other formats and documentation).
NOT_LOADED_DIRS = frozenset({"onnx", "openvino", ".git"})
NOT_LOADED_FILES = frozenset(
    {
        MARKER,
        "pytorch_model.bin",
        "tf_model.h5",
        "flax_model.msgpack",
        "rust_model.ot",
        "README.md",
        ".gitattributes",
    }
)


def loaded_files(path: Path) -> list[Path]:
    """The files a load of the folder ``path`` reads, in path order (a file: itself)."""
    if path.is_file():
        return [path]
    files = []
    for f in path.rglob("*"):
        rel = f.relative_to(path)
        if f.is_file() and rel.parts[0] not in NOT_LOADED_DIRS and rel.name not in NOT_LOADED_FILES:
            files.append(f)
    return sorted(files, key=lambda f: f.relative_to(path).as_posix())


def content_digest(path: Path, *, memo: bool = True) -> str:
    """The sha256 of what a load of ``path`` reads (see the module docstring).

    ``memo`` reuses each file's hash while its stat signature is unchanged; False re-reads every
    byte (``rag models fetch`` and ``rag cache verify`` do).
    """
    digest = sha256_memo if memo else sha256_of
    if path.is_file():
        return digest(path)
    h = hashlib.sha256()
    for f in loaded_files(path):
        h.update(f"{f.relative_to(path).as_posix()}\0{digest(f)}\n".encode())
    return h.hexdigest()


def expected_digest(model: Any, path: Path) -> str | None:
    """The digest ``path`` must have: the pin for a file, the marker's for a folder (None: a
    marker written before folders recorded one)."""
    if model.folder is None:
        return model.sha256
    got = (read_marker(path) or {}).get(FILES_KEY)
    return got if isinstance(got, str) else None


def record_digest(model: Any, path: Path, digest: str) -> None:
    """Write a folder's content digest into its marker (atomically: the marker is the proof that
    the folder is complete)."""
    mark = read_marker(path) or {}
    mark = {**mark, FILES_KEY: digest}
    tmp = path / f".{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(mark, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path / MARKER)


def problem(model: Any, path: Path, *, memo: bool = True) -> tuple[str, str] | None:
    """``(got, expected)`` digests when the artifact at ``path`` is not what was verified at
    fetch time, else None (it is).

    A folder whose marker predates content digests is checked on its weights against the pin
    and, when they match, gets its digest recorded once.
    """
    got = content_digest(path, memo=memo)
    want = expected_digest(model, path)
    if want is None and model.folder is not None:
        weights = path / model.folder.weights
        have = sha256_memo(weights) if memo else sha256_of(weights)
        if have != model.folder.weights_sha256:
            return have, model.folder.weights_sha256
        record_digest(model, path, got)
        log.info("%s: recorded the content digest of its loaded files", model.name)
        return None
    return None if got == want else (got, str(want))


def lock_file(directory: Path) -> Path:
    """The lock every fetch into ``directory`` holds (beside the folder, not in it), so what is
    found there under the lock was left by a fetch that is no longer running."""
    return directory.parent / f".{directory.name}.fetch.lock"


@contextmanager
def fetch_lock(directory: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold the models folder's fetch lock (an advisory ``flock``, released by the kernel when
    the process dies); yields False without waiting when ``wait`` is False and another process
    holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file(directory), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            log.info("waiting for another fetch in %s", directory.name)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


def leftovers(directory: Path) -> list[Path]:
    """Temporary folders and files a killed fetch leaves in the models folder: ``.fetch-*``
    download folders and ``.*.part`` / ``.*.old`` artifacts (call with the fetch lock held)."""
    if not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.name.startswith(".fetch-")
        or (p.name.startswith(".") and p.suffix in (".part", ".old"))
    )


def remove_leftovers(directory: Path) -> list[tuple[str, int]]:
    """Remove :func:`leftovers` (call with the fetch lock held); returns ``(name, bytes)`` of
    each removed."""
    removed = []
    for p in leftovers(directory):
        if p.is_dir() and not p.is_symlink():
            size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            shutil.rmtree(p, ignore_errors=True)
        else:
            size = p.stat().st_size
            p.unlink(missing_ok=True)
        log.info("removed %s (%d bytes) left by a killed fetch", p.name, size)
        removed.append((p.name, size))
    return removed
