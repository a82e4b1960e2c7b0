"""HyDE retrieval in pinned shards vs one instance: wall time, per-query latency, same runs?

04 generates one hypothetical passage per gold question with SmolLM2-135M, the costliest part of
its retrieval. :func:`rag.retrieval.retrievers.run_queries` deals a local-LLM retriever's
queries to :func:`rag.shard.sharded_map`'s pinned shards; this measures what that buys on the real
corpus index: the first ``n`` gold questions, each configuration with an empty completion cache of
its own (so every passage is generated), the model loaded before the clock starts. Not a test.

Command: ``python -m rag.bench.hyde`` → ``outputs/bench/hyde_shards.json``.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from rag import paths
from rag.bench import write_json


def bench_hyde_shards(
    n: int = 32,
    workers: tuple[int, ...] = (1, 2),
    out: str | None = "outputs/bench/hyde_shards.json",
) -> dict[str, Any]:
    """HyDE over the first ``n`` gold questions with each shard count in ``workers``."""
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.gold import gold_queries, load_gold
    from rag.index.build import index_corpus
    from rag.llm.factory import make_cache, make_chat_model
    from rag.llm.settings import LLMSettings
    from rag.retrieval.retrievers import Components, build_retriever, run_queries
    from rag.text.chunk import chunk_settings

    _, parsed = corpus_papers("data/manifest.jsonl", (), 0)
    chunking = chunk_settings({"strategy": "fixed", "max_tokens": 254, "overlap_tokens": 32})
    ix = index_corpus(parsed, chunking, embedder="minilm", show_progress=False)
    queries = dict(list(gold_queries(load_gold()).items())[:n])
    rows, ref = [], None
    load0 = os.getloadavg()[0]
    for w in workers:
        with tempfile.TemporaryDirectory() as tmp:
            settings = LLMSettings(cache_dir=tmp, local_workers=w)
            llm = make_chat_model("smollm2-135m", settings, cache=make_cache(settings))
            comps = Components(store=ix.store, embedder=ix.embedder, dense_index=ix.dense, llm=llm)
            hyde = build_retriever("hyde", comps)
            # one query per shard first, so every model instance is loaded before the clock
            run_queries(hyde, {f"w{i}": f"warm up {i}" for i in range(w)}, 5, show_progress=False)
            t0 = time.perf_counter()
            runs = run_queries(hyde, queries, 100, show_progress=False)
            wall = time.perf_counter() - t0
        lat = sorted(runs.latency_ms.values())
        top10 = {q: sorted(d, key=lambda c: (-d[c], c))[:10] for q, d in runs.items()}
        ref = ref or top10
        rows.append(
            {
                "shards": w,
                "wall_s": round(wall, 1),
                "per_query_p50_ms": round(lat[len(lat) // 2]),
                "same_top10_as_first": top10 == ref,
            }
        )
    for r in rows:
        r["speedup_vs_first"] = round(rows[0]["wall_s"] / r["wall_s"], 2)
    res = {
        "questions": len(queries),
        "gold": paths.display(paths.resolve("../shared/gold/dev.jsonl")),
        "machine_loadavg_1m_before": round(load0, 2),
        "cpus": len(os.sched_getaffinity(0)),
        "rows": rows,
    }
    if out:
        write_json(res, out)
    return res


if __name__ == "__main__":
    for row in bench_hyde_shards()["rows"]:
        print(row)
