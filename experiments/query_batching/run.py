"""Would batching the service's query encodings make ``/search`` cheaper, and exactly so?

A ``/search`` spends most of its CPU encoding its query with MiniLM on onnxruntime (one thread).
Dynamic micro-batching (a batcher in front of the encoder, since retired) pays only if one call
over several queries costs less CPU than the queries one by one, and it is allowed only if every
query's vector from a batched call is the bytes it gets alone (the service's results must not
depend on what else was asked at the same moment). This measures both on the gold questions, and
where a ``/search`` spends its CPU:

- **cost**: CPU time per query of one ``session.run`` over ``B`` queries (the calling thread's,
  median of 15 calls), for random batches padded to their longest query (median of 8 batches) and
  for batches of one length (no padding);
- **exactness**: for padded batches of 8 and for groups of equal length, how many rows are the
  bytes of the same query alone, and the largest difference;
- **where**: the first node of the graph whose output for a query differs between a batch of one
  and a batch of two of the same length (every node's output exposed, optimisations off);
- **stages** (``--profile``): CPU per query of encoding, the dense search, BM25 and the whole
  hybrid ``Lab.search`` over the profile's served index.

``python -m experiments.query_batching.run`` writes ``outputs/bench/query_batching.json``. CPU
times grow when other jobs share the cores; the record names the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rag import paths
from rag.bench import write_json

GOLD = "../shared/gold/dev.jsonl"
BATCHES = (1, 2, 4, 8, 16)


def cpu_ms(fn: Callable[[], Any], reps: int) -> float:
    """Median CPU milliseconds of the calling thread over ``reps`` calls of ``fn`` (after one
    warm call); the median, since other jobs on the cores inflate some calls several times."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return float(np.median(times)) * 1000


def by_length(lengths: Sequence[int]) -> dict[int, list[int]]:
    """Indices grouped by token count, groups of two or more only (a batch needing no padding)."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(n, []).append(i)
    return {n: idx for n, idx in sorted(groups.items()) if len(idx) > 1}


def same_rows(batch: np.ndarray, alone: Sequence[np.ndarray]) -> tuple[int, float]:
    """How many rows of ``batch`` are byte for byte ``alone[i]``, and the largest |difference|."""
    same = sum(batch[i].tobytes() == a.tobytes() for i, a in enumerate(alone))
    diff = max(float(np.abs(batch[i].astype(np.float64) - a).max()) for i, a in enumerate(alone))
    return same, diff


class Encoder:
    """The service's MiniLM query export: features from the model's tokenizer (padded to the
    longest text of a call, as sentence-transformers pads), one ``session.run`` per call."""

    def __init__(self) -> None:
        from rag.index.embed import load_embedder
        from rag.index.onnx_query import OnnxQueryEncoder

        emb = load_embedder("minilm")
        self.model = emb.model
        self.onnx = OnnxQueryEncoder(self.model, emb.fingerprint)
        self.session, self.inputs = self.onnx.session, self.onnx.inputs

    def feed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        prep = getattr(self.model, "preprocess", None) or self.model.tokenize
        feats = prep(list(texts))
        return {n: np.asarray(feats[n], dtype=np.int64) for n in self.inputs}

    def run(self, texts: Sequence[str]) -> np.ndarray:
        return self.session.run(None, self.feed(texts))[0]

    def length(self, text: str) -> int:
        return int(self.feed([text])["input_ids"].shape[1])


def cost(enc: Encoder, texts: list[str], reps: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    lengths = [enc.length(t) for t in texts]
    median = sorted(lengths)[len(lengths) // 2]
    one_length = texts[lengths.index(median)]
    padded, equal = {}, {}
    for b in BATCHES:
        runs = [list(rng.choice(len(texts), b, replace=False)) for _ in range(8)]
        ms = [cpu_ms(lambda r=r: enc.run([texts[i] for i in r]), reps) for r in runs]
        padded[str(b)] = round(float(np.median(ms)) / b, 3)
        equal[str(b)] = round(cpu_ms(lambda b=b: enc.run([one_length] * b), reps) / b, 3)
    return {
        "cpu_ms_per_query_padded_random": padded,
        "cpu_ms_per_query_one_length": equal,
        "one_length_tokens": median,
        "tokens": {"min": min(lengths), "median": median, "max": max(lengths)},
    }


def exactness(enc: Encoder, texts: list[str]) -> dict[str, Any]:
    alone = [enc.run([t])[0] for t in texts]
    lengths = [enc.length(t) for t in texts]
    same = n = 0
    diff = 0.0
    for s in range(0, len(texts), 8):
        got = same_rows(enc.run(texts[s : s + 8]), alone[s : s + 8])
        same, n, diff = same + got[0], n + min(8, len(texts) - s), max(diff, got[1])
    padded = {"rows": n, "byte_identical": same, "max_abs_diff": diff}
    same = n = 0
    diff = 0.0
    for idx in by_length(lengths).values():
        got = same_rows(enc.run([texts[i] for i in idx]), [alone[i] for i in idx])
        same, n, diff = same + got[0], n + len(idx), max(diff, got[1])
    equal = {"rows": n, "byte_identical": same, "max_abs_diff": diff}
    return {"padded_batches_of_8": padded, "equal_length_groups": equal}


def first_difference(enc: Encoder, texts: list[str]) -> dict[str, Any]:
    """The first node (graph order) whose output for a text differs between a batch of one and a
    batch of two texts of its length, every node's output exposed, optimisations off."""
    import onnx
    import onnxruntime as ort

    lengths = [enc.length(t) for t in texts]
    a, b = next(iter(by_length(lengths).values()))[:2]
    model = onnx.load(str(enc.onnx.path))
    have = {o.name for o in model.graph.output}
    nodes = [(n.op_type, o) for n in model.graph.node for o in n.output if o and o not in have]
    model.graph.output.extend(onnx.ValueInfoProto(name=o) for _, o in nodes)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    one = dict(zip(names, sess.run(None, enc.feed([texts[a]])), strict=True))
    two = dict(zip(names, sess.run(None, enc.feed([texts[a], texts[b]])), strict=True))
    for op, out in nodes:
        x, y = one[out], two[out]
        if x.ndim and x.shape[0] == 1 and y.shape[0] == 2 and x[0].tobytes() != y[0].tobytes():
            return {"op": op, "output": out, "nodes_before_identical": nodes.index((op, out))}
    return {"op": None, "nodes_compared": len(nodes)}


