"""``rag cache clear`` drops one embedder's vectors (and indexes) or one model's replies;
``rag cache verify`` removes what fails its check and what killed fetches left."""

from __future__ import annotations

import sqlite3

import numpy as np

from rag.cli import main
from rag.index.embed_cache import cache_path, embed_texts, text_key
from rag.llm.cache import CacheEntry, CompletionCache
from rag.paths import cache_dir
from tests.test_embed import CountingEmbedder
from tests.test_reply_check import GOOD, ScriptedBackend, _model

TEXTS = [f"cached passage {i}" for i in range(6)]
IDS = [str(i) for i in range(6)]


def test_clear_embedder_drops_its_vectors_and_indexes_only(tmp_cache, capsys):
    fake, other = CountingEmbedder(fingerprint="fake-v1"), CountingEmbedder(fingerprint="other-v2")
    other.name = "other"
    embed_texts(IDS, TEXTS, fake, show_progress=False)
    embed_texts(IDS, TEXTS, other, show_progress=False)
    index = cache_dir("indexes", "dense-abc")
    (index / "meta.json").write_text('{"embedder": "fake-v1"}')
    assert main(["cache", "clear", "--embedder", "FAKE-V1"]) == 0
    assert "1 dense index" in capsys.readouterr().out
    assert not cache_path("fake-v1").exists() and cache_path("other-v2").exists()
    assert not index.exists()
    fake.seen.clear()
    embed_texts(IDS, TEXTS, fake, show_progress=False)
    assert sorted(fake.seen) == sorted(TEXTS)  # forced to re-embed


def test_clear_model_drops_its_replies(tmp_cache, capsys):
    cache = CompletionCache(cache_dir("llm"))
    model = _model(ScriptedBackend(GOOD), cache)
    model.complete([{"role": "user", "content": "hi"}])
    model.complete([{"role": "user", "content": "again"}])
    assert len(cache) == 2
    cache.close()
    assert main(["cache", "clear", "--model", "local:smollm2-135m"]) == 0
    assert "removed 2 cached completion(s)" in capsys.readouterr().out
    assert len(CompletionCache(cache_dir("llm"))) == 0


def test_verify_removes_poison_bad_replies_and_fetch_leftovers(tmp_cache, capsys):
    emb = CountingEmbedder()
    embed_texts(IDS, TEXTS, emb, show_progress=False)
    with sqlite3.connect(cache_path(emb.fingerprint)) as con:
        nan = np.full(emb.dim, np.nan, dtype=np.float32).tobytes()
        con.execute("UPDATE vec SET v = ? WHERE key = ?", (nan, text_key(TEXTS[2])))
    cache = CompletionCache(cache_dir("llm"))
    cache.set("a" * 64, CacheEntry("   ", 1, 0, 0.0, 0.1))
    cache.set("b" * 64, CacheEntry("A fine reply.", 1, 3, 0.0, 0.1))
    cache.close()
    models = cache_dir("llm", "models")
    (models / ".fetch-k1ll3d").mkdir()
    (models / ".fetch-k1ll3d" / "part.whl").write_bytes(b"x" * 2048)
    assert main(["cache", "verify"]) == 0
    out = capsys.readouterr().out
    assert "5 ok, 1 removed" in out and "completions: 2 stored, 1 removed" in out
    assert "removed .fetch-k1ll3d (2,048 bytes)" in out
    assert list(models.iterdir()) == []
    emb.seen.clear()
    embed_texts(IDS, TEXTS, emb, show_progress=False)
    assert emb.seen == [TEXTS[2]]
