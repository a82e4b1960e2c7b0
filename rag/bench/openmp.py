"""OpenMP wait policy A/B: MiniLM passages/s and SmolLM2 (llama.cpp) tokens/s under each policy.

``python -m rag.bench.openmp [--reps 2]`` runs one child process per (rep, policy), interleaved,
each embedding 640 SciFact abstracts with MiniLM and generating a forced 150-token answer to a
~1,500-token prompt (``rag.bench.llm.bench_local``). The policy must be in the environment before
libgomp loads, hence a fresh process per arm. Writes ``outputs/bench/openmp.json``. Run it on an
idle machine, and again with other work running to see the other side of the trade.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from rag.bench import write_json

POLICIES = ("default", "PASSIVE")

_CHILD = """
import json, time
from rag.bench.llm import bench_local
from rag.evaluation.scifact import load_scifact
from rag.index.embed import minilm
corpus, _, _ = load_scifact()
texts = [d["title"] + " " + d["text"] for d in list(corpus.values())[:640]]
emb = minilm()
emb.encode_passages(texts[:32])
t = time.perf_counter()
emb.encode_passages(texts)
rate = len(texts) / (time.perf_counter() - t)
llm = bench_local("llama_cpp", threads=2)
print(json.dumps({"minilm_passages_per_s": round(rate, 1), "llama_cpp_gen_tok_per_s":
    llm["gen_tok_per_s"], "llama_cpp_prompt_tok_per_s": llm["prompt_tok_per_s"]}))
"""


def run_arm(policy: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
    )
    return {"policy": policy, **json.loads(out.stdout.strip().splitlines()[-1])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default="outputs/bench/openmp.json")
    args = ap.parse_args(argv)
    load = list(os.getloadavg())
    rows = [run_arm(p) for _ in range(args.reps) for p in POLICIES]
    res = {
        "rows": rows,
        "loadavg_start": load,
        "loadavg_end": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(res, args.out)
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
