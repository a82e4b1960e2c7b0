"""Index hygiene on the real corpus: what it drops, how well it reads, what retrieval gains.

Three measurements of :mod:`rag.text.hygiene` on the default profile's corpus (notebook 04's
chunking: fixed windows of 254 tokens, 32 overlapping):

1. **Counts**: chunks labelled ``toc``, ``references`` and ``body``, the dropped ones by paper,
   and how many of the gold questions' relevant chunks are among the dropped (qrels are built on
   every chunk, as notebook 04 builds them on the unfiltered index).
2. **Classifier validation** against ``data/hygiene/labels.jsonl``: labels written by reading each
   chunk of a seeded sample (:func:`labelling_sample`: every flagged chunk, the unflagged chunks
   nearest the thresholds, and a random draw of the rest), with Wilson 95 % intervals. A label
   whose chunk text no longer hashes to the recorded ``text_sha256`` is reported, not scored.
3. **Paired change** of every retrieval number of the report (nDCG@10, Recall@10, MRR@10 for
   dense, BM25, hybrid and multi-query; HyDE with ``--hyde``) with hygiene off and on, on the same
   gold questions and the same qrels: the mean difference (on - off), its bootstrap CI and a paired
   randomisation test, Holm-corrected over the family. The off run is checked against the
   committed ``outputs/default/04_retrieval/metrics.json``. With ``--scifact`` the SciFact rows are
   recomputed and compared too (SciFact abstracts are indexed by ``index_documents``, which no
   hygiene touches).

Command: ``python -m rag.bench.hygiene [--hyde] [--scifact]`` → ``outputs/bench/hygiene.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rag.errors import EvaluationError
from rag.text.hygiene import HYGIENE_VERSION, Label, signals, split_body

log = logging.getLogger(__name__)

#: Notebook 04's chunking defaults (the default profile keeps them).
CHUNKING = {"strategy": "fixed", "max_tokens": 254, "overlap_tokens": 32}
#: The retrievers of the default report that need no LLM.
RETRIEVERS = ("dense", "bm25", "hybrid", "multi-query")
#: The retrieval numbers compared.
METRICS = ("ndcg@10", "recall@10", "mrr@10")
LABELS_PATH = "data/hygiene/labels.jsonl"
COMMITTED_04 = "outputs/default/04_retrieval/metrics.json"
COMMITTED_PER_QUESTION = "outputs/default/04_retrieval/tables/per_question.csv"
OUT = "outputs/bench/hygiene.json"
#: Sizes of the labelling sample's strata (every flagged chunk is labelled as well).
N_NEAR, N_RANDOM, SAMPLE_SEED = 20, 40, 0


def text_sha256(text: str) -> str:
    """sha256 of a chunk's text (ties a label to the text that was read)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _nearness(text: str, section: str) -> float:
    """How close an unflagged chunk comes to a threshold: its larger line share among the kinds
    it has any signal of (TOC lines, strong reference signals)."""
    s = signals(text, section)
    return max(s.toc_share if s.toc_lines else 0.0, s.ref_share if s.ref_signals else 0.0)


def labelling_sample(
    chunks: Sequence[Any], n_near: int = N_NEAR, n_random: int = N_RANDOM, seed: int = SAMPLE_SEED
) -> list[tuple[str, Any]]:
    """``[(stratum, chunk)]``: every chunk the classifier flags, the ``n_near`` unflagged chunks
    nearest a threshold, and ``n_random`` of the rest drawn with ``seed`` (ids sorted first)."""
    kept, _ = split_body(chunks)
    kept_ids = {c.chunk_id for c in kept}
    flagged = [c for c in chunks if c.chunk_id not in kept_ids]
    near = sorted(kept, key=lambda c: (-_nearness(c.text, c.section), c.chunk_id))[:n_near]
    near_ids = {c.chunk_id for c in near}
    pool = sorted((c for c in kept if c.chunk_id not in near_ids), key=lambda c: c.chunk_id)
    rnd = random.Random(seed).sample(pool, min(n_random, len(pool)))
    return (
        [("flagged", c) for c in flagged]
        + [("near_miss", c) for c in near]
        + [("random", c) for c in rnd]
    )


