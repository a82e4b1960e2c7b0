"""int8 passage encoding: a sentence-transformer exported to ONNX and dynamically quantised.

Passage encoding is arithmetic-bound (~250 tokens a passage), and fp32 PyTorch already runs near
this CPU's fp32 peak. Dynamic quantisation (onnxruntime ``quantize_dynamic``: weights int8 per
output channel, stored once; activations quantised to uint8 per tensor at run time; Jacob et al.,
"Quantization and Training of Neural Networks for Efficient Integer-Arithmetic-Only Inference",
2018) turns the MatMuls into integer ones that use the CPU's VNNI instructions. Vectors change
slightly, so this is opt-in (embedder ``minilm-int8``) and its retrieval quality is measured
against fp32 on SciFact before anyone makes it a default.

Each passage runs alone (no batching): dynamic quantisation scales activations per tensor, so in a
padded batch a passage's vector would depend on its neighbours, and the embedding cache (keyed by
text) would then hold vectors that depend on the order passages were first seen.

The fp32 export is the query encoder's (:func:`rag.index.onnx_query.export_mean_pooled`, same
cache key), the int8 file sits beside it; both are written atomically. At load the int8 vectors
are compared with PyTorch's on probe texts and refused below ``min_cos``.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from rag.atomic import atomic_path
from rag.errors import ConfigError
from rag.index.onnx_query import PROBES, _features, _versions, export_mean_pooled, supported
from rag.paths import cache_dir

log = logging.getLogger(__name__)

#: Bumped when the quantisation recipe changes (it is part of the embedder fingerprint).
RECIPE = "ort-dynamic-qint8-perchannel-v1"


class OnnxInt8PassageEncoder:
    """Unit passage vectors from an int8 (dynamically quantised) ONNX export.

    Args:
        model: a loaded ``SentenceTransformer`` (Transformer -> mean Pooling[ -> Normalize]).
        fingerprint: the fp32 embedder's fingerprint (keys the cached exports).
        threads: onnxruntime intra-op threads (None: torch's current thread count).
        min_cos: smallest allowed cosine to PyTorch's fp32 vector on the probe texts.

    Raises:
        ConfigError: onnxruntime/onnx missing, unsupported model shape, or the quantised vectors
            too far from fp32 (the message gives the cosine).
    """

    def __init__(
        self,
        model: Any,
        fingerprint: str,
        *,
        threads: int | None = None,
        min_cos: float = 0.98,
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise ConfigError("embedder 'minilm-int8' needs onnxruntime") from e
        ok, why = supported(model)
        if not ok:
            raise ConfigError(f"cannot export this sentence-transformer to ONNX: {why}")
        self.model = model
        get_dim = getattr(model, "get_embedding_dimension", None)  # renamed in ST 5
        self.dim = int((get_dim or model.get_sentence_embedding_dimension)())
        key = hashlib.sha256(f"{fingerprint}|{_versions()}".encode()).hexdigest()[:20]
        fp32 = cache_dir("onnx") / f"{key}.onnx"
        self.path = cache_dir("onnx") / f"{key}-{RECIPE}.onnx"
        if not self.path.exists():
            if not fp32.exists():
                export_mean_pooled(model, fp32)
            self._quantise(fp32, self.path)
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.path), so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.min_cos = self._check(min_cos)

    @staticmethod
    def _quantise(src: Path, dest: Path) -> None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with atomic_path(dest) as tmp:
            quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        log.info("quantised %s to int8 (%s)", src.name, dest.name)

    def _check(self, min_cos: float) -> float:
        ref = np.asarray(
            self.model.encode(list(PROBES), normalize_embeddings=True, show_progress_bar=False),
            dtype=np.float32,
        )
        cos = float((ref * self.encode(list(PROBES))).sum(1).min())
        if not cos >= min_cos:
            raise ConfigError(
                f"int8 passage vectors reach only cosine {cos:.4f} to fp32 on the probe texts "
                f"(< {min_cos}); use embedder 'minilm'"
            )
        return cos

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, dim) float32 unit vectors, one text per run (see the module docstring)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            feats = _features(self.model, [t])
            feed = {n: np.asarray(feats[n].numpy(), dtype=np.int64) for n in self.inputs}
            out[i] = self.session.run(None, feed)[0][0]
        return out
