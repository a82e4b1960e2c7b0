"""bf16 MiniLM passages (``minilm-bf16``): close to fp32, own fingerprint, queries stay fp32."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_onnx_passage import DOCS


@pytest.fixture(scope="module")
def pair():
    from rag.index.embed import load_embedder

    return load_embedder("minilm-bf16"), load_embedder("minilm-fp32")


def test_bf16_passages_are_close_to_fp32_but_computed_in_bf16(pair):
    bf16, fp32 = pair
    a, b = bf16.encode_passages(DOCS), fp32.encode_passages(DOCS)
    assert a.shape == b.shape == (len(DOCS), 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() >= 0.999 and cos.min() < 0.9999999  # close, yet really another precision
    q = bf16.encode_queries(["how do dual encoders retrieve passages for questions?"])
    np.testing.assert_allclose(
        q, fp32.encode_queries(["how do dual encoders retrieve passages for questions?"]), atol=1e-6
    )
    assert int(np.argmax(a[:3] @ q[0])) == 0
    assert bf16.encode_passages([]).shape == (0, 384)
    # autocast is scoped to the call: the fp32 embedder sharing torch afterwards is unchanged
    np.testing.assert_array_equal(fp32.encode_passages(DOCS), b)


def test_bf16_has_its_own_fingerprint_and_name(pair):
    bf16, fp32 = pair
    assert bf16.fingerprint.startswith(fp32.fingerprint) and bf16.fingerprint != fp32.fingerprint
    assert "bf16" in bf16.fingerprint and bf16.name.endswith("-bf16")


def test_default_minilm_is_bf16_only_where_the_cpu_has_bf16_instructions(monkeypatch, pair):
    from rag.index import embed

    assert embed.cpu_has_bf16("processor: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n")
    assert embed.cpu_has_bf16("flags : fpu amx_bf16 amx_tile\n")
    assert not embed.cpu_has_bf16("flags : fpu sse avx2 avx512f avx512_vnni\n")  # emulated: fp32
    assert not embed.cpu_has_bf16("")
    bf16, fp32 = pair
    for has, want in ((True, bf16), (False, fp32)):
        monkeypatch.setattr(embed, "cpu_has_bf16", lambda has=has: has)
        got = embed.load_embedder("minilm")
        assert got.fingerprint == want.fingerprint and got.passage_backend == want.passage_backend
        assert embed.minilm().fingerprint == want.fingerprint
