"""A target written through rag.atomic never exists half-written, and no temporary file stays."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from rag.atomic import atomic_path, temp_name, write_atomic


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_write_atomic_writes_text_and_bytes_and_creates_the_folder(tmp_path):
    target = tmp_path / "sub" / "a.json"
    assert write_atomic(target, "héllo\n") == target
    assert target.read_bytes() == "héllo\n".encode()
    write_atomic(target, b"\x00\x01", fsync=True)
    assert target.read_bytes() == b"\x00\x01"
    assert _leftovers(target.parent) == []


def test_a_write_that_raises_midway_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "chunks.jsonl"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="killed"), atomic_path(target) as tmp:
        with tmp.open("w", encoding="utf-8") as f:
            f.write("new line 1\n")
            f.flush()
            # half the new content is on disk, under the temporary name only
            assert tmp.read_text(encoding="utf-8") == "new line 1\n"
            assert target.read_text(encoding="utf-8") == "old\n"
            raise RuntimeError("killed mid-write")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert _leftovers(tmp_path) == []


def test_a_failed_first_write_leaves_no_target(tmp_path):
    target = tmp_path / "model.safetensors"

    def writer(name):  # a library writer that dies after creating its file
        open(name, "wb").write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"), atomic_path(target) as tmp:
        writer(str(tmp))
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_the_temp_name_is_a_dot_file_beside_the_target_per_process_and_thread(tmp_path):
    target = tmp_path / "x.onnx"
    tmp = temp_name(target)
    assert tmp.parent == tmp_path and tmp.name.startswith(".x.onnx.") and tmp.suffix == ".tmp"
    assert str(os.getpid()) in tmp.name
    other: list = []
    t = threading.Thread(target=lambda: other.append(temp_name(target)))
    t.start()
    t.join()
    assert other[0] != tmp


def test_the_file_gets_the_ordinary_mode_not_a_private_one(tmp_path):
    target = write_atomic(tmp_path / "manifest.jsonl", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
