"""ranx with and without numba's JIT: seconds per fresh process, and the same per-query values.

``python -m rag.bench.ranx_jit`` scores one seeded workload the size of notebook 04's SciFact
grading (300 queries, 100 ranked documents each, graded qrels, the lab's default metrics through
:func:`rag.evaluation.metrics.per_query_scores`) in a fresh child process per arm, since numba reads
``NUMBA_DISABLE_JIT`` once, at import:

- ``jit, new cache``: JIT on, an empty ``NUMBA_CACHE_DIR`` (a new venv: every kernel compiles);
- ``jit, warm cache``: JIT on, the same cache again (kernels load; numba's typed containers still
  compile, as they are never cached);
- ``interpreted``: ``NUMBA_DISABLE_JIT=1``, what :mod:`rag.evaluation` chooses by default.

Each arm reports its import and scoring seconds; the per-query values of every arm must equal the
interpreted ones exactly. Writes ``outputs/bench/ranx_jit.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from rag.bench import write_json

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from rag.evaluation.metrics import DEFAULT_METRICS, per_query_scores
t1 = time.perf_counter()
work = json.load(open(sys.argv[1]))
df, *_ = per_query_scores(work["qrels"], work["run"], DEFAULT_METRICS)
t2 = time.perf_counter()
import numba
print(json.dumps({"jit_disabled": bool(numba.config.DISABLE_JIT), "import_s": round(t1 - t0, 2),
    "score_s": round(t2 - t1, 2), "values": df.to_dict(orient="index")}))
"""


def workload(n_queries: int = 300, depth: int = 100, n_docs: int = 5_000, seed: int = 0) -> dict:
    """Seeded qrels (1-5 relevant documents, grades 1-2) and runs of ``depth`` scored documents."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for i in range(n_queries):
        rel = rng.choice(n_docs, int(rng.integers(1, 6)), replace=False)
        qrels[f"q{i}"] = {f"d{j}": int(rng.integers(1, 3)) for j in rel}
        cand = rng.choice(n_docs, depth, replace=False)
        if i % 2 == 0:  # half the queries retrieve their relevant documents somewhere
            cand[rng.choice(depth, len(rel), replace=False)] = rel
        run[f"q{i}"] = {f"d{j}": float(s) for j, s in zip(cand, rng.random(depth), strict=True)}
    return {"qrels": qrels, "run": run}


def _arm(work_path: Path, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(work_path)],
        env=os.environ | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bench(out: str | None = "outputs/bench/ranx_jit.json") -> dict[str, Any]:
    """Time the three arms and check their per-query values; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="ranx-jit-") as tmp:
        work_path = Path(tmp) / "work.json"
        work_path.write_text(json.dumps(workload()), encoding="utf-8")
        cache = {"NUMBA_DISABLE_JIT": "0", "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
        arms = {
            "jit, new cache": _arm(work_path, cache),
            "jit, warm cache": _arm(work_path, cache),
            "interpreted": _arm(work_path, {"NUMBA_DISABLE_JIT": "1"}),
        }
    ref = arms["interpreted"]["values"]
    res: dict[str, Any] = {
        "machine_loadavg_1m": round(os.getloadavg()[0], 2),
        "queries": len(ref),
        "arms": {
            name: {
                "jit_disabled": a["jit_disabled"],
                "import_s": a["import_s"],
                "score_s": a["score_s"],
                "values_identical_to_interpreted": a["values"] == ref,
            }
            for name, a in arms.items()
        },
    }
    if out:
        write_json(res, out)
    return res


if __name__ == "__main__":
    print(json.dumps(run_bench(), indent=1))
