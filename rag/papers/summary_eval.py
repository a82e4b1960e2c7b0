"""Measure the extractive summaries on a corpus; ``python -m rag.papers.summary_eval``.

The reference is each paper's own abstract, which the summariser never sees
(:func:`rag.papers.summarize.body_sentences` leaves it out). Per paper and per method
(``extractive``, and the ``lead`` baseline: the first sentences after the abstract under the
same sentence count and word budget):

* **ROUGE-L** F-measure against the abstract (Lin 2004; the ``rouge-score`` package, Porter
  stemming), the longest common subsequence of the two texts' tokens;
* **faithfulness**: the share of summary sentences the pinned offline judge labels
  ``supported`` against their evidence in the paper (:func:`rag.papers.summarize.
  judged_record`); for extracted sentences the evidence contains the sentence itself, so this
  checks the judge rather than the summariser;
* **length** in words.

Each is reported as a mean with its 95 % bootstrap CI (:func:`rag.evaluation.stats.
bootstrap_ci`), and extractive is compared with lead paired by paper: the paired randomisation
test (:func:`rag.evaluation.stats.paired_test`) and, beside it, the Wilcoxon signed-rank test.
Papers whose abstract has fewer than :data:`MIN_ABSTRACT_WORDS` words are skipped and counted.
Writes ``outputs/bench/summaries.json`` for the whole pinned manifest.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rouge_score import rouge_scorer
from scipy.stats import wilcoxon

from rag import paths
from rag.corpus.papers import corpus_papers
from rag.evaluation.stats import bootstrap_ci, paired_test
from rag.papers.summarize import (
    DEFAULT_MAX_WORDS,
    DEFAULT_SENTENCES,
    SUMMARY_VERSION,
    Sentence,
    abstract_text,
    body_sentences,
    default_embedder,
    default_judge,
    extractive,
    judged_record,
    lead,
    sentence_vectors,
)
from rag.types import ParsedPaper
from rag.verdicts import ClaimJudge

log = logging.getLogger(__name__)

#: Methods compared, in table order.
METHODS = ("extractive", "lead")
#: Per-paper measures.
MEASURES = ("rouge_l", "faithfulness", "words")
#: Papers with a shorter abstract (none found, or a parse that lost it) are not measured.
MIN_ABSTRACT_WORDS = 30


@functools.cache
def _scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(summary: str, reference: str) -> float:
    """ROUGE-L F-measure of ``summary`` against ``reference`` (stemmed, rouge-score)."""
    return float(_scorer().score(reference, summary)["rougeL"].fmeasure)


def paper_row(
    parsed: ParsedPaper,
    embedder: Any,
    judge: ClaimJudge,
    n: int = DEFAULT_SENTENCES,
    max_words: int = DEFAULT_MAX_WORDS,
) -> dict[str, Any] | None:
    """One paper's measures for every method, or None when its abstract or body is missing."""
    reference = abstract_text(parsed)
    inputs = body_sentences(parsed)
    if len(reference.split()) < MIN_ABSTRACT_WORDS or not inputs:
        return None
    vectors = sentence_vectors(inputs, embedder)
    picks: dict[str, list[Sentence]] = {
        "extractive": extractive(inputs, vectors, n, max_words),
        "lead": lead(inputs, n, max_words),
    }
    chosen = [s for m in METHODS for s in picks[m]]
    records = judged_record(
        [s.text for s in chosen], inputs, vectors, vectors[[s.index for s in chosen]], judge
    )
    row: dict[str, Any] = {"paper_id": parsed.paper_id, "input_sentences": len(inputs),
                           "abstract_words": len(reference.split())}  # fmt: skip
    at = 0
    for m in METHODS:
        recs = records[at : at + len(picks[m])]
        at += len(picks[m])
        text = " ".join(r["text"] for r in recs)
        row[m] = {
            "rouge_l": round(rouge_l(text, reference), 6),
            "faithfulness": sum(r["verdict"]["label"] == "supported" for r in recs) / len(recs),
            "words": len(text.split()),
            "sentences": len(recs),
            "roles": sorted({r["role"] for r in recs}),
        }
    return row


