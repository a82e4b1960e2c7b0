"""Measure the citation graph and related work on a corpus; ``python -m rag.papers.measure``.

Three measurements of the graph and one of related work, each with n and a 95 % bootstrap CI
(:func:`rag.evaluation.stats.bootstrap_ci`):

(a) **title resolution** on reference entries that carry an arXiv id: the ids are hidden
    (:func:`rag.papers.ids.hide_ids`) and the entry is resolved by its text alone; the truth is
    the id the authors wrote. The citing papers are split in two halves by position in id order;
    the title threshold is the middle of the range of thresholds that maximise F0.5 (precision
    weighted) on the first half, and precision and recall are reported on the second, each also
    with its exact (Clopper-Pearson) interval, since near 100 % the bootstrap interval collapses.
(b) **splitting** of numbered lists: entries found against the largest ``[N]``, per paper and
    overall.
(c) **graph size**: papers citing or cited in the corpus, edges, how they were resolved, and the
    out-of-corpus arXiv ids cited most.
(d) **related work** as leave-one-out citation prediction (:func:`rag.papers.related.
    leave_one_out_runs`): recall@5/10, MRR and nDCG@10 by ranx, paired randomisation tests between
    methods with Holm correction (:func:`rag.evaluation.metrics.compare_runs`).

Writes the JSON summary and the corpus's ``citations.jsonl``: for the whole pinned manifest
``outputs/bench/citations.json`` and ``data/citations.jsonl`` (beside the manifest), for any other
selection a folder under ``outputs/papers/`` (:func:`default_outputs`).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from rag import paths
from rag.atomic import write_atomic
from rag.corpus.manifest import Paper
from rag.corpus.papers import corpus_papers
from rag.evaluation.metrics import compare_runs, evaluate_run
from rag.evaluation.stats import bootstrap_ci
from rag.papers.graph import (
    build_citations,
    citation_graph,
    degrees,
    most_cited_outside,
    references_of,
    write_citations,
)
from rag.papers.ids import arxiv_ids, hide_ids
from rag.papers.references import numbered_count, paper_references, reference_blocks
from rag.papers.related import INDEX_CHUNKING, corpus_vectors, leave_one_out_runs
from rag.papers.resolve import TITLE_THRESHOLD, TitleMatcher, stamp_month
from rag.text.chunk import chunk_settings
from rag.types import ParsedPaper

log = logging.getLogger(__name__)

#: Metrics of the related-work measurement (ranx names).
RELATED_METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10")
#: Thresholds tried when the title threshold is chosen (0-100 in steps of 0.5).
GRID = tuple(x / 2 for x in range(100, 201))


def _ci(values: Sequence[float]) -> dict:
    if not len(values):
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    return bootstrap_ci(np.asarray(values, dtype=float)).to_dict()


def _proportion(hits: Sequence[float]) -> dict:
    """A proportion with its bootstrap CI and, beside it, the exact (Clopper-Pearson) interval,
    which stays informative where the bootstrap collapses (every value 1)."""
    out = _ci(hits)
    if hits:
        k, n = int(sum(hits)), len(hits)
        exact = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        out.update({"k": k, "exact_low": float(exact.low), "exact_high": float(exact.high)})
    return out


@dataclass(frozen=True, slots=True)
class Probe:
    """One entry with a known arXiv id, resolved with the id hidden."""

    citing: str
    truth: frozenset[str]
    predicted: str
    score: float


def title_probes(
    papers: Sequence[Paper], parsed: Sequence[ParsedPaper], matcher: TitleMatcher
) -> list[Probe]:
    """Every entry that carries an arXiv id (not the citing paper's), resolved by text only."""
    by_id = {p.arxiv_id: p for p in papers}
    corpus = set(by_id)
    probes = []
    for pp in parsed:
        month = stamp_month(by_id[pp.paper_id].stamp_date)
        for ref in paper_references(pp):
            ids = [a for a in arxiv_ids(ref.text) if a != pp.paper_id]
            if not ids:
                continue
            m = matcher.best(hide_ids(ref.text), month)
            pred = m.arxiv_id if m is not None and m.arxiv_id != pp.paper_id else ""
            truth = frozenset(a for a in ids if a in corpus)
            probes.append(Probe(pp.paper_id, truth, pred, m.score if pred else 0.0))
    return probes


def _confusion(probes: Sequence[Probe], threshold: float) -> tuple[list[float], list[float]]:
    """Per-prediction correctness (precision's values) and per-positive hits (recall's)."""
    prec = [float(p.predicted in p.truth) for p in probes if p.predicted and p.score >= threshold]
    rec = [
        float(bool(p.predicted) and p.score >= threshold and p.predicted in p.truth)
        for p in probes
        if p.truth
    ]
    return prec, rec


def choose_threshold(probes: Sequence[Probe], beta: float = 0.5) -> tuple[float, list[float]]:
    """The middle of the thresholds that maximise F-beta on ``probes``, and that range."""
    best, tied = -1.0, []
    for t in GRID:
        prec, rec = _confusion(probes, t)
        p = float(np.mean(prec)) if prec else 0.0
        r = float(np.mean(rec)) if rec else 0.0
        f = (1 + beta**2) * p * r / (beta**2 * p + r) if p + r else 0.0
        if f > best + 1e-12:
            best, tied = f, [t]
        elif abs(f - best) <= 1e-12:
            tied.append(t)
    mid = round((tied[0] + tied[-1]) / 2 * 2) / 2
    return mid, [tied[0], tied[-1]]


def title_resolution(probes: Sequence[Probe]) -> dict:
    """Choose the threshold on one half of the citing papers, report both halves."""
    citing = sorted({p.citing for p in probes})
    tune_ids = set(citing[0::2])
    tune = [p for p in probes if p.citing in tune_ids]
    test = [p for p in probes if p.citing not in tune_ids]
    threshold, tied = choose_threshold(tune)
    out = {
        "threshold": threshold,
        "tied_range": tied,
        "rule": "middle of the thresholds maximising F0.5 on the tuning half",
        "probes": len(probes),
    }
    for name, part in (("tuning", tune), ("held_out", test)):
        prec, rec = _confusion(part, threshold)
        out[name] = {
            "papers": len({p.citing for p in part}),
            "entries": len(part),
            "entries_citing_corpus": sum(1 for p in part if p.truth),
            "precision": _proportion(prec),
            "recall": _proportion(rec),
        }
    return out


def splitting(parsed: Sequence[ParsedPaper]) -> dict:
    """Entries found against the largest ``[N]`` on papers with numbered reference lists."""
    rows = []
    for pp in parsed:
        true = numbered_count(reference_blocks(pp))
        if true:
            rows.append({"paper": pp.paper_id, "found": len(paper_references(pp)), "true": true})
    found = sum(r["found"] for r in rows)
    true = sum(r["true"] for r in rows)
    return {
        "papers": len(rows),
        "overall": {"found": found, "true": true, "ratio": found / true if true else None},
        "per_paper_ratio": _ci([r["found"] / r["true"] for r in rows]),
        "exact_papers": sum(r["found"] == r["true"] for r in rows),
        "per_paper": rows,
    }


def graph_size(rows, corpus: Sequence[str], k: int = 10) -> dict:
    """Papers, edges and resolution kinds of the graph; the out-of-corpus ids cited most."""
    g = citation_graph(rows, corpus)
    deg = degrees(g)
    inside = [r for r in rows if r.in_corpus]
    how: dict[str, int] = {}
    for r in rows:
        how[r.how] = how.get(r.how, 0) + 1
    return {
        "papers": len(corpus),
        "papers_citing_corpus": sum(1 for d in deg.values() if d["out"] > 0),
        "papers_cited_in_corpus": sum(1 for d in deg.values() if d["in"] > 0),
        "edges_in_corpus": len(inside),
        "edges_in_corpus_by_how": {
            h: sum(1 for r in inside if r.how == h) for h in ("arxiv_id", "doi", "title")
        },
        "rows": len(rows),
        "rows_by_how": dict(sorted(how.items())),
        "arxiv_ids_outside": len(
            {r.cited for r in rows if not r.in_corpus and not r.cited.startswith("doi:")}
        ),
        "most_cited_outside": [{"arxiv_id": a, "citing_papers": n} for a, n in
                               most_cited_outside(rows, k)],
        "most_cited_inside": sorted(
            ({"arxiv_id": p, "in": d["in"]} for p, d in deg.items() if d["in"]),
            key=lambda x: (-x["in"], x["arxiv_id"]),
        )[:k],
        "degrees": deg,
    }  # fmt: skip


def related_work(rows, corpus: Sequence[str], vectors: dict[str, np.ndarray]) -> dict:
    """Leave-one-out citation prediction: metrics with CIs per method and paired tests."""
    qrels, runs = leave_one_out_runs(corpus, vectors, references_of(rows))
    if len(qrels) < 2:
        return {"queries": len(qrels), "note": "fewer than two papers cite another corpus paper"}
    methods = {m: evaluate_run(qrels, run, RELATED_METRICS).to_metrics() for m, run in runs.items()}
    tests = {}
    for metric in ("recall@10", "ndcg@10"):
        table = compare_runs(qrels, runs, metric)
        tests[metric] = table[
            ["a", "b", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value", "p_adjusted",
             "significant", "n", "reading"]
        ].to_dict(orient="records")  # fmt: skip
    best = max(methods, key=lambda m: methods[m]["recall@10"]["mean"])
    return {
        "queries": len(qrels),
        "candidates_per_query": len(corpus) - 1,
        "relevant_per_query_mean": float(np.mean([len(v) for v in qrels.values()])),
        "methods": methods,
        "best_by_recall@10": best,
        "paired_tests": tests,
    }


def measure(
    manifest_path: str = "data/manifest.jsonl",
    *,
    paper_ids: Sequence[str] = (),
    max_papers: int = 0,
    pdf_mirror: str = "",
    citations_out: str = "outputs/papers/citations.jsonl",
    chunking: dict | None = None,
    embedder: str = "minilm",
    threshold: float | None = None,
) -> dict:
    """Run every measurement on a corpus, write ``citations_out``; return the JSON summary.

    The graph is built at ``threshold``, or, when None, at the threshold the title-resolution
    measurement chose on its tuning half (on the whole pinned corpus that is
    :data:`~rag.papers.resolve.TITLE_THRESHOLD`; a handful of papers cannot choose one, so a small
    selection passes the pinned constant).
    """
    t0 = time.perf_counter()
    papers, parsed = corpus_papers(manifest_path, paper_ids, max_papers, pdf_mirror=pdf_mirror)
    parsed = [p for p in parsed if p.ok]
    matcher = TitleMatcher({p.arxiv_id: p.title for p in papers})
    timings = {"load_s": round(time.perf_counter() - t0, 2)}
    t = time.perf_counter()
    resolution = title_resolution(title_probes(papers, parsed, matcher))
    timings["title_resolution_s"] = round(time.perf_counter() - t, 2)
    if threshold is None:
        threshold = resolution["threshold"]
    if resolution["threshold"] != TITLE_THRESHOLD and not paper_ids and not max_papers:
        log.warning(
            "chosen title threshold %s differs from rag.papers.resolve.TITLE_THRESHOLD %s; update "
            "the constant", resolution["threshold"], TITLE_THRESHOLD,
        )  # fmt: skip
    t = time.perf_counter()
    rows = build_citations(papers, parsed, threshold=threshold)
    write_citations(rows, paths.resolve(citations_out))
    corpus = [p.arxiv_id for p in papers]
    split = splitting(parsed)
    graph = graph_size(rows, corpus)
    timings["graph_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    chunking = dict(chunking or INDEX_CHUNKING)
    vectors = corpus_vectors(parsed, chunk_settings(chunking), embedder)
    rel = related_work(rows, corpus, vectors)
    timings["related_s"] = round(time.perf_counter() - t, 2)
    timings["total_s"] = round(time.perf_counter() - t0, 2)
    return {
        "corpus": {"manifest": manifest_path, "papers": len(papers), "parsed": len(parsed)},
        "citations_file": citations_out,
        "graph_threshold": threshold,
        "title_resolution": resolution,
        "splitting_numbered": split,
        "graph": graph,
        "related_work": {"chunking": chunking, "embedder": embedder, **rel},
        "timings": timings,
    }


def default_outputs(manifest_path: str, max_papers: int) -> tuple[str, str]:
    """Where a run writes ``(citations.jsonl, summary JSON)``: ``data/citations.jsonl`` and
    ``outputs/bench/citations.json`` for the whole pinned manifest, else a folder of its own under
    ``outputs/papers/``, so a partial corpus never overwrites the corpus's graph."""
    if paths.resolve(manifest_path) == paths.resolve("data/manifest.jsonl") and not max_papers:
        return "data/citations.jsonl", "outputs/bench/citations.json"
    folder = f"outputs/papers/{Path(manifest_path).stem}-{max_papers or 'all'}"
    return f"{folder}/citations.jsonl", f"{folder}/citations.json"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default="data/manifest.jsonl")
    ap.add_argument("--max-papers", type=int, default=0)
    ap.add_argument("--citations-out", default="", help="default: see default_outputs")
    ap.add_argument("--out", default="", help="summary JSON; default: see default_outputs")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    cites_default, out_default = default_outputs(args.manifest, args.max_papers)
    cites = args.citations_out or cites_default
    result = measure(args.manifest, max_papers=args.max_papers, citations_out=cites)
    out = paths.resolve(args.out or out_default)
    write_atomic(out, json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {paths.display(out)} and {cites} in {result['timings']['total_s']}s")


if __name__ == "__main__":
    main()
