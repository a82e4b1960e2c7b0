"""int8 MiniLM passages (rag.index.onnx_passage): close to fp32, order kept, opt-in fingerprint."""

from __future__ import annotations

import numpy as np
import pytest

from rag.errors import ConfigError

DOCS = [
    "Dense passage retrieval encodes questions and passages with two BERT encoders.",
    "The recipe needs two eggs, flour and a pinch of salt.",
    "Stock markets fell sharply after the announcement.",
    "Ünïcödé résumé — α-β ≥ 0.5",
    " ".join(["long passage about chunking and retrieval evaluation"] * 60),  # > 256 tokens
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    from rag.index.embed import load_embedder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        int8, fp32 = load_embedder("minilm-int8"), load_embedder("minilm-fp32")
        int8.encode_passages(["warm up: export and quantise under the temporary cache"])
        yield int8, fp32


def test_int8_passages_are_close_to_fp32_and_keep_order(pair):
    int8, fp32 = pair
    a, b = int8.encode_passages(DOCS), fp32.encode_passages(DOCS)
    assert a.shape == b.shape == (len(DOCS), 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() >= 0.98 and cos.min() < 0.99999  # close, yet really quantised
    one_by_one = np.vstack([int8.encode_passages([d]) for d in DOCS])
    # one passage per run: a vector depends on its own text only, not on its neighbours
    np.testing.assert_array_equal(a, one_by_one)
    q = int8.encode_queries(["how do dual encoders retrieve passages for questions?"])
    np.testing.assert_allclose(
        q, fp32.encode_queries(["how do dual encoders retrieve passages for questions?"]), atol=1e-5
    )
    assert int(np.argmax(a[:3] @ q[0])) == 0
    assert int8.encode_passages([]).shape == (0, 384)


def test_int8_has_its_own_fingerprint(pair):
    int8, fp32 = pair
    assert int8.fingerprint.startswith(fp32.fingerprint) and int8.fingerprint != fp32.fingerprint
    assert "int8" in int8.fingerprint and int8.name.endswith("-int8")


def test_unknown_passage_backend_is_a_config_error():
    from rag.index.embed import SentenceTransformerEmbedder, minilm_path

    with pytest.raises(ConfigError, match="passage_backend"):
        SentenceTransformerEmbedder(minilm_path(), passage_backend="fp16")