def stages(profile: str, texts: list[str]) -> dict[str, float]:
    """CPU ms per query (median) of each stage of a hybrid ``/search`` without HTTP."""
    from rag.serve.config import ServeSettings, profile_settings
    from rag.serve.engine import load_lab

    lab = load_lab(profile_settings(profile), ServeSettings())
    r, snap = lab.retriever("hybrid", 5)
    t: dict[str, list[float]] = {k: [] for k in ("encode", "dense", "bm25", "search")}
    for q in texts:
        v = lab.index.embedder.encode_queries([q])
        t["encode"].append(cpu_ms(lambda q=q: lab.index.embedder.encode_queries([q]), 1))
        t["dense"].append(cpu_ms(lambda v=v: snap.dense.search(v, r.pool), 1))
        t["bm25"].append(cpu_ms(lambda q=q: r.bm25.retrieve(q, r.pool), 1))
        t["search"].append(cpu_ms(lambda q=q: lab.search(q, 5, "hybrid"), 1))
    return {f"{k}_cpu_ms_median": round(float(np.median(v)), 3) for k, v in t.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m experiments.query_batching.run", description=__doc__
    )
    p.add_argument("--reps", type=int, default=15, help="calls timed per batch (default 15)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", default="default", help="served index for the stages ('': skip)")
    p.add_argument("--out", default="outputs/bench/query_batching.json")
    a = p.parse_args(argv)
    from rag.evaluation.gold import load_gold

    texts = [g.question for g in load_gold(paths.resolve(GOLD))]
    t0 = time.perf_counter()
    enc = Encoder()
    record: dict[str, Any] = {
        "questions": len(texts),
        "cost": cost(enc, texts, a.reps, a.seed),
        "exactness": exactness(enc, texts),
        "first_difference": first_difference(enc, texts),
    }
    if a.profile:
        record["stages"] = {"profile": a.profile, **stages(a.profile, texts[:60])}
    record["seconds"] = round(time.perf_counter() - t0, 1)
    record["machine"] = {"cpus": os.cpu_count(), "load_avg_1_5_15": list(os.getloadavg())}
    print(write_json(record, a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
