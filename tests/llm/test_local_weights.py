"""The local model's f16 / bf16 copies: made once, atomically, cached apart from Q4_1's answers."""

from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.llm.cache import CompletionCache
from rag.llm.factory import make_chat_model
from rag.llm.local import LocalBackend, converted_gguf, find_gguf
from rag.llm.settings import ApiKeys, LLMSettings

Q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]


def test_q4_1_is_the_packaged_file_and_unknown_weights_are_named():
    assert converted_gguf("q4_1") == find_gguf()
    with pytest.raises(ConfigError, match="'int3'"):
        converted_gguf("int3")  # type: ignore[arg-type]


def test_backend_names_unknown_weights():
    with pytest.raises(ConfigError, match="'int3'"):
        LocalBackend("llama_cpp", weights="int3")  # type: ignore[arg-type]


def test_transformers_ignores_the_setting_and_keeps_the_q4_1_cache_key():
    b = LocalBackend("transformers", weights="bf16")
    assert b.weights == "q4_1" and b.weights_tag is None


def test_conversion_is_made_once_into_the_cache_and_loads(tmp_cache):
    import gguf

    path = converted_gguf("f16")
    assert path.parent == tmp_cache / "llm" / "weights" and path.suffix == ".gguf"
    assert not list(path.parent.glob(".*.tmp"))  # written to a temporary name, then renamed
    mtime = path.stat().st_mtime_ns
    assert converted_gguf("f16") == path and path.stat().st_mtime_ns == mtime  # not made again
    types = {t.tensor_type.name for t in gguf.GGUFReader(path).tensors}
    assert "F16" in types and "Q4_1" not in types
    src_types = {t.tensor_type.name for t in gguf.GGUFReader(find_gguf()).tensors}
    assert "Q4_1" in src_types


def test_converted_weights_answer_and_never_share_cache_entries_with_q4_1(tmp_cache, tmp_path):
    cache = CompletionCache(tmp_path / "llm-cache")
    models = {
        w: make_chat_model(
            "smollm2-135m",
            LLMSettings(local_backend="llama_cpp", local_weights=w),
            cache=cache,
            keys=ApiKeys(),
        )
        for w in ("q4_1", "bf16")
    }
    first = {w: m.complete(Q, max_tokens=8) for w, m in models.items()}
    assert all("paris" in a.text.lower() for a in first.values())
    # the bf16 call was not served the Q4_1 answer: both were fresh, each is cached on its own
    assert not first["q4_1"].cached and not first["bf16"].cached
    assert len(cache) == 2
    assert all(m.complete(Q, max_tokens=8).cached for m in models.values())


def test_default_settings_run_bf16():
    assert LLMSettings().local_weights == "bf16"
    with pytest.raises(ValueError, match="local_weights"):
        LLMSettings(local_weights="q2")  # type: ignore[arg-type]
