"""ONNX query encoding: same vectors as PyTorch, refused when it is not, cached and rebuilt."""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import ConfigError

QUERIES = [
    "What is the effect of hybrid retrieval on recall?",
    "does BM25 beat dense retrieval on scientific claims",
    "  leading and trailing spaces  ",
    "Ünïcödé résumé — α-β ≥ 0.5",
    "x",
    " ".join(["long query about chunking and retrieval evaluation"] * 60),  # > 256 tokens
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from rag.index.embed import SentenceTransformerEmbedder, minilm_path

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        fast = SentenceTransformerEmbedder(minilm_path(), query_backend="onnx")
        slow = SentenceTransformerEmbedder(minilm_path(), query_backend="torch")
        fast.encode_queries(["warm up: export under the temporary cache"])
        yield fast, slow


def test_onnx_queries_match_pytorch(pair):
    fast, slow = pair
    a, b = fast.encode_queries(QUERIES), slow.encode_queries(QUERIES)
    assert fast.query_backend_used == "onnxruntime" and slow.query_backend_used == "torch"
    assert a.shape == b.shape == (len(QUERIES), 384) and a.dtype == np.float32
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    # one query at a time gives the same vectors as a list (no padding effects)
    np.testing.assert_array_equal(fast.encode_queries(QUERIES[:1])[0], a[0])
    assert fast.encode_queries([]).shape == (0, 384)
    # passages never take the ONNX path: bit-identical to PyTorch
    np.testing.assert_array_equal(
        fast.encode_passages(QUERIES[:2]), slow.encode_passages(QUERIES[:2])
    )


def test_export_is_checked_against_pytorch(pair):
    from rag.index.onnx_query import OnnxQueryEncoder

    fast, _ = pair
    enc = fast._onnx
    assert 0 <= enc.max_abs_diff < 1e-5
    # the cached export is reused, and a zero tolerance shows the check is real
    with pytest.raises(ConfigError, match="differs from PyTorch"):
        OnnxQueryEncoder(fast.model, fast.fingerprint, atol=0.0, path=enc.path)


def test_corrupt_export_is_rebuilt(pair, tmp_path):
    from rag.index.onnx_query import OnnxQueryEncoder

    fast, slow = pair
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx file")
    enc = OnnxQueryEncoder(fast.model, fast.fingerprint, path=bad)
    assert bad.stat().st_size > 1_000_000
    np.testing.assert_allclose(enc.encode(QUERIES[:2]), slow.encode_queries(QUERIES[:2]), atol=1e-5)


def test_unsupported_pooling_falls_back_or_refuses(tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer

    from rag.index.embed import SentenceTransformerEmbedder, minilm_path

    t = Transformer(str(minilm_path()), max_seq_length=64)
    st = SentenceTransformer(modules=[t, Pooling(384, pooling_mode="cls")], device="cpu")
    st.save(str(tmp_path / "cls-model"))
    auto = SentenceTransformerEmbedder(tmp_path / "cls-model", version="test")
    v = auto.encode_queries(["dense retrieval"])
    assert auto.query_backend_used == "torch" and v.shape == (1, 384)
    strict = SentenceTransformerEmbedder(
        tmp_path / "cls-model", version="test", query_backend="onnx"
    )
    with pytest.raises(ConfigError, match="pooling 'cls'"):
        strict.encode_queries(["dense retrieval"])


def test_bad_backend_name_is_named():
    from rag.index.embed import SentenceTransformerEmbedder, minilm_path

    with pytest.raises(ConfigError, match="'tensorrt'"):
        SentenceTransformerEmbedder(minilm_path(), query_backend="tensorrt")


def test_a_verified_export_encodes_queries_without_pytorch(pair):
    """The fixture's export was checked with the model's own tokenizer.json, so a new embedder
    encodes queries through it without loading the PyTorch model, to the same vectors."""
    from rag.index.embed import SentenceTransformerEmbedder, minilm_path

    fast, _ = pair
    light = SentenceTransformerEmbedder(minilm_path(), query_backend="onnx")
    got = light.encode_queries(QUERIES)
    assert light.query_backend_used == "onnxruntime" and light._model is None
    np.testing.assert_array_equal(got, fast.encode_queries(QUERIES))
    assert light.dim == fast.dim == 384 and light.fingerprint == fast.fingerprint


def test_the_verified_record_is_used_only_for_what_it_checked(pair, tmp_path):
    from rag.index.onnx_query import OnnxQueryEncoder

    fast, _ = pair
    fp, tok = fast._fp32_fingerprint, fast._tokenizer_file
    assert OnnxQueryEncoder.load_verified(fp, tok, 256) is not None
    assert OnnxQueryEncoder.load_verified(fp, tok, 128) is None  # another sequence length
    assert OnnxQueryEncoder.load_verified(fp, tok, 256, atol=1e-9) is None  # a tighter check
    assert OnnxQueryEncoder.load_verified("other-model", tok, 256) is None  # no export
    changed = tmp_path / "tokenizer.json"
    text = tok.read_text(encoding="utf-8")
    changed.write_text(text.replace('"lowercase":true', '"lowercase":false'), encoding="utf-8")
    assert changed.read_bytes() != tok.read_bytes()
    assert OnnxQueryEncoder.load_verified(fp, changed, 256) is None  # another tokenizer


def test_a_query_only_process_never_imports_torch(pair):
    """What ``rag ask`` does on a warm cache: a new process encodes queries with the default
    embedder, whose export this process checked, and never imports PyTorch."""
    import os
    import subprocess
    import sys

    from rag.index.embed import load_embedder

    load_embedder("minilm").encode_queries(["check the default embedder's export"])
    code = (
        "import sys\n"
        "from rag.index.embed import load_embedder\n"
        "v = load_embedder('minilm').encode_queries(['subword n-grams'])\n"
        "print(v.shape, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(1,", "384)", "False", "False"]