def proportion(k: int, n: int) -> dict[str, Any]:
    """``k`` of ``n`` with the Wilson 95 % interval (informative at 0/n and n/n, where a
    bootstrap collapses); ``None`` bounds when ``n`` is 0."""
    from scipy.stats import binomtest

    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "wilson_low": None, "wilson_high": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return {"k": k, "n": n, "rate": k / n, "wilson_low": ci.low, "wilson_high": ci.high}


def load_labels(path: str = LABELS_PATH) -> list[dict[str, Any]]:
    """The hand labels, one dict per line (chunk_id, paper_id, stratum, text_sha256, label, why)."""
    from rag import paths
    from rag.jsonl import iter_jsonl

    return [obj for _, obj in iter_jsonl(paths.resolve(path))]


def validate(chunks: Sequence[Any], labels: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The classifier against hand labels: per-label confusion, precision and recall of
    "dropped" (not body), per stratum, and what the random stratum says of the unlabelled rest."""
    from rag.text.hygiene import classify

    by_id = {c.chunk_id: c for c in chunks}
    pairs: list[tuple[str, Label, Label]] = []
    stale: list[str] = []
    for lab in labels:
        c = by_id.get(lab["chunk_id"])
        if c is None or text_sha256(c.text) != lab["text_sha256"]:
            stale.append(lab["chunk_id"])
            continue
        pairs.append((lab["stratum"], lab["label"], classify(c.text, c.section)))
    confusion = Counter(f"{h}->{p}" for _, h, p in pairs)
    tp = sum(h != "body" and p != "body" for _, h, p in pairs)
    fp = sum(h == "body" and p != "body" for _, h, p in pairs)
    fn = sum(h != "body" and p == "body" for _, h, p in pairs)
    strata: dict[str, Any] = {}
    for name in ("flagged", "near_miss", "random"):
        rows = [(h, p) for s, h, p in pairs if s == name]
        strata[name] = {
            "labelled": len(rows),
            "agree": proportion(sum(h == p for h, p in rows), len(rows)),
            "missed_non_body": sum(h != "body" and p == "body" for h, p in rows),
        }
    kept, _ = split_body(chunks)
    n_rest = len(kept) - strata["near_miss"]["labelled"]
    rnd = strata["random"]
    miss = proportion(rnd["missed_non_body"], rnd["labelled"])
    return {
        "labelled": len(labels),
        "scored": len(pairs),
        "stale_labels": stale,
        "confusion_human_to_classifier": dict(sorted(confusion.items())),
        "label_agreement": proportion(sum(h == p for _, h, p in pairs), len(pairs)),
        "dropped_precision": proportion(tp, tp + fp),
        "dropped_recall_on_sample": proportion(tp, tp + fn),
        "strata": strata,
        "unlabelled_rest": {
            "chunks": n_rest,
            "miss_rate_random_stratum": miss,
            "missed_chunks_upper_bound": (
                round(miss["wilson_high"] * n_rest) if miss["wilson_high"] is not None else None
            ),
        },
    }


def counts(chunks: Sequence[Any]) -> dict[str, Any]:
    """Chunks per label, the dropped ones by paper, and their ids with labels."""
    from rag.text.hygiene import classify

    labels = {c.chunk_id: classify(c.text, c.section) for c in chunks}
    dropped = [c for c in chunks if labels[c.chunk_id] != "body"]
    per_paper: dict[str, dict[str, int]] = {}
    for c in dropped:
        row = per_paper.setdefault(c.paper_id, {"toc": 0, "references": 0})
        row[labels[c.chunk_id]] += 1
    return {
        "chunks": len(chunks),
        "by_label": dict(Counter(labels.values())),
        "dropped_by_paper": dict(sorted(per_paper.items())),
        "dropped": [
            {"chunk_id": c.chunk_id, "paper_id": c.paper_id, "label": labels[c.chunk_id]}
            for c in dropped
        ],
    }


def paired_changes(
    off: Any, on: Any, names: Sequence[str], metrics: Sequence[str] = METRICS, seed: int = 0
) -> dict[str, Any]:
    """``{retriever: {metric: {off, on, diff, ci_low, ci_high, p_value, p_holm, n,
    questions_changed, changed_off_on}}}`` (the last: ``{qid: [off, on]}`` when at most ten):
    hygiene on minus off on the same questions (``off``/``on`` are
    :class:`rag.evaluation.compare.Comparison`), Holm-corrected over every retriever x metric."""
    from rag.evaluation.stats import correct, paired_test

    keys: list[tuple[str, str]] = []
    results = []
    changed: list[dict[str, list[float]]] = []
    for name in names:
        a, b = on.evals[name].per_query, off.evals[name].per_query
        if list(a.index) != list(b.index):
            raise EvaluationError(f"{name}: the two runs scored different questions")
        for m in metrics:
            keys.append((name, m))
            results.append(paired_test(a[m].to_numpy(), b[m].to_numpy(), seed=seed))
            moved = a.index[a[m] != b[m]]
            changed.append({q: [float(b.at[q, m]), float(a.at[q, m])] for q in moved})
    results = correct(results, "holm")
    out: dict[str, Any] = {}
    for (name, m), r, n_changed in zip(keys, results, changed, strict=True):
        out.setdefault(name, {})[m] = {
            "off": r.mean_b,
            "on": r.mean_a,
            "diff": r.diff,
            "ci_low": r.ci.low,
            "ci_high": r.ci.high,
            "p_value": r.p_value,
            "p_holm": r.p_adjusted,
            "n": r.n,
            "questions_changed": len(n_changed),
            "changed_off_on": n_changed if len(n_changed) <= 10 else "more than 10",
        }
    return out


def check_committed(
    metrics: Mapping[str, Any], committed: Mapping[str, Any], names: Sequence[str]
) -> dict[str, Any]:
    """Largest absolute difference between recomputed and committed means, per retriever."""
    out: dict[str, Any] = {}
    for name in names:
        if name not in committed or "not_run" in committed[name]:
            out[name] = None
            continue
        out[name] = max(abs(metrics[name][m]["mean"] - committed[name][m]["mean"]) for m in METRICS)
    return out


def _top(scores: Mapping[str, float], k: int) -> list[str]:
    """The ``k`` best-scored ids (ties by id, as the evaluation ranks them)."""
    return sorted(scores, key=lambda d: (-scores[d], d))[:k]


def questions_differing(
    comparison: Any, per_question_csv: str, scope: str, names: Sequence[str]
) -> dict[str, int | None]:
    """Per retriever, the questions whose nDCG@10, Recall@10 or MRR@10 differs from the committed
    per-question table (which is rounded to six decimals, hence the 1e-5 tolerance)."""
    import pandas as pd

    from rag import paths

    table = pd.read_csv(paths.resolve(per_question_csv), dtype={"qid": str})
    out: dict[str, int | None] = {}
    for name in names:
        rows = table[(table.scope == f"{scope}/{name}") & table.metric.isin(METRICS)]
        if rows.empty:
            out[name] = None
            continue
        committed = rows.pivot(index="qid", columns="metric", values="value")
        mine = comparison.evals[name].per_query[list(METRICS)]
        diff = (mine - committed.reindex(index=mine.index, columns=list(METRICS))).abs()
        out[name] = int((diff.fillna(1.0) > 1e-5).any(axis=1).sum())
    return out


def measure(*, hyde: bool = False, scifact: bool = False, seed: int = 0) -> dict[str, Any]:
    """Everything the module docstring lists, as one JSON-ready dict."""
    from rag import paths
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.compare import build_retrievers, grade, run_all
    from rag.evaluation.gold import chunk_qrels, gold_for_papers, gold_queries, load_gold
    from rag.index.build import index_corpus
    from rag.retrieval.retrievers import Components, RetrievalSettings
    from rag.text.chunk import chunk_settings
    from rag.text.chunk_cache import chunk_corpus

    t0 = time.perf_counter()
    papers, parsed = corpus_papers("data/manifest.jsonl", (), 0)
    chunks = chunk_corpus(parsed, chunk_settings(CHUNKING))
    kept, _ = split_body(chunks)
    res: dict[str, Any] = {
        "hygiene_version": HYGIENE_VERSION,
        "chunking": CHUNKING,
        "papers": len(parsed),
        "counts": counts(chunks),
    }

    gold = gold_for_papers(load_gold(paths.resolve("../shared/gold/dev.jsonl")), {
        p.arxiv_id for p in papers
    })  # fmt: skip
    qrels, report = chunk_qrels(gold, chunks, threshold=90.0)
    qrels_kept, _ = chunk_qrels(gold, kept, threshold=90.0)
    dropped = {c.chunk_id for c in chunks} - {c.chunk_id for c in kept}
    in_dropped = {q: sorted(d for d in rel if d in dropped) for q, rel in qrels.items()}
    res["gold"] = {
        "questions": len(qrels),
        "relevant_chunks": sum(len(r) for r in qrels.values()),
        "relevant_chunks_dropped": sum(len(v) for v in in_dropped.values()),
        "questions_with_a_dropped_relevant_chunk": sorted(q for q, v in in_dropped.items() if v),
        "qrels_same_on_kept_chunks": qrels == qrels_kept,
        "qrels_report": report.summary(),
    }

    labels = load_labels()
    sample = labelling_sample(chunks)
    res["validation"] = {
        **validate(chunks, labels),
        "sample_redrawn_equals_labelled": [c.chunk_id for _, c in sample]
        == [lab["chunk_id"] for lab in labels],
    }

    names = [*RETRIEVERS, *(["hyde"] if hyde else [])]
    llm = None
    if hyde:
        from rag.llm.factory import make_cache, make_chat_model

        llm = make_chat_model("smollm2-135m", cache=make_cache())
    settings = RetrievalSettings(k=100, hybrid_pool=100, rerank_pool=30, n_variants=2)
    queries = {q: t for q, t in gold_queries(gold).items() if q in qrels}
    graded = {}
    for on in (False, True):
        ix = index_corpus(
            parsed, chunk_settings({**CHUNKING, "index_hygiene": on}), embedder="minilm"
        )
        comps = Components(
            store=ix.store, embedder=ix.embedder, dense_index=ix.dense, bm25_index=ix.bm25,
            llm=llm,
        )  # fmt: skip
        retrievers, skipped = build_retrievers(names, comps, settings)
        if skipped:
            raise EvaluationError(f"retrievers not built: {skipped}")
        runs = run_all(retrievers, queries, 100)
        graded[on] = grade("corpus_gold/chunk", runs, qrels, seed=seed)
        res[f"index_hygiene_{str(on).lower()}"] = {
            "indexed_chunks": len(ix.chunks),
            "stats": {k: v for k, v in ix.stats.items() if "hygiene" in k or k.startswith("chunk")},
            "metrics": {
                n: {m: graded[on].evals[n].aggregate[m].to_dict() for m in METRICS} for n in names
            },
        }
    res["paired_on_minus_off"] = paired_changes(graded[False], graded[True], names, seed=seed)
    off_runs = graded[False].runs
    res["dropped_chunks_in_top10_off"] = {
        n: sum(bool(dropped & set(_top(d, 10))) for d in off_runs[n].values()) for n in names
    }

    committed = json.loads(paths.resolve(COMMITTED_04).read_text(encoding="utf-8"))
    res["off_vs_committed_04_max_abs_diff"] = check_committed(
        res["index_hygiene_false"]["metrics"], committed["corpus_gold"]["chunk"], names
    )
    res["off_vs_committed_04_questions_differing"] = questions_differing(
        graded[False], COMMITTED_PER_QUESTION, "corpus_gold/chunk", names
    )
    if scifact:
        res["scifact"] = _scifact(committed["scifact"], seed)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["command"] = (
        "python -m rag.bench.hygiene"
        + (" --hyde" if hyde else "")
        + (" --scifact" if scifact else "")
    )
    return res


def _scifact(committed: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """SciFact dense/BM25/hybrid/multi-query recomputed beside the committed rows."""
    from rag.evaluation import scifact
    from rag.evaluation.compare import build_retrievers, grade, run_all
    from rag.index.build import index_documents
    from rag.retrieval.retrievers import Components, RetrievalSettings

    corpus, queries, qrels = scifact.load_scifact(None)
    sf = index_documents(corpus, "scifact", embedder="minilm")
    comps = Components(
        store=sf.store, embedder=sf.embedder, dense_index=sf.dense, bm25_index=sf.bm25
    )
    settings = RetrievalSettings(k=100, hybrid_pool=100, rerank_pool=30, n_variants=2)
    retrievers, _ = build_retrievers(RETRIEVERS, comps, settings)
    cmp = grade("scifact", run_all(retrievers, queries, 100), qrels, seed=seed)
    differing = questions_differing(cmp, COMMITTED_PER_QUESTION, "scifact", RETRIEVERS)
    metrics = {n: {m: cmp.evals[n].aggregate[m].to_dict() for m in METRICS} for n in RETRIEVERS}
    return {
        "queries": len(queries),
        "docs": len(corpus),
        "indexed_chunks": len(sf.chunks),
        "hygiene_keys_in_stats": sorted(k for k in sf.stats if "hygiene" in k),
        "metrics": metrics,
        "max_abs_diff_vs_committed_04": check_committed(metrics, committed, RETRIEVERS),
        "questions_differing_from_committed_04": differing,
    }


def print_paired(paired: Mapping[str, Any]) -> None:
    """One line per retriever and metric of a paired on-minus-off comparison."""
    for name, ms in paired.items():
        for m, d in ms.items():
            print(
                f"{name:<12}{m:<10} off {d['off']:.4f} on {d['on']:.4f} diff {d['diff']:+.4f} "
                f"[{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] p {d['p_value']:.3g} "
                f"(Holm {d['p_holm']:.3g}), {d['questions_changed']} questions changed"
            )


def print_summary(res: Mapping[str, Any]) -> None:
    """The counts, the validation and the paired changes, one line each."""
    c = res["counts"]
    g = res["gold"]
    print(
        f"chunks {c['chunks']}: {c['by_label']}; gold relevant chunks dropped: "
        f"{g['relevant_chunks_dropped']} of {g['relevant_chunks']}"
    )
    v = res["validation"]
    p, r = v["dropped_precision"], v["dropped_recall_on_sample"]
    print(
        f"labels {v['scored']} scored: precision {p['k']}/{p['n']} "
        f"[{p['wilson_low']:.3f}, {p['wilson_high']:.3f}], recall on sample {r['k']}/{r['n']} "
        f"[{r['wilson_low']:.3f}, {r['wilson_high']:.3f}]"
    )
    print_paired(res["paired_on_minus_off"])
    print(f"off vs committed 04, max |mean diff|: {res['off_vs_committed_04_max_abs_diff']}")
    print(
        f"questions with a dropped chunk in the top 10, off: {res['dropped_chunks_in_top10_off']}"
    )
    differing = res["off_vs_committed_04_questions_differing"]
    print(f"off vs committed 04, questions differing: {differing}")
    if "scifact" in res:
        sf = res["scifact"]
        print(
            f"SciFact vs committed 04: {sf['max_abs_diff_vs_committed_04']}, questions differing "
            f"{sf['questions_differing_from_committed_04']}"
        )


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from rag.bench import write_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hyde", action="store_true", help="also HyDE (158 SmolLM2 generations)")
    ap.add_argument("--scifact", action="store_true", help="recompute the SciFact rows too")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    res = measure(hyde=args.hyde, scifact=args.scifact)
    print_summary(res)
    print(f"written: {write_json(res, args.out)}")
    return res


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
