"""Which offline reranker is best? Measured on BEIR SciFact test (300 queries, human qrels).

Every reranker re-scores the same first-stage pool (hybrid: MiniLM dense + BM25 fused by RRF) and
is graded with ranx nDCG@10; the pool-recall ceiling (share of relevant docs that entered the pool)
bounds what any reranker can reach. Each row is labelled with the retriever's ``name``, which
names the reranker that produced it. This is a measurement, not a test: ``make bench`` calls
:func:`rerank_scifact`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Rerankers compared by default: embedder names joined by "+" form a z-score ensemble.
DEFAULT_RERANKERS = ("minilm", "e5-small", "minilm+e5-small")


def _pool_recall(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    """Mean over queries of the share of relevant docs present in the pool."""
    shares = []
    for q, rel in qrels.items():
        relevant = {d for d, g in rel.items() if g > 0}
        if relevant:
            shares.append(len(relevant & set(run.get(q, {}))) / len(relevant))
    return sum(shares) / len(shares) if shares else float("nan")


def rerank_scifact(
    rerankers: tuple[str, ...] = DEFAULT_RERANKERS,
    *,
    pool: int = 50,
    k: int = 100,
    root: str | Path | None = None,
    extra: dict[str, Any] | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """nDCG@10 / MRR@10 / Recall@10 and latency of dense, BM25, hybrid and hybrid+rerankers.

    Args:
        rerankers: embedder specs for :class:`~rag.rerank.EmbedderReranker` ("e5-small",
            "minilm+e5-small", ...).
        pool: candidates from hybrid that each reranker re-scores.
        k: run depth recorded per query (metrics use the top 10).
        root: SciFact folder (default: the shared offline copy).
        extra: more rerankers by label, e.g. a :class:`~rag.rerank.CrossEncoderReranker`.

    Returns:
        ``{"systems": {name: {"ndcg@10", "mrr@10", "recall@10", "p50_ms", "p95_ms"}},
        "pool_recall@{pool}": float, "n_queries": int}``; also printed as a table.
    """
    from ranx import Qrels, Run, evaluate

    from rag.bm25 import BM25Index
    from rag.dense import DenseIndex
    from rag.embed import embed_texts, load_embedder
    from rag.rerank import EmbedderReranker
    from rag.retrieve import (
        ChunkStore,
        Components,
        RerankRetriever,
        RetrievalSettings,
        build_retriever,
        run_queries,
    )
    from rag.scifact import load_scifact

    corpus, queries, qrels = load_scifact(root)
    store = ChunkStore.from_docs(corpus)
    ids = sorted(store)
    texts = [store[i].text for i in ids]
    embedders: dict[str, Any] = {"minilm": load_embedder("minilm")}
    vecs = embed_texts(ids, texts, embedders["minilm"], show_progress=show_progress)
    comps = Components(
        store,
        embedder=embedders["minilm"],
        dense_index=DenseIndex(ids, vecs, embedder_fingerprint=embedders["minilm"].fingerprint),
        bm25_index=BM25Index(ids, texts),
    )
    settings = RetrievalSettings(rerank_pool=pool)
    first = build_retriever("hybrid", comps, settings)
    systems: dict[str, Any] = {n: build_retriever(n, comps, settings) for n in ("dense", "bm25")}
    systems["hybrid"] = first
    for spec in rerankers:
        parts = []
        for name in spec.split("+"):
            if name not in embedders:
                embedders[name] = load_embedder(name)
            parts.append(embedders[name])
        r = RerankRetriever(first, EmbedderReranker(parts), pool=pool)
        systems[r.name] = r
    for label, reranker in (extra or {}).items():
        systems[f"rerank[{label}]"] = RerankRetriever(first, reranker, pool=pool)

    rq = Qrels(qrels)
    out: dict[str, Any] = {"systems": {}, "n_queries": len(queries), "pool": pool}
    pool_run = run_queries(first, queries, pool, show_progress=False)
    out[f"pool_recall@{pool}"] = round(_pool_recall(qrels, pool_run), 4)
    for name, retriever in systems.items():
        t0 = time.perf_counter()
        runs = run_queries(retriever, queries, k, show_progress=show_progress)
        m = evaluate(rq, Run(dict(runs)), ["ndcg@10", "mrr@10", "recall@10"], make_comparable=True)
        lat = runs.latency_summary()
        out["systems"][name] = {
            **{key: round(float(v), 4) for key, v in m.items()},
            "p50_ms": round(lat["p50"], 1),
            "p95_ms": round(lat["p95"], 1),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        log.info("%s: %s", name, out["systems"][name])
    print_table(out)
    return out


def print_table(res: dict[str, Any]) -> None:
    """Print the comparison, best nDCG@10 first."""
    rows = sorted(res["systems"].items(), key=lambda kv: -kv[1]["ndcg@10"])
    print(f"SciFact test, n={res['n_queries']}, pool={res['pool']} from hybrid")
    print(f"{'system':<44}{'nDCG@10':>9}{'MRR@10':>8}{'R@10':>7}{'p50 ms':>8}{'p95 ms':>8}")
    for name, m in rows:
        print(
            f"{name:<44}{m['ndcg@10']:>9.4f}{m['mrr@10']:>8.4f}{m['recall@10']:>7.3f}"
            f"{m['p50_ms']:>8.1f}{m['p95_ms']:>8.1f}"
        )
    key = next(k for k in res if k.startswith("pool_recall@"))
    print(f"{key} (ceiling for every reranker): {res[key]:.4f}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    rerank_scifact()
