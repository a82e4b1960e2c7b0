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

``--llm MODEL`` (any model name of :mod:`rag.llm.names`, e.g. ``local:smollm2-135m``) adds the
row ``llm:MODEL``: :func:`rag.papers.summarize.llm_summary` on the same input sentences, its
sentences judged by the same offline judge against their evidence in the paper (for an LLM
sentence this checks the summary, not the judge), the wall seconds per fresh call, and the paired
comparison with ``extractive`` on the same papers. ``--llm-sample N`` draws N of the measurable
papers at random (the first N of a ``--seed`` permutation, so a smaller N is a subset of a
larger one) for the LLM rows, for a model too slow for the whole corpus; the
extractive and lead rows always cover every measurable paper. A paper whose reply holds no usable
sentence is counted as failed and left out of that row's means, never scored 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rouge_score import rouge_scorer
from scipy.stats import wilcoxon

from rag import paths
from rag.atomic import write_atomic
from rag.corpus.papers import corpus_papers
from rag.errors import ConfigError, LLMError
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
    llm_summary,
    sentence_vectors,
)
from rag.types import ParsedPaper
from rag.verdicts import ClaimJudge

if TYPE_CHECKING:
    from rag.llm.base import ChatModel

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
    llms: Mapping[str, ChatModel] | None = None,
    title: str = "",
) -> dict[str, Any] | None:
    """One paper's measures for every method, or None when its abstract or body is missing.

    ``llms`` (``{row name: chat model}``) adds one LLM row each (:func:`llm_row`), prompted with
    the paper's ``title``.
    """
    if not measurable(parsed):
        return None
    reference = abstract_text(parsed)
    inputs = body_sentences(parsed)
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
    for name, chat in (llms or {}).items():
        row[name] = llm_row(chat, title, inputs, vectors, reference, embedder, judge, n)
    return row


def measurable(parsed: ParsedPaper) -> bool:
    """Whether a paper has an abstract of :data:`MIN_ABSTRACT_WORDS` words and body sentences."""
    return len(abstract_text(parsed).split()) >= MIN_ABSTRACT_WORDS and bool(body_sentences(parsed))


def sample_papers(eligible: Sequence[str], n: int, seed: int = 0) -> list[str]:
    """The first ``n`` of one seeded permutation of ``eligible`` (all of them when ``n`` is 0 or
    not smaller), so a smaller ``n`` draws a subset of a larger one with the same seed.

    Raises:
        ConfigError: a negative ``n``.
    """
    if n < 0:
        raise ConfigError(f"sample of {n} papers: must be >= 0 (0: every paper)")
    ids = sorted(eligible)
    if not 0 < n < len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, len(ids))[:n])


def llm_row(
    chat: ChatModel,
    title: str,
    inputs: Sequence[Sentence],
    vectors: np.ndarray,
    reference: str,
    embedder: Any,
    judge: ClaimJudge,
    n: int,
) -> dict[str, Any]:
    """One paper's LLM summary measures; ``{"failed": reason}`` when the reply has no sentence.

    ``seconds`` is the wall time of the call (``cached`` says whether it was served from the
    completion cache, so only fresh calls measure the model's speed).
    """
    t0 = time.perf_counter()
    try:
        claims, call = llm_summary(chat, title, inputs, vectors, n)
    except LLMError as e:
        return {"failed": f"{type(e).__name__}: {e}", "cached": False}
    seconds = time.perf_counter() - t0
    log.info("%s: %d sentences in %.1f s%s", chat.name, len(claims), seconds,
             " (cached)" if call["cached"] else "")  # fmt: skip
    claim_vectors = sentence_vectors([Sentence(i, c, "", "", 0) for i, c in enumerate(claims)],
                                     embedder)  # fmt: skip
    recs = judged_record(claims, inputs, vectors, claim_vectors, judge)
    text = " ".join(claims)
    return {
        "rouge_l": round(rouge_l(text, reference), 6),
        "faithfulness": sum(r["verdict"]["label"] == "supported" for r in recs) / len(recs),
        "words": len(text.split()),
        "sentences": len(recs),
        "seconds": round(seconds, 3),
        "cached": call["cached"],
        "input_tokens": call["input_tokens"],
        "output_tokens": call["output_tokens"],
    }


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
    llms = sorted({k for r in rows for k in r if k.startswith("llm:")})
    for m in llms:
        out.update(llm_aggregate(rows, m))
    for i, a in enumerate(llms):  # two models, paired on the papers both summarised
        for b in llms[i + 1 :]:
            both = [r for r in rows if "rouge_l" in r.get(a, {}) and "rouge_l" in r.get(b, {})]
            if len(both) >= 2:
                out[f"{a}_vs_{b}"] = {
                    k: _paired([r[a][k] for r in both], [r[b][k] for r in both])
                    for k in ("rouge_l", "faithfulness", "words")
                }
    return out


