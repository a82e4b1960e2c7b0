"""Stronger embedders side by side, on the same data as notebook 04.

For each embedder (MiniLM, the default, first): SciFact nDCG@10 of dense retrieval on the 300
BEIR test queries beside the model's published MTEB number; chunk nDCG@10 of dense and hybrid
(RRF over dense and BM25) on the corpus gold questions, each with a 95 % bootstrap CI and a paired
randomisation test against MiniLM on the same questions (Holm over every comparison) and of its
hybrid against its own dense run (what BM25 fusion still adds); and what it costs: passages per
second on a fixed sample (cache off), dense index build seconds and size, and query p50 (query
encoding plus search) over the gold questions.

Every passage vector goes through the content-addressed embedding cache, so a killed run resumes
where it stopped and a re-run only grades; results are written after each embedder.

    python -m rag.bench.embedders                      # every embedder whose model is here
    python -m rag.bench.embedders --embedders minilm,mpnet-base-v2
    python -m rag.bench.embedders --embedders nomic-embed-v1.5 --parts corpus   # one part
    python -m rag.bench.embedders --tests-only   # redo the paired tests from the stored values

A 137M-parameter embedder costs ~0.5 s of 2-core CPU per 210-token chunk, so each part of one
such model is an hour or more here: ``--parts`` runs one and keeps the other's earlier record.

A model that is not fetched is recorded as ``not run`` with the command that fetches it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.errors import ProviderUnavailable

logger = logging.getLogger(__name__)

#: The embedders compared by default, MiniLM (the baseline of every paired test) first.
DEFAULT_EMBEDDERS = (
    "minilm",
    "e5-small",
    "mpnet-base-v2",
    "nomic-embed-v1.5",
    "embeddinggemma-300m",
)

DEFAULT_OUT = "outputs/bench/embedders.json"
SAMPLE_PASSAGES = 64
SEED = 0
METHOD = (
    "SciFact: dense and hybrid nDCG@10 on the 300 BEIR test queries over 5,183 abstracts "
    "(title + text). Corpus: chunk nDCG@10 on the gold questions whose evidence a chunk "
    "holds (fuzzy 90), fixed 254-token chunks of the 100 papers, as notebook 04. CIs: "
    "2,000 bootstrap resamples of the questions; paired randomisation tests of each embedder "
    "against MiniLM (Holm over all of them) and of each embedder's hybrid against its own dense "
    "run (Holm over the embedders). Costs on 2 cores: passages/s over a fixed sample "
    f"of {SAMPLE_PASSAGES} chunks with the cache off; query p50 = dense retrieval "
    "including query encoding."
)


def _published(name: str) -> dict[str, Any] | None:
    from rag.evaluation.scifact import PUBLISHED_MTEB

    return PUBLISHED_MTEB.get(name.partition("=")[0])


def _ci(ci: Any) -> dict[str, float]:
    return {"mean": round(ci.estimate, 4), "ci_low": round(ci.low, 4), "ci_high": round(ci.high, 4)}


class _Data:
    """SciFact and the corpus gold, loaded once for every embedder."""

    def __init__(self, profile_chunking: dict[str, Any] | None = None) -> None:
        from rag import paths
        from rag.corpus.papers import corpus_papers
        from rag.evaluation import scifact
        from rag.evaluation.gold import gold_for_papers, load_gold
        from rag.text.chunk import chunk_settings

        self.sf_corpus, self.sf_queries, self.sf_qrels = scifact.load_scifact(None)
        papers, self.parsed = corpus_papers("data/manifest.jsonl")
        selected = {p.arxiv_id for p in papers}
        self.gold = gold_for_papers(load_gold(paths.resolve("../shared/gold/dev.jsonl")), selected)
        self.chunking = chunk_settings(profile_chunking or {"strategy": "fixed", "max_tokens": 254,
                                                            "overlap_tokens": 32})  # fmt: skip


def _settings() -> Any:
    from rag.retrieval.retrievers import RetrievalSettings

    return RetrievalSettings(k=100, hybrid_pool=100)


def _scifact(data: _Data, emb: Any) -> dict[str, Any]:
    from rag.evaluation.compare import build_retrievers, grade, run_all
    from rag.index.build import index_documents
    from rag.retrieval.retrievers import Components

    t0 = time.perf_counter()
    sf = index_documents(data.sf_corpus, "scifact", embedder=emb)
    build_s = time.perf_counter() - t0
    comps = Components(store=sf.store, embedder=sf.embedder, dense_index=sf.dense,
                       bm25_index=sf.bm25, reranker=None, llm=None)  # fmt: skip
    rets, _ = build_retrievers(["dense", "hybrid"], comps, _settings())
    cmp = grade("scifact", run_all(rets, data.sf_queries, 100), data.sf_qrels, seed=SEED)
    return {
        name: {"ndcg@10": _ci(ev.aggregate["ndcg@10"]), "n": ev.n}
        for name, ev in cmp.evals.items()
    } | {"index_s": round(build_s, 2), "n_docs": len(data.sf_corpus)}


def _corpus(data: _Data, emb: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dense and hybrid on the corpus gold: metrics, per-question nDCG@10, and costs."""
    from rag.evaluation.compare import build_retrievers, grade, run_all
    from rag.evaluation.gold import chunk_qrels, gold_queries
    from rag.index import dense as dense_mod
    from rag.index.build import index_corpus
    from rag.retrieval.retrievers import Components

    t0 = time.perf_counter()
    ix = index_corpus(data.parsed, data.chunking, embedder=emb)
    index_s = time.perf_counter() - t0
    qrels, _ = chunk_qrels(data.gold, ix.chunks, threshold=90.0)
    queries = {q: t for q, t in gold_queries(data.gold).items() if q in qrels}
    comps = Components(store=ix.store, embedder=ix.embedder, dense_index=ix.dense,
                       bm25_index=ix.bm25, reranker=None, llm=None)  # fmt: skip
    rets, _ = build_retrievers(["dense", "hybrid"], comps, _settings())
    runs = run_all(rets, queries, 100)
    cmp = grade("corpus_gold/chunk", runs, qrels, seed=SEED)
    per_q = {name: ev.per_query["ndcg@10"].to_dict() for name, ev in cmp.evals.items()}
    metrics = {
        name: {
            "ndcg@10": _ci(ev.aggregate["ndcg@10"]),
            "recall@10": _ci(ev.aggregate["recall@10"]),
            "n": ev.n,
        }
        for name, ev in cmp.evals.items()
    }
    # costs: passages/s on a fixed sample with the cache off, the flat index built from the
    # cached vectors, and query p50 of dense retrieval (encoding + search) on the gold questions
    sample = [c.text for c in ix.chunks[:: max(1, len(ix.chunks) // SAMPLE_PASSAGES)]]
    sample = sample[:SAMPLE_PASSAGES]
    emb.encode_passages(sample[:2])  # warm-up (first-call allocation)
    t0 = time.perf_counter()
    emb.encode_passages(sample)
    pps = len(sample) / (time.perf_counter() - t0)
    vectors = ix.dense.vectors
    t0 = time.perf_counter()
    dense_mod.DenseIndex([c.chunk_id for c in ix.chunks], vectors, kind="flat")
    build_s = time.perf_counter() - t0
    lat = runs["dense"].latency_summary()
    costs = {
        "passages_per_s": round(pps, 2),
        "sample_passages": len(sample),
        "flat_index_build_s": round(build_s, 4),
        "index_mb": round(vectors.nbytes / 1e6, 2),
        "dim": int(vectors.shape[1]),
        "chunks": len(ix.chunks),
        "query_p50_ms": round(lat["p50"], 2),
        "query_p95_ms": round(lat["p95"], 2),
        "index_corpus_s": round(index_s, 2),
        "dense_kind": ix.stats.get("dense_kind"),
    }
    return {"metrics": metrics, "costs": costs}, per_q


def _paired_rows(comparisons: list[tuple[dict[str, str], dict, dict]]) -> list[dict[str, Any]]:
    """``(row, a, b)`` -> each row with a minus b on the questions both hold; Holm over all.
    A comparison on fewer than two shared questions has no test and is left out (logged)."""
    from rag.evaluation.stats import correct, paired_test

    rows, results = [], []
    for row, a, b in comparisons:
        qids = sorted(set(a) & set(b))
        if len(qids) < 2:
            logger.warning("no paired test for %s: %d shared questions", row, len(qids))
            continue
        results.append(paired_test([a[q] for q in qids], [b[q] for q in qids], seed=SEED))
        rows.append(dict(row))
    for row, res in zip(rows, correct(results, "holm"), strict=True):
        row.update(
            diff=round(res.diff, 4), ci_low=round(res.ci.low, 4), ci_high=round(res.ci.high, 4),
            p=round(res.p_value, 4), p_holm=round(res.p, 4), n=res.n,
            significant=bool(res.p < 0.05),
        )  # fmt: skip
    return rows


def paired_vs_baseline(
    per_q: dict[str, dict[str, dict[str, float]]], baseline: str
) -> list[dict[str, Any]]:
    """Each embedder minus ``baseline`` on the same questions, per retriever; Holm over all.

    Args:
        per_q: ``{embedder: {retriever: {qid: nDCG@10}}}``.
        baseline: the embedder every other one is compared with.
    """
    return _paired_rows([
        ({"embedder": name, "retriever": ret, "baseline": baseline}, values, per_q[baseline][ret])
        for name, by_ret in per_q.items() if name != baseline
        for ret, values in by_ret.items() if ret in per_q[baseline]
    ])  # fmt: skip


def hybrid_vs_dense(per_q: dict[str, dict[str, dict[str, float]]]) -> list[dict[str, Any]]:
    """Per embedder, its hybrid run minus its own dense run (what BM25 fusion still adds);
    Holm over the embedders."""
    return _paired_rows([
        ({"embedder": name, "retriever": "hybrid", "baseline": "dense"}, r["hybrid"], r["dense"])
        for name, r in per_q.items() if "hybrid" in r and "dense" in r
    ])  # fmt: skip


def paired_tests(per_q: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """The file's two families of paired tests, from its per-question nDCG@10."""
    out: dict[str, Any] = {"hybrid_vs_dense": hybrid_vs_dense(per_q)}
    if "minilm" in per_q:
        out["paired_vs_minilm"] = paired_vs_baseline(per_q, "minilm")
    return out


def _load(out: Path) -> dict[str, Any]:
    if out.is_file():
        return json.loads(out.read_text())
    return {}


PARTS = ("corpus", "scifact")


def run(embedders: Sequence[str], out: Path, parts: Sequence[str] = PARTS) -> dict[str, Any]:
    """Measure every embedder in turn, writing ``out`` after each one.

    ``parts`` picks the corpus comparison, the SciFact reproduction or both; a part not run keeps
    what an earlier run of the same embedder recorded for it."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f"parts must be among {PARTS}, got {list(parts)!r}")
    from rag.index.embed import load_embedder
    from rag.report.runner import cpu_family

    data = _Data()
    doc = _load(out)
    doc.setdefault("embedders", {})
    per_q_all: dict[str, Any] = doc.get("_per_question", {})
    for name in embedders:
        logger.info("embedder %s", name)
        try:
            emb = load_embedder(name)
        except ProviderUnavailable as e:
            doc["embedders"][name] = {"not_run": str(e)}
            continue
        t0 = time.perf_counter()
        held = doc["embedders"].get(name, {})
        if held.get("fingerprint") != emb.fingerprint:
            held = {}
            per_q_all.pop(name, None)  # another model under this name: its questions are stale
        entry: dict[str, Any] = {"fingerprint": emb.fingerprint,
                                 "scifact_published": _published(name)}  # fmt: skip
        for part in PARTS:
            if part not in parts:
                keep = ("scifact",) if part == "scifact" else ("corpus_gold_chunk", "costs")
                entry.update({k: held[k] for k in keep if k in held})
            elif part == "scifact":
                entry["scifact"] = _scifact(data, emb)
            else:
                corpus, per_q_all[name] = _corpus(data, emb)
                entry.update(corpus_gold_chunk=corpus["metrics"], costs=corpus["costs"])
        seconds = dict(held["seconds"]) if isinstance(held.get("seconds"), dict) else {}
        seconds["+".join(parts)] = round(time.perf_counter() - t0, 1)
        entry["seconds"] = seconds
        # each part names the CPU it ran on: MiniLM's passages are bf16 only where the CPU has it
        cpus = dict(held["cpu"]) if isinstance(held.get("cpu"), dict) else {}
        entry["cpu"] = cpus | {part: cpu_family() for part in parts}
        entry["load_average"] = [round(x, 2) for x in os.getloadavg()]
        doc["embedders"][name] = entry
        doc["_per_question"] = per_q_all
        doc.update(paired_tests(per_q_all))
        doc["machine"] = {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count()}  # fmt: skip
        doc["method"] = METHOD
        doc["command"] = "python -m rag.bench.embedders"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return doc


def retest(out: Path) -> dict[str, Any]:
    """Redo the paired tests of ``out`` from its per-question values; nothing is embedded."""
    doc = _load(out)
    if not doc.get("_per_question"):
        raise ValueError(f"{out}: no per-question values to test; run the corpus part first")
    doc.update(paired_tests(doc["_per_question"]), method=METHOD)
    out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return doc


def summary_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per embedder: SciFact vs published, corpus dense and hybrid, costs."""
    rows = []
    for name, e in doc.get("embedders", {}).items():
        if "not_run" in e:
            rows.append({"embedder": name, "not_run": e["not_run"]})
            continue
        pub = e.get("scifact_published") or {}
        sf, corpus, costs = e.get("scifact", {}), e.get("corpus_gold_chunk", {}), e.get("costs", {})
        rows.append({
            "embedder": name,
            "scifact dense": sf.get("dense", {}).get("ndcg@10", {}).get("mean"),
            "published": pub.get("ndcg@10"),
            "corpus dense": corpus.get("dense", {}).get("ndcg@10", {}).get("mean"),
            "corpus hybrid": corpus.get("hybrid", {}).get("ndcg@10", {}).get("mean"),
            "passages/s": costs.get("passages_per_s"),
            "query p50 ms": costs.get("query_p50_ms"),
            "index MB": costs.get("index_mb"),
        })  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rag.bench.embedders", description=__doc__)
    p.add_argument(
        "--embedders",
        default=",".join(DEFAULT_EMBEDDERS),
        help="comma-separated embedder names (MiniLM first: the paired baseline)",
    )
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated: corpus (158 gold questions) and/or scifact (300 BEIR queries)",
    )
    p.add_argument(
        "--tests-only",
        action="store_true",
        help="no embedder runs: redo the paired tests from the per-question values in --out",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from rag.paths import resolve

    if args.tests_only:
        retest(resolve(args.out))
        return 0
    names = [n.strip() for n in args.embedders.split(",") if n.strip()]
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    doc = run(names, resolve(args.out), parts)
    for row in summary_rows(doc):
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
