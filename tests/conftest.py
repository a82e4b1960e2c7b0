"""Shared fixtures. The default test run is offline and fast; ``slow`` tests use the real corpus."""

from __future__ import annotations

import pytest

from rag import paths


@pytest.fixture(scope="session")
def shared_dir():
    """The read-only ../shared folder; tests that need it skip visibly when it is absent."""
    d = paths.shared_dir()
    if not (d / "corpus" / "manifest.jsonl").exists():
        pytest.skip(f"shared data folder not found at {d} (set RAG_SHARED_DIR)")
    return d


@pytest.fixture()
def tmp_cache(tmp_path, monkeypatch):
    """An empty cache root for one test."""
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"