def _paired(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = paired_test(x, y).to_dict()
    d["wilcoxon_p"] = float(wilcoxon(x, y).pvalue) if np.any(x != y) else 1.0
    d["wins"], d["losses"] = int(np.sum(x > y)), int(np.sum(x < y))
    return d


def llm_aggregate(rows: Sequence[dict], method: str) -> dict[str, Any]:
    """An LLM row's means with CIs over the papers it summarised, its failures, and the paired
    comparison with ``extractive`` on those same papers (``<method>_vs_extractive``).

    ``seconds`` is averaged over fresh calls only (a cached call measures the cache).
    """
    tried = [r for r in rows if method in r]
    done = [r for r in tried if "failed" not in r[method]]
    if not done:
        raise ConfigError(f"{method}: no paper got a usable summary ({len(tried)} tried)")
    fresh = [r[method]["seconds"] for r in done if not r[method]["cached"]]
    agg: dict[str, Any] = {k: _ci([r[method][k] for r in done]) for k in MEASURES}
    agg["seconds"] = _ci(fresh) if fresh else {"mean": None, "n": 0, "note": "all calls cached"}
    agg["papers"] = len(tried)
    agg["failed"] = {r["paper_id"]: r[method]["failed"] for r in tried if "failed" in r[method]}
    vs: dict[str, Any] = {"note": "a paired test needs 2 or more papers"}
    if len(done) >= 2:
        vs = {
            k: _paired([r[method][k] for r in done], [r["extractive"][k] for r in done])
            for k in ("rouge_l", "faithfulness", "words")
        }
    return {method: agg, f"{method}_vs_extractive": vs}


def measure(
    manifest_path: str = "data/manifest.jsonl",
    *,
    max_papers: int = 0,
    n: int = DEFAULT_SENTENCES,
    max_words: int = DEFAULT_MAX_WORDS,
    llms: Mapping[str, ChatModel] | None = None,
    llm_sample: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """Summarise every parsed paper of the selection and measure it (module docstring).

    Args:
        llms: ``{model name: chat model}``; each adds the row ``llm:<model name>``.
        llm_sample: run the LLM rows on this many measurable papers drawn at random with
            ``seed`` (0: on all of them).
    """
    if llm_sample < 0:
        raise ConfigError(f"llm_sample={llm_sample}: must be >= 0 (0: every paper)")
    t0 = time.perf_counter()
    papers, parsed = corpus_papers(manifest_path, (), max_papers)
    titles = {p.arxiv_id: p.title for p in papers}
    ok = [p for p in parsed if p.ok]
    embedder, judge = default_embedder(), default_judge()
    timings = {"load_s": round(time.perf_counter() - t0, 2)}
    chats = {f"llm:{name}": chat for name, chat in (llms or {}).items()}
    eligible = sorted(pp.paper_id for pp in ok if measurable(pp))
    sample = set(sample_papers(eligible, llm_sample if chats else 0, seed))
    llm_settings = {}
    if chats:
        drawn = f"{len(sample)} of {len(eligible)} at random, seed {seed}"
        llm_settings["llm"] = {
            "models": sorted(chats),
            "papers": len(sample),
            "sample": drawn if len(sample) < len(eligible) else "every measurable paper",
        }
    t = time.perf_counter()
    rows, skipped = [], []
    for pp in ok:
        use = chats if pp.paper_id in sample else None
        row = paper_row(pp, embedder, judge, n, max_words, use, titles.get(pp.paper_id, ""))
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
            **llm_settings,
        },  # fmt: skip
        "n_papers": len(rows),
        "skipped": {"not_parsed": len(parsed) - len(ok), "no_abstract_or_body": skipped},
        "metrics": aggregate(rows),
        "papers": rows,
        "timings": timings,
    }


def write_json(doc: dict, path: Path) -> Path:
    """Write ``doc`` to ``path`` atomically (temporary file, then rename)."""
    return write_atomic(path, json.dumps(doc, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default="data/manifest.jsonl")
    ap.add_argument("--max-papers", type=int, default=0)
    ap.add_argument("--sentences", type=int, default=DEFAULT_SENTENCES)
    ap.add_argument("--max-words", type=int, default=DEFAULT_MAX_WORDS)
    ap.add_argument(
        "--llm",
        action="append",
        default=[],
        metavar="MODEL",
        help="add an LLM summary row for this model (provider:model; repeatable)",
    )
    ap.add_argument(
        "--llm-sample",
        type=int,
        default=0,
        help="LLM rows on this many random measurable papers (0: all)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the --llm-sample draw")
    ap.add_argument("--out", default="outputs/bench/summaries.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    llms = {}
    if args.llm:
        from rag.llm.factory import make_cache, make_chat_model
        from rag.llm.settings import LLMSettings

        # one single-thread llama.cpp instance: the summaries are asked one at a time, and two
        # threads that must meet at every token stall when the cores are shared
        settings = LLMSettings(local_workers=1, local_threads=1)
        llms = {m: make_chat_model(m, settings, cache=make_cache(settings)) for m in args.llm}
    doc = measure(args.manifest, max_papers=args.max_papers, n=args.sentences,
                  max_words=args.max_words, llms=llms, llm_sample=args.llm_sample,
                  seed=args.seed)  # fmt: skip
    out = write_json(doc, paths.resolve(args.out))
    m = doc["metrics"]
    for method in [*METHODS, *(f"llm:{x}" for x in llms)]:
        log.info("%s: rouge_l %.3f, faithfulness %.3f, words %.0f", method,
                 m[method]["rouge_l"]["mean"], m[method]["faithfulness"]["mean"],
                 m[method]["words"]["mean"])  # fmt: skip
    log.info("wrote %s (%d papers, %.1f s)", paths.display(out), doc["n_papers"],
             doc["timings"]["total_s"])  # fmt: skip


if __name__ == "__main__":
    main()
