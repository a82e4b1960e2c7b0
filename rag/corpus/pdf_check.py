"""Is a local file a whole PDF? The checks a download must pass before it takes its final name.

A PDF starts with ``%PDF-`` and ends with ``%%EOF`` (ISO 32000-1, 7.5.2 and 7.5.5), so a body cut
short by a dropped connection fails :func:`looks_like_pdf` even when its first bytes are right.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from rag.atomic import write_atomic

PDF_MAGIC = b"%PDF-"
PDF_EOF = b"%%EOF"
#: How far from the end ``%%EOF`` may sit (trailing whitespace / linearisation padding).
EOF_WINDOW = 2048
#: How long ago a file must have last changed for :func:`sha256_file_cached` to memoise its hash.
SETTLED_NS = 2_000_000_000


def looks_like_pdf(path: Path) -> bool:
    """True when the file starts with ``%PDF-`` and has ``%%EOF`` near its end (not truncated)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(PDF_MAGIC))
            f.seek(max(0, size - EOF_WINDOW))
            tail = f.read()
    except OSError:
        return False
    return head == PDF_MAGIC and PDF_EOF in tail


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_file_cached(path: Path) -> str:
    """Hex sha256 of a file, re-read only when its stat signature changes.

    The signature is size, inode, mtime and ctime in nanoseconds: any write to the file moves its
    ctime, so a file whose signature is unchanged holds the bytes that were hashed (git's index
    trusts the same fields). File times tick coarsely (a few ms), so a write in the same tick as
    the hash would keep the signature: as git does with "racily clean" entries, a file changed
    less than :data:`SETTLED_NS` ago is hashed every time and not memoised. The memo is one small
    JSON per file under ``cache_dir("file-sha")``, named by a hash of the resolved path, so the
    path itself is never written.
    """
    from rag.paths import cache_dir

    path = Path(path)
    st = path.stat()
    signature = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    memo = cache_dir("file-sha") / f"{name}.json"
    try:
        held = json.loads(memo.read_text(encoding="utf-8"))
        if held.get("signature") == signature and isinstance(held.get("sha256"), str):
            return held["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = sha256_file(path)
    if time.time_ns() - st.st_ctime_ns < SETTLED_NS:
        return digest
    try:
        write_atomic(memo, json.dumps({"signature": signature, "sha256": digest}))
    except OSError:
        pass
    return digest


def pdf_problem(path: Path) -> str | None:
    """Why a local file is not a usable PDF ("empty", "not a PDF ...", "truncated ..."), or None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(len(PDF_MAGIC))
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if size == 0:
        return "empty file"
    if head != PDF_MAGIC:
        return f"not a PDF (starts with {head!r})"
    if not looks_like_pdf(path):
        return f"truncated (no %%EOF trailer in its {size:,} bytes)"
    return None
