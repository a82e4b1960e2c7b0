"""Which offline reranker is best? Measured on BEIR SciFact and on the corpus gold, not assumed.

Every reranker re-scores the same first-stage pool (hybrid: MiniLM dense + BM25 fused by RRF, top
``pool``) and is graded like notebook 04: ranx metrics with 95 % bootstrap CIs, and a paired
randomisation test (Holm-corrected over all pairs) of each system against hybrid. The pool-recall
ceiling (share of questions with a relevant document in the pool) bounds every reranker. Rows are
labelled with the reranker's ``name``. A measurement, not a test:
``python -m rag.bench.rerank`` (``make bench-rerank``) writes ``outputs/bench/rerank.json``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

#: Rerankers compared by default: embedder names joined by "+" form a z-score ensemble;
#: "ict-minilm" is the cross-encoder trained by ``rag train-ict`` (skipped until trained).
DEFAULT_RERANKERS = ("minilm", "e5-small", "minilm+e5-small", "ict-minilm")


def _pool_recall(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> float:
    """Share of questions with at least one relevant document in the pool."""
    hits = [
        bool({d for d, g in rel.items() if g > 0} & set(run.get(q, {})))
        for q, rel in qrels.items()
        if any(g > 0 for g in rel.values())
    ]
    return sum(hits) / len(hits) if hits else float("nan")


def _scifact(max_queries: int = 0) -> tuple[Any, dict[str, str], dict[str, dict[str, int]]]:
    from rag.evaluation.scifact import load_scifact, subset
    from rag.index.build import index_documents

    corpus, queries, qrels = load_scifact(None)
    if max_queries:
        corpus, queries, qrels = subset(corpus, queries, qrels, max_queries=max_queries)
    return index_documents(corpus, "scifact", embedder="minilm"), queries, qrels


def _corpus_gold(gold_path: str = "../shared/gold/dev.jsonl") -> tuple[Any, dict, dict]:
    from rag import paths
    from rag.corpus.papers import load_corpus, select_papers
    from rag.evaluation.evidence import contains
    from rag.evaluation.gold import chunk_qrels, gold_queries, load_gold
    from rag.index.build import index_corpus
    from rag.text.chunk import ChunkSettings

    papers = select_papers("data/manifest.jsonl", [], 0)
    corpus = load_corpus(papers)
    parsed = [corpus.parsed[p.arxiv_id] for p in papers if p.arxiv_id in corpus.parsed]
    fixed = ChunkSettings(strategy="fixed", max_tokens=254, overlap_tokens=32)
    ix = index_corpus(parsed, fixed, embedder="minilm")
    selected = {p.arxiv_id for p in papers}
    gold = [
        g
        for g in load_gold(paths.resolve(gold_path))
        if not g.answerable or set(g.relevant_papers) <= selected
    ]
    qrels, _ = chunk_qrels(gold, ix.chunks, contains, 90.0)
    queries = {q: t for q, t in gold_queries(gold).items() if q in qrels}
    return ix, queries, qrels


def compare_rerankers(
    rerankers: Sequence[str] = DEFAULT_RERANKERS,
    *,
    datasets: Sequence[str] = ("scifact", "corpus_gold"),
    pool: int = 30,
    k: int = 100,
    seed: int = 0,
    scifact_max_queries: int = 0,
) -> dict[str, Any]:
    """Grade dense, BM25, hybrid and hybrid + each reranker on each dataset.

    Returns:
        ``{dataset: {"n", "pool_recall@{pool}", "systems": {name: {"label", "ndcg@10": {mean,
        ci_low, ci_high}, "mrr@10", "recall@10", "p50_ms", "vs_hybrid": {diff, ci_low, ci_high,
        p_adjusted, significant}}}, "not_run": {"rerank:<name>": reason}}}``.
    """
    from rag.evaluation.compare import grade, run_all
    from rag.retrieval.registry import load_rerankers
    from rag.retrieval.retrievers import (
        Components,
        RerankRetriever,
        RetrievalSettings,
        build_retriever,
    )

    loaded, not_run = load_rerankers(rerankers)
    for name, why in not_run.items():
        log.warning("%s not run: %s", name, why)
    out: dict[str, Any] = {"pool": pool, "not_run": not_run}
    for ds in datasets:
        ix, queries, qrels = _scifact(scifact_max_queries) if ds == "scifact" else _corpus_gold()
        comps = Components(ix.store, embedder=ix.embedder, dense_index=ix.dense, bm25_index=ix.bm25)
        settings = RetrievalSettings(k=k, rerank_pool=pool)
        hybrid = build_retriever("hybrid", comps, settings)
        systems: dict[str, Any] = {
            "dense": build_retriever("dense", comps, settings),
            "bm25": build_retriever("bm25", comps, settings),
            "hybrid": hybrid,
        }
        for spec, rr in loaded.items():
            systems[f"rerank:{spec}"] = RerankRetriever(hybrid, rr, pool=pool)
        t0 = time.perf_counter()
        runs = run_all(systems, queries, k)
        cmp = grade(ds, runs, qrels, seed=seed, labels={n: r.name for n, r in systems.items()})
        pool_run = {q: dict(list(d.items())[:pool]) for q, d in runs["hybrid"].items()}
        res: dict[str, Any] = {
            "n": len(queries),
            f"pool_recall@{pool}": round(_pool_recall(qrels, pool_run), 4),
            "seconds": round(time.perf_counter() - t0, 1),
            "systems": {},
        }
        pw = cmp.pairwise
        for name, ev in cmp.evals.items():
            row: dict[str, Any] = {"label": systems[name].name}
            for m in ("ndcg@10", "mrr@10", "recall@10"):
                ci = ev.aggregate[m]
                row[m] = {"mean": ci.estimate, "ci_low": ci.low, "ci_high": ci.high}
            row["p50_ms"] = round(runs[name].latency_summary()["p50"], 1)
            if name != "hybrid":
                r = pw[
                    ((pw.a == name) & (pw.b == "hybrid")) | ((pw.a == "hybrid") & (pw.b == name))
                ]
                if len(r):
                    r = r.iloc[0]
                    sign = 1.0 if r.a == name else -1.0
                    lo, hi = sorted((sign * r.ci_low, sign * r.ci_high))
                    row["vs_hybrid"] = {
                        "diff": sign * r["diff"],
                        "ci_low": lo,
                        "ci_high": hi,
                        "p_adjusted": r.p_adjusted,
                        "significant": bool(r.significant),
                    }
            res["systems"][name] = row
        out[ds] = res
        print_table(ds, res)
    return out


def print_table(dataset: str, res: dict[str, Any]) -> None:
    """Print one dataset's comparison, best nDCG@10 first."""
    rows = sorted(res["systems"].items(), key=lambda kv: -kv[1]["ndcg@10"]["mean"])
    key = next(k for k in res if k.startswith("pool_recall@"))
    print(f"\n{dataset}: n={res['n']} questions; {key} of hybrid = {res[key]:.3f} (the ceiling)")
    print(
        f"{'system':<22}{'nDCG@10':>8}  {'95% CI':<15}{'vs hybrid':>10}  "
        f"{'p (Holm)':>8}{'p50 ms':>9}"
    )
    for name, m in rows:
        n = m["ndcg@10"]
        vs = m.get("vs_hybrid")
        diff = f"{vs['diff']:+.4f}" if vs else ""
        p = f"{vs['p_adjusted']:.3g}" if vs else ""
        print(
            f"{name:<22}{n['mean']:>8.4f}  [{n['ci_low']:.3f}, {n['ci_high']:.3f}]"
            f"{diff:>10}  {p:>8}{m['p50_ms']:>9.1f}"
        )


def main() -> dict[str, Any]:
    from rag import paths

    res = compare_rerankers()
    out = paths.resolve("outputs/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "rerank.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    print("\nwritten: outputs/bench/rerank.json")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
