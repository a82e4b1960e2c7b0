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
