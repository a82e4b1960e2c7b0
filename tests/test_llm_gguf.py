"""Any local GGUF chat model by path (``gguf:PATH``), tested with the packaged SmolLM2 weights.

The file given by path is the bf16 copy of the packaged weights that ``local:smollm2-135m`` runs by
default (``LLMSettings.local_weights``), so the two names run the same bytes with the same engine
and must give the same greedy answers; the gguf model reads its chat template, end token and
context length from the file itself.
"""

from __future__ import annotations

import os
import shutil

import pytest

from rag.errors import ConfigError, ProviderUnavailable
from rag.llm import gguf
from rag.llm.cache import CompletionCache
from rag.llm.factory import make_chat_model
from rag.llm.local_weights import converted_gguf, engine_missing
from rag.llm.meter import CostMeter
from rag.llm.settings import ApiKeys, LLMSettings

pytestmark = pytest.mark.skipif(
    engine_missing("llama_cpp") is not None, reason="gguf models need llama-cpp-python"
)

Q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
YES_NO = 'root ::= "yes" | "no"'


@pytest.fixture(scope="module")
def smollm2_file():
    return converted_gguf("bf16")


@pytest.fixture()
def cache(tmp_path):
    c = CompletionCache(tmp_path / "llm-cache")
    yield c
    c.close()


def test_the_file_describes_itself(smollm2_file):
    info = gguf.read_gguf(smollm2_file)
    assert info.architecture == "llama" and info.context_length == 8192
    assert info.eos_token == "<|im_end|>"
    assert "<|im_start|>" in info.chat_template and "add_generation_prompt" in info.chat_template


def test_gguf_by_path_answers_as_the_packaged_model(smollm2_file, cache):
    meter = CostMeter()
    model = make_chat_model(f"gguf:{smollm2_file}", cache=cache, meter=meter, keys=ApiKeys())
    packaged = make_chat_model("local:smollm2-135m", cache=None, keys=ApiKeys())
    assert model.spec.api_model == f"sha256:{gguf.file_sha256(smollm2_file)}"
    assert model.name == f"gguf:{smollm2_file.name}" and model.spec.context_length == 8192
    a = model.complete(Q, max_tokens=16)
    b = packaged.complete(Q, max_tokens=16)
    assert a.text == b.text and a.text.strip()
    assert (a.input_tokens, a.output_tokens) == (b.input_tokens, b.output_tokens)
    assert "<|im_end|>" not in a.text  # generation stopped at the file's end token
    assert a.provider == "gguf" and a.cost_usd == 0.0 and a.price == "$0 (local)"
    again = model.complete(Q, max_tokens=16)
    assert again.cached and again.text == a.text
    row = meter.to_dict()["by_model"][0]
    assert (row["fresh_calls"], row["cached_calls"], row["price"]) == (1, 1, "$0 (local)")


def test_grammar_constrained_rows_work(smollm2_file, cache):
    model = make_chat_model(f"gguf:{smollm2_file}", cache=cache, keys=ApiKeys())
    q = [{"role": "user", "content": "Is Paris in France? Answer yes or no."}]
    c = model.complete(q, max_tokens=4, grammar=YES_NO, repeat_penalty=1.2)
    assert c.text in {"yes", "no"}


def test_cache_keys_on_the_file_content_not_its_path(smollm2_file, tmp_path, cache):
    model = make_chat_model(f"gguf:{smollm2_file}", cache=cache, keys=ApiKeys())
    first = model.complete(Q, max_tokens=8)
    moved = tmp_path / "renamed-model.gguf"
    try:
        os.link(smollm2_file, moved)
    except OSError:  # another file system: a copy has the same bytes
        shutil.copyfile(smollm2_file, moved)
    other = make_chat_model(f"gguf:{moved}", cache=cache, keys=ApiKeys())
    assert other.spec.api_model == model.spec.api_model
    hit = other.complete(Q, max_tokens=8)
    assert hit.cached and hit.text == first.text


def test_digest_is_computed_once_per_path_size_and_mtime(tmp_path, tmp_cache):
    f = tmp_path / "tiny.gguf"
    f.write_bytes(b"GGUF" + b"\0" * 60)
    real = gguf.file_sha256(f)
    store = tmp_cache / "llm" / "gguf" / "sha256.json"
    assert real in store.read_text()
    # a remembered digest is used as long as path, size and mtime are unchanged
    store.write_text(store.read_text().replace(real, "f" * 64))
    gguf._DIGESTS.clear()
    assert gguf.file_sha256(f) == "f" * 64
    f.write_bytes(b"GGUF" + b"\1" * 60)  # new content, new mtime: hashed again
    gguf._DIGESTS.clear()
    assert gguf.file_sha256(f) not in (real, "f" * 64)


def test_a_context_that_does_not_fit_is_refused_before_loading(smollm2_file):
    with pytest.raises(ConfigError, match=r"20000 tokens needed, but its context is 8192"):
        make_chat_model(f"gguf:{smollm2_file}", keys=ApiKeys(), min_context=20_000)
    small = LLMSettings(gguf_context=1024)
    with pytest.raises(ConfigError, match=r"context is 1024 tokens \(the file allows 8192"):
        make_chat_model(f"gguf:{smollm2_file}", small, keys=ApiKeys(), min_context=2000)


def test_missing_or_non_chat_files_are_named(tmp_path):
    with pytest.raises(ProviderUnavailable, match="no such file"):
        make_chat_model(f"gguf:{tmp_path / 'absent.gguf'}", keys=ApiKeys())
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ConfigError, match="broken.gguf"):
        make_chat_model(f"gguf:{bad}", keys=ApiKeys())


def test_the_service_refuses_gguf_paths_in_requests(smollm2_file, tmp_cache, tmp_path):
    from fastapi.testclient import TestClient

    from rag.serve.app import create_app
    from rag.serve.config import ServeSettings
    from tests.serve_support import tiny_lab

    lab = tiny_lab(tmp_path / "served")
    offline = ServeSettings(allow_network=False, rate_limit_per_minute=0)
    with TestClient(create_app(lab, serve=offline, api_key="")) as client:
        r = client.post("/ask", json={"question": "x", "answerer": f"gguf:{smollm2_file}"})
    assert r.status_code == 422 and "not named per request" in r.text
