"""Text repairs in indexed chunks on the real corpus: what they change and what retrieval gains.

Index hygiene (:mod:`rag.text.hygiene`) repairs the text of the chunks it keeps: it cuts runs of a
table of contents inside a body chunk (:func:`~rag.text.hygiene.strip_toc_runs`) and joins words
a PDF split across blocks with a line-end hyphen (:mod:`rag.text.hyphens`). This measures both on
the default profile's corpus (notebook 04's chunking: fixed windows of 254 tokens, 32 overlapping):

1. **Counts**: chunks changed, TOC runs cut (and their lines), hyphen joins made (hyphen dropped or
   kept as a compound), splits left alone, chunks dropped because nothing but a run was left.
2. **A sample to check by hand**: every TOC run cut (up to :data:`N_TOC_SAMPLE`) and
   :data:`N_JOIN_SAMPLE` joins drawn with a fixed seed, each with the text around it, and the
   verdict of reading it (:data:`HAND_CHECK`).
3. **Paired change** of every retrieval number of the report (nDCG@10, Recall@10, MRR@10 for
   dense, BM25, hybrid and multi-query) with the repairs off and on, hygiene's labels the same,
   on the same gold questions and the same qrels (built on every chunk, as notebook 04 builds
   them; chunk ids do not change): mean difference (on - off), bootstrap CI and paired
   randomisation test, Holm-corrected over the family, as :mod:`rag.bench.hygiene` does for
   hygiene off/on. The off run is checked against the committed
   ``outputs/default/04_retrieval/metrics.json`` (made before the repairs).

Command: ``python -m rag.bench.text_fixes`` → ``outputs/bench/text_fixes.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag.bench.hygiene import (
    CHUNKING,
    COMMITTED_04,
    COMMITTED_PER_QUESTION,
    METRICS,
    RETRIEVERS,
    check_committed,
    paired_changes,
    print_paired,
    questions_differing,
)
from rag.errors import EvaluationError

log = logging.getLogger(__name__)

OUT = "outputs/bench/text_fixes.json"
N_TOC_SAMPLE, N_JOIN_SAMPLE, SAMPLE_SEED = 10, 20, 0
#: Characters of text shown on each side of a join in the sample.
CONTEXT = 40
#: The verdicts of reading the sample (seed 0), keyed ``paper_id|before`` (``paper_id|toc`` for a
#: run): each join read in its context, each run against the text left.
HAND_CHECK: dict[str, str] = {
    "2310.11511|toc": "right: the end of the appendix TOC (C Results .. D Full List ... GPT-4 21); "
    "the body from A SELF-RAG DETAILS on is kept",
    "2508.10874|toc": "right: CONTENTS up to the cut leader of 2.3 Experimental Setup; the "
    "Figure 1 caption before it is kept",
    "1607.05368|em-\n\npirical": "right",
    "1802.05365|rep-\n\nresentations": "right",
    "1905.05460|follow-\n\ning": "right",
    "2004.02984|task-\n\nagnostic": "right",
    "2004.14283|con-\n\ntains": "right",
    "2004.14283|pre-\n\ndictions": "right",
    "2007.01282|sequence-to-\n\nsequence": "right",
    "2007.01282|mod-\n\nels": "right",
    "2204.10628|al-\n\nlows": "right",
    "2301.11305|machine-\n\ngenerated": "right",
    "2302.00083|doc-\n\nument": "right",
    "2305.06983|chain-of-\n\nthought": "right",
    "2307.16883|con-\n\nstructed": "right",
    "2309.15217|us-\n\ning": "right",
    "2310.06839|informa-\n\ntion": "right",
    "2310.07713|decoder-\n\nonly": "right",
    "2401.15391|mar-\n\ngins": "right",
    "2501.10120|pa-\n\nper": "right",
    "2508.10482|par-\n\nticular": "right",
    "2508.10548|imme-\n\ndiate": "right",
}


def repair_counts(repairs: Sequence[Any], n_kept: int, n_after: int) -> dict[str, Any]:
    """Totals over :class:`rag.text.hygiene.Repair` records."""
    joins = [j for r in repairs for j in r.joins]
    return {
        "chunks_kept_by_labels": n_kept,
        "chunks_changed": len(repairs),
        "chunks_dropped_as_all_toc_run": n_kept - n_after,
        "papers_changed": len({r.paper_id for r in repairs}),
        "toc_runs_cut": sum(len(r.toc_runs) for r in repairs),
        "toc_lines_cut": sum(run.count("\n") + 1 for r in repairs for run in r.toc_runs),
        "hyphen_joins": len(joins),
        "hyphen_dropped": sum(j.after.count("-") < j.before.count("-") for j in joins),
        "hyphen_kept_as_compound": sum(j.after.count("-") == j.before.count("-") for j in joins),
    }


def unresolved_splits(chunks: Sequence[Any]) -> int:
    """Line-end hyphen splits still in the texts (the paper gave no evidence, or a single
    letter sat on one side)."""
    from rag.text.hyphens import SPLIT

    return sum(len(SPLIT.findall(c.text)) for c in chunks)


def sample(raw: Mapping[str, Any], repairs: Sequence[Any], seed: int = SAMPLE_SEED) -> dict:
    """Every TOC run (up to :data:`N_TOC_SAMPLE`) and :data:`N_JOIN_SAMPLE` seeded joins, with
    the text around each join as it was, and :data:`HAND_CHECK`'s verdict."""
    tocs = [
        {"chunk_id": r.chunk_id, "paper_id": r.paper_id, "run": run}
        for r in repairs
        for run in r.toc_runs
    ][:N_TOC_SAMPLE]
    joins = [(r, j) for r in repairs for j in r.joins]
    picked = random.Random(seed).sample(joins, min(N_JOIN_SAMPLE, len(joins)))
    rows = []
    for r, j in sorted(picked, key=lambda x: (x[0].paper_id, x[0].chunk_id, x[1].before)):
        text = raw[r.chunk_id].text
        at = text.find(j.before)
        rows.append(
            {
                "chunk_id": r.chunk_id,
                "paper_id": r.paper_id,
                "before": j.before,
                "after": j.after,
                "context": text[max(at - CONTEXT, 0) : at + len(j.before) + CONTEXT],
            }
        )
    for row in (*tocs, *rows):
        row["hand_check"] = HAND_CHECK.get(f"{row['paper_id']}|{row.get('before', 'toc')}")
    return {"toc_runs": tocs, "joins": rows}


