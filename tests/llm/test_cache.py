from __future__ import annotations

import hashlib
import multiprocessing as mp

from rag.llm.cache import CACHE_FORMAT, CacheEntry, CompletionCache, cache_key
from rag.llm.testing import cache_writer

REQ = dict(
    provider="openai",
    model="gpt-4o-mini",
    messages=[{"role": "user", "content": "hi"}],
    temperature=0.0,
    max_tokens=16,
    stop=None,
    seed=0,
    json_mode=False,
    prompt_version="v1",
)


def test_key_is_sha256_of_canonical_json():
    expected = (
        '{"format":"' + CACHE_FORMAT + '","json_mode":false,'
        '"max_tokens":16,"messages":[{"content":"hi","role":"user"}],"model":"gpt-4o-mini",'
        '"prompt_version":"v1","provider":"openai","seed":0,"stop":null,"temperature":0.0}'
    )
    assert cache_key(**REQ) == hashlib.sha256(expected.encode()).hexdigest()


def test_every_field_changes_the_key():
    base = cache_key(**REQ)
    changes = dict(
        provider="groq",
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi!"}],
        temperature=0.5,
        max_tokens=17,
        stop=["\n"],
        seed=1,
        json_mode=True,
        prompt_version="v2",
    )
    for field, value in changes.items():
        assert cache_key(**{**REQ, field: value}) != base, field


def test_roundtrip_and_miss(tmp_path):
    c = CompletionCache(tmp_path)
    assert c.get("k") is None
    e = CacheEntry("answer", 3, 4, 0.001, 0.2)
    c.set("k", e)
    assert CompletionCache(tmp_path).get("k") == e
    c.close()


def test_two_processes_write_one_cache(tmp_path):
    d = str(tmp_path / "shared-cache")
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        done = pool.starmap(cache_writer, [(d, "a", 300, 100), (d, "b", 300, 100)])
    assert done == [400, 400]
    c = CompletionCache(d)
    assert len(c) == 300 + 300 + 100
    for p in "ab":
        for i in (0, 150, 299):
            assert c.get(f"{p}-{i}") == CacheEntry(f"{p} answer {i}", i, 2 * i, i / 1e6, 0.0)
    assert c.get("shared-99") == CacheEntry("shared answer 99", 99, 99, 0.0, 0.0)
    c.close()
