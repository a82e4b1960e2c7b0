"""A file's sha256, and a memo that re-reads the file only when its stat signature changes.

The signature is size, inode, mtime and ctime in nanoseconds: any write to a file moves its
ctime, so a file whose signature is unchanged holds the bytes that were hashed (git's index trusts
the same fields). File times tick coarsely (a few ms), so a write in the same tick as the hash
would keep the signature: as git does with "racily clean" entries, a file changed less than
:data:`SETTLED_NS` ago is hashed every time and not memoised. The memo is one small JSON per file
under ``cache_dir(<memo>)``, named by a hash of the resolved path, so the path itself is never
written. The PDF check (``file-sha``) and the fetched-model check (``model-sha``) share it.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from rag.atomic import write_atomic

#: How long ago a file must have last changed for :func:`sha256_memo` to memoise its hash.
SETTLED_NS = 2_000_000_000
_BLOCK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def sha256_memo(path: Path, memo: str) -> str:
    """Hex sha256 of ``path``, read from the memo folder ``memo`` while its signature holds."""
    from rag.paths import cache_dir

    path = Path(path)
    st = path.stat()
    signature = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    held_at = cache_dir(memo) / f"{name}.json"
    try:
        held = json.loads(held_at.read_text(encoding="utf-8"))
        if held.get("signature") == signature and isinstance(held.get("sha256"), str):
            return held["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = sha256_file(path)
    if time.time_ns() - st.st_ctime_ns >= SETTLED_NS:
        try:
            write_atomic(held_at, json.dumps({"signature": signature, "sha256": digest}))
        except OSError:
            pass
    return digest


__all__ = ["SETTLED_NS", "sha256_file", "sha256_memo"]