def _top(scores: Mapping[str, float], k: int) -> list[str]:
    return sorted(scores, key=lambda d: (-scores[d], d))[:k]


def measure(*, seed: int = 0) -> dict[str, Any]:
    """Everything the module docstring lists, as one JSON-ready dict."""
    from rag import paths
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.compare import build_retrievers, grade, run_all
    from rag.evaluation.gold import chunk_qrels, gold_for_papers, gold_queries, load_gold
    from rag.index.build import index_chunks, index_corpus, indexed_fingerprint
    from rag.retrieval.retrievers import Components, RetrievalSettings
    from rag.text.chunk import chunk_settings
    from rag.text.chunk_cache import chunk_corpus, chunk_fingerprint
    from rag.text.hygiene import HYGIENE_VERSION, repair_chunks, split_body

    t0 = time.perf_counter()
    settings = chunk_settings(CHUNKING)
    papers, parsed = corpus_papers("data/manifest.jsonl", (), 0)
    chunks = chunk_corpus(parsed, settings)
    raw, _ = split_body(chunks, repair=False)
    fixed, repairs = repair_chunks(raw, vocab_from=chunks)
    res: dict[str, Any] = {
        "hygiene_version": HYGIENE_VERSION,
        "chunking": CHUNKING,
        "papers": len(parsed),
        "chunks": len(chunks),
        "counts": {
            **repair_counts(repairs, len(raw), len(fixed)),
            "splits_left_before": unresolved_splits(raw),
            "splits_left_after": unresolved_splits(fixed),
        },
        "sample": sample({c.chunk_id: c for c in raw}, repairs, seed),
    }

    gold = gold_for_papers(load_gold(paths.resolve("../shared/gold/dev.jsonl")), {
        p.arxiv_id for p in papers
    })  # fmt: skip
    qrels, report = chunk_qrels(gold, chunks, threshold=90.0)
    res["gold"] = {"questions": len(qrels), "qrels_report": report.summary()}
    queries = {q: t for q, t in gold_queries(gold).items() if q in qrels}
    rsettings = RetrievalSettings(k=100, hybrid_pool=100, rerank_pool=30, n_variants=2)
    fp = chunk_fingerprint([p for p in parsed if p.ok], settings)
    on_ix = index_corpus(parsed, settings, embedder="minilm")
    if [(c.chunk_id, c.text) for c in on_ix.chunks] != [(c.chunk_id, c.text) for c in fixed]:
        raise EvaluationError("the index build's chunks are not the repaired chunks measured")
    off_ix = index_chunks(raw, f"{indexed_fingerprint(fp, True)}-unrepaired", embedder="minilm")
    graded = {}
    for on, ix in ((False, off_ix), (True, on_ix)):
        comps = Components(
            store=ix.store, embedder=ix.embedder, dense_index=ix.dense, bm25_index=ix.bm25
        )
        retrievers, skipped = build_retrievers(RETRIEVERS, comps, rsettings)
        if skipped:
            raise EvaluationError(f"retrievers not built: {skipped}")
        graded[on] = grade("corpus_gold/chunk", run_all(retrievers, queries, 100), qrels, seed=seed)
        res[f"repairs_{str(on).lower()}"] = {
            "indexed_chunks": len(ix.chunks),
            "metrics": {
                n: {m: graded[on].evals[n].aggregate[m].to_dict() for m in METRICS}
                for n in RETRIEVERS
            },
        }
    res["paired_on_minus_off"] = paired_changes(graded[False], graded[True], RETRIEVERS, seed=seed)
    changed = {r.chunk_id for r in repairs}
    res["questions_with_a_repaired_chunk_in_top10"] = {
        label: {
            n: sum(bool(changed & set(_top(d, 10))) for d in graded[on].runs[n].values())
            for n in RETRIEVERS
        }
        for label, on in (("off", False), ("on", True))
    }
    committed = json.loads(paths.resolve(COMMITTED_04).read_text(encoding="utf-8"))
    res["off_vs_committed_04_max_abs_diff"] = check_committed(
        res["repairs_false"]["metrics"], committed["corpus_gold"]["chunk"], RETRIEVERS
    )
    res["off_vs_committed_04_questions_differing"] = questions_differing(
        graded[False], COMMITTED_PER_QUESTION, "corpus_gold/chunk", RETRIEVERS
    )
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["command"] = "python -m rag.bench.text_fixes"
    return res


def print_summary(res: Mapping[str, Any]) -> None:
    """The counts and the paired changes, one line each."""
    print(f"counts: {res['counts']}")
    print_paired(res["paired_on_minus_off"])
    print(f"top-10 with a repaired chunk: {res['questions_with_a_repaired_chunk_in_top10']}")
    print(f"off vs committed 04, max |mean diff|: {res['off_vs_committed_04_max_abs_diff']}")
    differing = res["off_vs_committed_04_questions_differing"]
    print(f"off vs committed 04, questions differing: {differing}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from rag.bench import write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    res = measure()
    print_summary(res)
    print(f"written: {write_json(res, args.out)}")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
