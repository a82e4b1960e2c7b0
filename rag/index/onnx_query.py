"""Fast single-query encoding: a sentence-transformers model exported to ONNX, run by onnxruntime.

A query is ~20 tokens. Through PyTorch, encoding one is dominated by per-op dispatch overhead, not
arithmetic; the same graph in onnxruntime takes about a third of the CPU time (notebook 03 records
the query latency of both paths). Passages stay on PyTorch
(the embedding cache and the SciFact reproduction are keyed to it); only queries take this path.

Safety, not trust: the export is checked against PyTorch on probe texts when it is built and the
session is refused (PyTorch is used instead) if any vector differs by more than ``atol``. Only the
plain pipeline Transformer -> mean Pooling -> (Normalize) is exported; anything else (CLS pooling,
Dense heads, ...) stays on PyTorch. The exported file is cached under ``cache_dir("onnx")`` keyed
by the embedder fingerprint and the torch / onnx versions, written atomically.

A process that only encodes queries need not load PyTorch at all (importing torch and
sentence-transformers costs seconds, more than a whole ``rag ask``): once an export has passed the
check with the model's own ``tokenizer.json`` read by the ``tokenizers`` library giving the same
token ids as sentence-transformers on the probes, a record of that check is written beside the
export, and :meth:`OnnxQueryEncoder.load_verified` later opens the session with that tokenizer
alone. The record names the tokenizer file's sha256, the sequence length and the tolerance, so a
changed tokenizer or setting falls back to the full check.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rag.atomic import atomic_path, write_atomic
from rag.errors import ConfigError
from rag.paths import cache_dir

log = logging.getLogger(__name__)

#: Texts the export is checked on (short, long enough to truncate, non-ASCII).
PROBES = (
    "what is dense retrieval?",
    "Does reciprocal rank fusion of BM25 and a bi-encoder beat either alone on SciFact?",
    "Ünïcödé — résumé naïve café ≥ 0.5 α-β",
    " ".join(["retrieval augmented generation with citations"] * 80),
)


def _versions() -> str:
    out = []
    for pkg in ("torch", "onnx", "onnxruntime", "transformers"):
        try:
            out.append(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{pkg}==none")
    return ",".join(out)


def supported(model: Any) -> tuple[bool, str]:
    """Whether a SentenceTransformer is the plain Transformer -> mean Pooling -> Normalize shape."""
    mods = list(model)
    names = [type(m).__name__ for m in mods]
    if not names or names[0] != "Transformer" or len(names) > 3:
        return False, f"modules {names} (need Transformer, Pooling[, Normalize])"
    if len(names) < 2 or names[1] != "Pooling":
        return False, f"modules {names} (no Pooling after the Transformer)"
    if len(names) == 3 and names[2] != "Normalize":
        return False, f"modules {names} (third module is not Normalize)"
    cfg = mods[1].get_config_dict()
    mode = cfg.get("pooling_mode")
    if mode is None and cfg.get("pooling_mode_mean_tokens"):
        mode = "mean"
    if mode != "mean":
        return False, f"pooling {mode!r} (only mean pooling is exported)"
    return True, "ok"


#: Version of the verification record written beside a checked export.
VERIFIED_VERSION = 1
Features = Callable[[str], dict[str, np.ndarray]]


def _features(model: Any, texts: list[str]) -> dict[str, Any]:
    """Tokenise exactly as sentence-transformers does (strip, truncate to max_seq_length)."""
    prep = getattr(model, "preprocess", None) or model.tokenize
    feats = prep(texts)
    return {
        k: v for k, v in feats.items() if k in ("input_ids", "attention_mask", "token_type_ids")
    }


def export_mean_pooled(model: Any, path: Path) -> None:
    """Export a Transformer -> mean Pooling -> L2-normalise sentence-transformer to ONNX.

    Inputs are the tokenizer's tensors (``input_ids``, ``attention_mask``[, ``token_type_ids``])
    with dynamic batch and token axes; the output ``embedding`` is (batch, dim) unit vectors. The
    file is written to a temporary name and renamed, so an interrupted export leaves nothing.
    """
    import torch

    try:
        import onnx  # noqa: F401  (the exporter writes through it)
    except ImportError as e:
        raise ConfigError("the ONNX backends need onnx: pip install onnx") from e
    auto = model[0].auto_model.eval()
    feats = _features(model, [PROBES[1]])
    names = list(feats)

    class _Pooled(torch.nn.Module):
        def __init__(self, m: Any) -> None:
            super().__init__()
            self.m = m

        def forward(self, *args: Any) -> Any:
            kw = dict(zip(names, args, strict=True))
            tok = self.m(**kw).last_hidden_state
            mask = kw["attention_mask"].unsqueeze(-1).to(tok.dtype)
            v = (tok * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(v, p=2.0, dim=-1)

    with torch.no_grad(), warnings.catch_warnings(), atomic_path(path) as tmp:
        # the tracer warns about Python branches on shapes (padding / causal checks) that
        # take the same side for every input here; callers verify the result anyway
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Pooled(auto),
            tuple(feats[n] for n in names),
            str(tmp),
            input_names=names,
            output_names=["embedding"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names},
            opset_version=17,
            dynamo=False,
        )
    log.info("exported %s to ONNX (%s)", type(auto).__name__, path.name)


class OnnxQueryEncoder:
    """Mean-pooled, L2-normalised sentence vectors from an ONNX export of a sentence-transformer.

    Args:
        model: a loaded ``SentenceTransformer`` of the supported shape.
        fingerprint: the embedder fingerprint (keys the cached export).
        threads: onnxruntime intra-op threads (1: a query is too small to split; see
            :meth:`rag.index.embed.SentenceTransformerEmbedder.encode_queries`).
        atol: largest allowed absolute difference from PyTorch on the probe texts.
        path: where the export lives (default: under ``cache_dir("onnx")``).

    Raises:
        ConfigError: onnxruntime/onnx missing, the model shape unsupported, or the export
            disagrees with PyTorch beyond ``atol`` (the message gives the difference).
    """

    def __init__(
        self,
        model: Any,
        fingerprint: str,
        *,
        threads: int = 1,
        atol: float = 1e-5,
        path: str | Path | None = None,
        tokenizer_file: str | Path | None = None,
    ) -> None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as e:
            raise ConfigError(
                "query_backend 'onnx' needs onnxruntime: pip install onnxruntime"
            ) from e
        ok, why = supported(model)
        if not ok:
            raise ConfigError(f"cannot export this sentence-transformer to ONNX: {why}")
        self.model = model
        self.path = Path(path) if path else export_path(fingerprint)
        if not self.path.exists():
            self._export(self.path)
        self._features: Features = lambda t: _features(model, [t])
        try:
            self.session = _session(self.path, threads)
        except Exception as e:  # a truncated or foreign file: rebuild once
            log.warning("ONNX export %s unreadable (%s); rebuilding", self.path.name, e)
            self._export(self.path)
            self.session = _session(self.path, threads)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.max_abs_diff = self._check(atol)
        if tokenizer_file is not None:
            self._verify_tokenizer(Path(tokenizer_file), atol)

    @classmethod
    def load_verified(
        cls,
        fingerprint: str,
        tokenizer_file: str | Path,
        max_seq_length: int,
        *,
        threads: int = 1,
        atol: float = 1e-5,
    ) -> OnnxQueryEncoder | None:
        """The encoder of an export whose check passed with ``tokenizer_file`` (module
        docstring), opened without PyTorch; None when there is no such record, or it was made
        for another tokenizer, sequence length or a looser tolerance."""
        path = export_path(fingerprint)
        record = _read_record(path)
        tok_file = Path(tokenizer_file)
        if (
            record is None
            or not path.exists()
            or not tok_file.is_file()
            or record.get("tokenizer_sha256") != _sha256(tok_file)
            or record.get("max_seq_length") != max_seq_length
            or not record.get("atol", 1.0) <= atol
        ):
            return None
        try:
            import tokenizers  # noqa: F401  (transformers' own dependency)

            session = _session(path, threads)
        except Exception as e:  # no onnxruntime/tokenizers, or an unreadable file: full path
            log.info("verified ONNX export not used (%s); loading PyTorch", e)
            return None
        self = cls.__new__(cls)
        self.model, self.path, self.session = None, path, session
        self.inputs = [i.name for i in session.get_inputs()]
        self._features = _standalone_features(tok_file, max_seq_length)
        self.max_abs_diff = float(record["max_abs_diff"])
        return self

    def _export(self, path: Path) -> None:
        export_mean_pooled(self.model, path)

    def _check(self, atol: float) -> float:
        ref = np.asarray(
            self.model.encode(
                list(PROBES),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )
        got = self.encode(list(PROBES))
        diff = float(np.abs(ref - got).max())
        if not diff <= atol:
            raise ConfigError(
                f"ONNX export of the query encoder differs from PyTorch by {diff:.2e} "
                f"(> {atol:.0e}) on the probe texts; using PyTorch is safer"
            )
        return diff

    def _verify_tokenizer(self, tokenizer_file: Path, atol: float) -> None:
        """Record that ``tokenizer_file`` alone tokenises the probes as sentence-transformers
        does, so later processes may skip PyTorch (:meth:`load_verified`); log why not else."""
        max_len = int(self.model.max_seq_length)
        try:
            standalone = _standalone_features(tokenizer_file, max_len)
        except Exception as e:  # no tokenizers library or an unreadable file: nothing recorded
            log.info("query tokenizer not verified: %s", e)
            return
        for text in PROBES:
            ref, got = self._features(text), standalone(text)
            if any(not np.array_equal(np.asarray(ref[k]), got[k]) for k in self.inputs):
                log.info("%s tokenises %r differently: PyTorch stays loaded", tokenizer_file, text)
                return
        record = {
            "version": VERIFIED_VERSION, "max_abs_diff": self.max_abs_diff, "atol": atol,
            "max_seq_length": max_len, "tokenizer_sha256": _sha256(tokenizer_file),
        }  # fmt: skip
        write_atomic(_record_path(self.path), json.dumps(record, indent=1))

    def encode(self, texts: list[str]) -> np.ndarray:
        """(n, dim) float32 unit vectors, one text at a time: a batched run gives a text other
        bytes than it gets alone (the mean pooling's ``ReduceSum`` sums a batch of one in another
        order), and saves little CPU, since one query's matrix products already keep a core busy
        (``outputs/bench/query_batching.json``)."""
        rows = []
        for t in texts:
            feats = self._features(t)
            feed = {n: np.asarray(feats[n], dtype=np.int64) for n in self.inputs}
            rows.append(self.session.run(None, feed)[0][0])
        return np.ascontiguousarray(np.vstack(rows), dtype=np.float32)


def export_path(fingerprint: str) -> Path:
    """Where the export of the embedder with ``fingerprint`` is cached (keyed by versions too)."""
    key = hashlib.sha256(f"{fingerprint}|{_versions()}".encode()).hexdigest()[:20]
    return cache_dir("onnx") / f"{key}.onnx"


def _record_path(export: Path) -> Path:
    return export.with_suffix(".verified.json")


def _read_record(export: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(_record_path(export).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if record.get("version") == VERIFIED_VERSION else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _session(path: Path, threads: int) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise ConfigError("query_backend 'onnx' needs onnxruntime: pip install onnxruntime") from e
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.use_deterministic_compute = True
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _standalone_features(tokenizer_file: Path, max_seq_length: int) -> Features:
    """Token ids, attention mask and type ids of one text from the model's ``tokenizer.json``
    with the ``tokenizers`` library, set up as sentence-transformers calls it: the text
    stripped, truncated to ``max_seq_length`` tokens, no padding (the file's own padding and
    truncation settings are replaced)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_file))
    tok.no_padding()
    tok.enable_truncation(max_length=max_seq_length)

    def features(text: str) -> dict[str, np.ndarray]:
        enc = tok.encode(text.strip())
        return {
            "input_ids": np.asarray([enc.ids], dtype=np.int64),
            "attention_mask": np.asarray([enc.attention_mask], dtype=np.int64),
            "token_type_ids": np.asarray([enc.type_ids], dtype=np.int64),
        }

    return features