def _ci(values: Sequence[float]) -> dict:
    return bootstrap_ci(np.asarray(values, dtype=float)).to_dict()


def aggregate(rows: Sequence[dict]) -> dict[str, Any]:
    """Means with CIs per method and measure, and the paired comparisons extractive vs lead."""
    out: dict[str, Any] = {m: {k: _ci([r[m][k] for r in rows]) for k in MEASURES} for m in METHODS}
    out["extractive_vs_lead"] = {}
    for k in ("rouge_l", "faithfulness"):
        a = np.array([r["extractive"][k] for r in rows], dtype=float)
        b = np.array([r["lead"][k] for r in rows], dtype=float)
        d = paired_test(a, b).to_dict()
        d["wilcoxon_p"] = float(wilcoxon(a, b).pvalue) if np.any(a != b) else 1.0
        d["wins"], d["losses"] = int(np.sum(a > b)), int(np.sum(a < b))
        out["extractive_vs_lead"][k] = d
    return out


def measure(
    manifest_path: str = "data/manifest.jsonl",
    *,
    max_papers: int = 0,
    n: int = DEFAULT_SENTENCES,
    max_words: int = DEFAULT_MAX_WORDS,
) -> dict[str, Any]:
    """Summarise every parsed paper of the selection and measure it (module docstring)."""
    t0 = time.perf_counter()
    _, parsed = corpus_papers(manifest_path, (), max_papers)
    ok = [p for p in parsed if p.ok]
    embedder, judge = default_embedder(), default_judge()
    timings = {"load_s": round(time.perf_counter() - t0, 2)}
    t = time.perf_counter()
    rows, skipped = [], []
    for pp in ok:
        row = paper_row(pp, embedder, judge, n, max_words)
        (rows.append(row) if row else skipped.append(pp.paper_id))
    timings["summarise_and_judge_s"] = round(time.perf_counter() - t, 2)
    timings["total_s"] = round(time.perf_counter() - t0, 2)
    timings["load_average_1m"] = round(os.getloadavg()[0], 2)
    timings["cpus"] = os.cpu_count()
    return {
        "version": SUMMARY_VERSION,
        "settings": {
            "sentences": n,
            "max_words": max_words,
            "judge": judge.name,
            "embedder": embedder.fingerprint,
            "rouge": "rougeL F, porter stemmer",
            "min_abstract_words": MIN_ABSTRACT_WORDS,
        },  # fmt: skip
        "n_papers": len(rows),
        "skipped": {"not_parsed": len(parsed) - len(ok), "no_abstract_or_body": skipped},
        "metrics": aggregate(rows),
        "papers": rows,
        "timings": timings,
    }


def write_json(doc: dict, path: Path) -> Path:
    """Write ``doc`` to ``path`` atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default="data/manifest.jsonl")
    ap.add_argument("--max-papers", type=int, default=0)
    ap.add_argument("--sentences", type=int, default=DEFAULT_SENTENCES)
    ap.add_argument("--max-words", type=int, default=DEFAULT_MAX_WORDS)
    ap.add_argument("--out", default="outputs/bench/summaries.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    doc = measure(args.manifest, max_papers=args.max_papers, n=args.sentences,
                  max_words=args.max_words)  # fmt: skip
    out = write_json(doc, paths.resolve(args.out))
    m = doc["metrics"]
    for method in METHODS:
        log.info("%s: rouge_l %.3f, faithfulness %.3f, words %.0f", method,
                 m[method]["rouge_l"]["mean"], m[method]["faithfulness"]["mean"],
                 m[method]["words"]["mean"])  # fmt: skip
    log.info("wrote %s (%d papers, %.1f s)", paths.display(out), doc["n_papers"],
             doc["timings"]["total_s"])  # fmt: skip


if __name__ == "__main__":
    main()
