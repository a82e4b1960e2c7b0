"""Is a local file a whole PDF? The checks a download must pass before it takes its final name.

A PDF starts with ``%PDF-`` and ends with ``%%EOF`` (ISO 32000-1, 7.5.2 and 7.5.5), so a body cut
short by a dropped connection fails :func:`looks_like_pdf` even when its first bytes are right.
"""

from __future__ import annotations

from pathlib import Path

from rag.filehash import sha256_memo

PDF_MAGIC = b"%PDF-"
PDF_EOF = b"%%EOF"
#: How far from the end ``%%EOF`` may sit (trailing whitespace / linearisation padding).
EOF_WINDOW = 2048


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


def sha256_file_cached(path: Path) -> str:
    """Hex sha256 of a file, re-read only when its stat signature changes
    (:func:`rag.filehash.sha256_memo`, memo folder ``file-sha``)."""
    return sha256_memo(path, "file-sha")


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
