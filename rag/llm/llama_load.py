"""Load a llama.cpp model without the CPU's AMX tiles where they are advertised but unusable.

ggml reaches Intel AMX only through its "extra buffer types": at load time it repacks weights of
the types AMX handles (Q4_0, Q4_1, Q8_0, some K-quants) into AMX-tiled buffers and multiplies them
with ``tileloadd``/``tdpbssd``. Some virtual machines report ``amx_tile`` in CPUID while the
hypervisor never enables the tile state, and the first such instruction kills the whole process
with SIGILL — no exception, no error row, the test run or notebook kernel just dies. On a CPU that
advertises AMX the model is therefore loaded with ``use_extra_bufts = False`` (llama.cpp's own
model parameter, which llama-cpp-python does not expose as an argument); the matrix products then
take ggml's ordinary AVX-512 / AVX2 kernels. On every other CPU nothing changes: x86 repacking
applies to Q4_0, IQ4_NL and K-quants only, never to the packaged Q4_1 file or its f16 / bf16
copies, so their answers are the same either way.

``RAG_LLAMA_EXTRA_BUFFERS=1`` keeps the extra buffers on an AMX machine whose hypervisor does
enable the tiles; ``=0`` turns them off anywhere.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Environment variable that forces llama.cpp's extra buffer types on (``1``) or off (``0``).
EXTRA_BUFFERS_ENV = "RAG_LLAMA_EXTRA_BUFFERS"

_PATCH_LOCK = threading.Lock()


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU feature flags the kernel reports (empty where ``/proc/cpuinfo`` is absent)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    return flags_of(text)


def flags_of(cpuinfo: str) -> frozenset[str]:
    """The flags of the first ``flags`` line of a ``/proc/cpuinfo`` text (empty when none)."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def use_extra_buffers(
    flags: frozenset[str] | None = None, env: dict[str, str] | None = None
) -> bool:
    """Whether llama.cpp may place weights in its extra (repacked, AMX) buffers on this CPU."""
    forced = (os.environ if env is None else env).get(EXTRA_BUFFERS_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return "amx_tile" not in (cpu_flags() if flags is None else flags)


@contextlib.contextmanager
def _model_params_without_extra_buffers() -> Iterator[None]:
    """While active, llama.cpp's default model parameters have ``use_extra_bufts`` cleared.

    ``Llama.__init__`` builds its parameters from ``llama_cpp.llama_cpp.llama_model_default_params``
    looked up at call time, so replacing that attribute is enough; a lock keeps two loads from
    interleaving their replace and restore.
    """
    import llama_cpp.llama_cpp as lib

    with _PATCH_LOCK:
        original = lib.llama_model_default_params

        def without_extra_buffers() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        lib.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            lib.llama_model_default_params = original


def load_llama(**kwargs: Any) -> Any:
    """``llama_cpp.Llama(**kwargs)``, with extra buffer types off unless
    :func:`use_extra_buffers` allows them."""
    from llama_cpp import Llama

    if use_extra_buffers():
        return Llama(**kwargs)
    with _model_params_without_extra_buffers():
        return Llama(**kwargs)


def serve_main(argv: list[str] | None = None) -> None:
    """Run llama-cpp-python's OpenAI-compatible server under the same loading rule.

    ``python -m rag.llm.llama_load --model FILE --host 127.0.0.1 --port N`` takes the arguments of
    ``python -m llama_cpp.server``.
    """
    import runpy
    import sys

    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    if use_extra_buffers():
        runpy.run_module("llama_cpp.server", run_name="__main__")
        return
    with _model_params_without_extra_buffers():
        runpy.run_module("llama_cpp.server", run_name="__main__")


if __name__ == "__main__":
    serve_main()
