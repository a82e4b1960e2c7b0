"""What a new user reads at the command line: ``rag models`` and its ``fetch``, and what
``rag pipeline`` says of a first build and of file names. Each message says what happened and what
to do; none reads as an error when nothing went wrong.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rag import cli
from rag.llm.assembled import ASSEMBLED
from rag.llm.commands import models_table


def test_models_shows_a_size_for_every_fetchable_model():
    table = models_table().splitlines()
    for name, model in ASSEMBLED.items():
        assert model.size is not None, name
        (row,) = [line for line in table if line.startswith(f"{name} ")]
        assert " ? " not in row and ("MB" in row or "GB" in row), row
    assert ASSEMBLED["qwen2.5-coder-0.5b"].size == 491_400_064  # measured on a verified fetch


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_models_fetch_help_is_its_own(capsys):
    models, fetch = _help(capsys, "models"), _help(capsys, "models", "fetch")
    assert fetch != models
    assert fetch.startswith("usage: rag models fetch") and "sha256" in fetch and "name" in fetch
    assert "fetch" in models and "list" in models


def test_models_fetch_without_a_name_says_which_names_exist(capsys):
    assert cli.main(["models", "fetch"]) == 2
    err = capsys.readouterr().err
    assert "None" not in err and "needs a model name" in err
    assert all(name in err for name in ASSEMBLED), err


def test_pipeline_says_which_files_are_not_named_by_arxiv_id(tmp_path, caplog):
    from rag.index.pipeline import pdf_files

    for name in ("my paper.pdf", "1607.04606.pdf", "1409.0473v7.pdf", "hep-th_9901001.pdf"):
        (tmp_path / name).write_bytes(b"%PDF-1.4\n")
    with caplog.at_level(logging.WARNING, logger="rag.index.pipeline"):
        files = pdf_files(tmp_path)
    assert [p.stem for p in files] == ["1409.0473v7", "1607.04606", "hep-th_9901001", "my paper"]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    text = record.getMessage()
    assert "'my paper.pdf' as 'my paper'" in text and "--pdfs" in text
    assert "1607.04606" not in text and "hep-th" not in text


def test_a_first_index_build_is_not_reported_as_an_error(tmp_path, caplog):
    from rag.index import bm25, dense

    ids = ["a", "b", "c"]
    vectors = np.eye(3, 8, dtype=np.float32)

    def build(chunks: str = "c"):
        return lambda: dense.DenseIndex(
            ids, vectors, embedder_fingerprint="e", chunk_fingerprint=chunks
        )

    fingerprints = {"embedder_fingerprint": "e", "chunk_fingerprint": "c"}
    with caplog.at_level(logging.INFO, logger="rag.index"):
        dense.load_or_build(tmp_path / "dense", build(), **fingerprints)
        bm25.load_or_build(tmp_path / "bm25", ids, ["one text", "two texts", "three"])
    first = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("dense index: first build in ") for m in first), first
    assert any(m.startswith("BM25 index: first build in ") for m in first), first
    assert not [m for m in first if "Errno" in m or "no readable" in m], first

    caplog.clear()  # a changed setting is a rebuild, and says why
    with caplog.at_level(logging.INFO, logger="rag.index"):
        dense.load_or_build(
            tmp_path / "dense", build("d"), embedder_fingerprint="e", chunk_fingerprint="d"
        )
    assert any("rebuilding the dense index" in r.getMessage() for r in caplog.records)
