"""Readings of notebook 04 (retrieval): SciFact reproduction, the gold ranking, its checks."""

from __future__ import annotations

from typing import Any

from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md


def scifact_reproduction(
    block: dict[str, Any], n_queries: int, published: dict[str, float], full: int = 300
) -> Any:
    """Whether BM25 and dense reproduce the published SciFact nDCG@10 (full test set only)."""
    rows = {
        n: block[n]["ndcg@10"]["mean"] for n in ("bm25", "dense") if n in block and n in published
    }
    measured = join([f"{n} {v:.3f} (published {published[n]:.3f})" for n, v in rows.items()])
    if n_queries < full:
        return md(
            f"**Reading.** This profile grades a slice of {n_queries} of the {full} SciFact test "
            f"queries: {measured}. The published numbers apply to the full set only, so the check "
            "is not made here."
        )
    ok = {n: abs(v - published[n]) <= 0.01 for n, v in rows.items()}
    verdict = (
        "both within ±0.01 of the published table: **the measurement is reproduced**, and the "
        "other rows can be trusted to the same degree"
        if all(ok.values())
        else f"**not reproduced** for {join([n for n, g in ok.items() if not g])} "
        "(off by more than 0.01)"
    )
    graded = [n for n in block if not n.startswith("_") and "ndcg@10" in block[n]]  # not "not_run"
    best = max(graded, key=lambda n: block[n]["ndcg@10"]["mean"])
    b = CI.from_dict(block[best]["ndcg@10"])
    return md(
        f"**Reading.** On all {n_queries} SciFact test queries: {measured} — {verdict}. Highest "
        f"row: {best} {interval(b)}."
    )


def components(reranker: str | None, compared: list[str], llm: str, not_run: dict[str, str]) -> Any:
    """What this run's second stage and LLM actually are (the method text describes the default).

    ``reranker`` is None when the profile has no ``rerank`` row (nothing was loaded for it).
    ``not_run`` maps a row to why it did not run; a reason may hold its own parentheses, so it
    follows a dash rather than being bracketed.
    """
    return md(
        "**This run:** "
        + (f"the `rerank` row is `{reranker}`" if reranker else "no `rerank` row")
        + (
            f"; also compared over the same pool: {join([f'`{c}`' for c in compared])}"
            if compared
            else ""
        )
        + f"; HyDE and LLM variants use `{llm}`."
        + (
            " Not run: " + "; ".join(f"`{k}` — {v}" for k, v in not_run.items()) + "."
            if not_run
            else ""
        )
    )


def gold_file(summary: dict[str, Any], n_in_corpus: int) -> str:
    """One line on the gold file: how many questions of which kind, how many fall on this corpus."""
    kinds = ", ".join(
        f"{v} {k.split(':', 1)[1]}" for k, v in summary.items() if k.startswith("kind:")
    )
    return (
        f"gold file: {summary.get('total')} questions ({summary.get('answerable')} answerable; "
        f"{kinds}) → {n_in_corpus} whose papers are all in this corpus"
    )


def _real_vs(pairwise: Any, name: str) -> tuple[list[str], list[str]]:
    """Retrievers that ``name`` beats / loses to by a real difference."""
    beats, loses = [], []
    for _, r in pairwise.iterrows():
        if not r["significant"] or name not in (r["a"], r["b"]):
            continue
        other = r["b"] if r["a"] == name else r["a"]
        ahead = (r["diff"] > 0) == (r["a"] == name)
        (beats if ahead else loses).append(other)
    return beats, loses


def gold_ranking(chunk: dict[str, Any], paper: dict[str, Any], pairwise: Any) -> Any:
    """The retrievers ranked on the corpus gold: the leader, whom it beats, the spread."""
    names = [n for n in chunk if not n.startswith("_")]
    order = sorted(names, key=lambda n: -chunk[n]["ndcg@10"]["mean"])
    best = order[0]
    b = CI.from_dict(chunk[best]["ndcg@10"])
    beats, loses = _real_vs(pairwise, best)
    ties = [n for n in order[1:] if n not in beats]
    spread = chunk[order[0]]["ndcg@10"]["mean"] - chunk[order[-1]]["ndcg@10"]["mean"]
    pspread = [paper[n]["ndcg@10"]["mean"] for n in names if n in paper]
    text = (
        f"**Reading.** {len(names)} retrievers on n = {chunk[best]['n']} questions. Chunk level: "
        f"**{best}** scores highest, nDCG@10 {interval(b)}; "
        + (
            f"it beats {join(beats)} by a real difference"
            if beats
            else "it beats no other retriever by a real difference"
        )
        + (f", and is not distinguishable from {join(ties)}" if ties else "")
        + f". The rows span {spread:.3f} nDCG@10."
    )
    if pspread:
        text += (
            f" Paper level (the right paper, any passage) they span {min(pspread):.3f}–"
            f"{max(pspread):.3f}: near its ceiling, so it hides the differences the chunk "
            "level shows."
        )
    return md(text)


def pairwise_reading(pairwise: Any, metric: str = "nDCG@10") -> Any:
    """The pairs that differ for real (Holm-corrected p and a CI excluding 0)."""
    real = pairwise[pairwise["significant"].astype(bool)]
    lines = []
    for _, r in real.iterrows():
        win, lose = (r["a"], r["b"]) if r["diff"] > 0 else (r["b"], r["a"])
        lo, hi = sorted((abs(r["ci_low"]), abs(r["ci_high"])))
        lines.append(
            f"{win} > {lose} by {abs(r['diff']):.3f} (95 % CI {lo:.3f}–{hi:.3f}, "
            f"Holm p = {r['p_adjusted']:.3f})"
        )
    n = int(pairwise["n"].iloc[0]) if len(pairwise) else 0
    text = (
        f"**Reading.** {len(real)} of {len(pairwise)} pairs differ for real on n = {n} questions "
        "(Holm-corrected p < 0.05 *and* a CI that excludes 0)"
        + (": " + "; ".join(lines) + "." if lines else ".")
        + f" Every other pair is not distinguishable on this many questions. The full table "
        f"(`corpus_gold_pairwise.csv`) keeps every pair with its {metric} difference."
    )
    return md(text)


def pool_recall(ceiling: Any, pool: int, depth: int, first_stage: str = "hybrid") -> Any:
    """The share of questions with a relevant chunk in the pool a reranker reorders."""
    c = ceiling.set_index(["retriever", "depth"])["any_relevant_in_pool"]
    if (first_stage, pool) not in c:
        return md("**Reading.** The pool-recall ceiling was not measured for the first stage.")
    at_pool, at_depth = c[(first_stage, pool)], c.get((first_stage, depth))
    n = int(ceiling["n"].iloc[0])
    return md(
        f"**Reading.** {at_pool:.3f} of the n = {n} questions have at least one relevant chunk in "
        f"{first_stage}'s top {pool} (the pool the reranker reorders)"
        + (f", {at_depth:.3f} in its top {depth}" if at_depth is not None else "")
        + f": no second stage over this pool can find evidence for the other "
        f"{1 - at_pool:.1%} of questions."
    )


def breakdown_reading(breakdown: Any, retriever: str) -> Any:
    """``retriever``'s nDCG@10 per question group, and which groups are too small to rank."""
    b = breakdown[breakdown["retriever"] == retriever]
    parts = [
        f"{r['by']} = {r['group']}: {interval(CI.from_dict(r))}, n = {int(r['n'])}"
        for _, r in b.iterrows()
    ]
    small = [f"{r['group']}" for _, r in b.iterrows() if r["n"] < 20]
    return md(
        f"**Reading.** {retriever}'s chunk nDCG@10 by question group — {'; '.join(parts)}."
        + (
            f" Groups with fewer than 20 questions ({join(small)}) have intervals too wide to rank."
            if small
            else ""
        )
    )


def wins_reading(wins: Any, baseline: str) -> Any:
    """Per-question wins, losses and ties of every retriever against ``baseline``."""
    rows = wins[(wins["a"] == baseline) | (wins["b"] == baseline)]
    parts = []
    for _, r in rows.iterrows():
        other = r["b"] if r["a"] == baseline else r["a"]
        w_other = r["b wins"] if r["a"] == baseline else r["a wins"]
        w_base = r["a wins"] if r["a"] == baseline else r["b wins"]
        parts.append(f"{other} wins {w_other}, loses {w_base}, ties {r['ties']}")
    return md(
        f"**Reading.** Per question against {baseline} (nDCG@10): {'; '.join(parts)}. Ties are "
        "mostly questions where both find nothing or the same chunk first: the averages above "
        "rest on the minority of questions where the retrievers disagree."
    )


def qasper_check(
    qasper: dict[str, Any], gold_chunk: dict[str, Any], metric: str = "recall@10"
) -> Any:
    """Whether the corpus gold's best retriever is also among the best on human QASPER labels."""
    names = [n for n in qasper if not n.startswith("_") and n in gold_chunk and metric in qasper[n]]
    if not names:
        return md("**Reading.** No QASPER question carries evidence on these papers: no check.")
    gold_best = max(names, key=lambda n: gold_chunk[n]["ndcg@10"]["mean"])
    q_best = max(names, key=lambda n: qasper[n][metric]["mean"])
    g, q = CI.from_dict(qasper[gold_best][metric]), CI.from_dict(qasper[q_best][metric])
    n = qasper[gold_best]["n"]
    passed = gold_best == q_best or g.overlaps(q)
    return md(
        f"**Reading.** The check: is the retriever that the corpus gold ranks first "
        f"({gold_best}) also among the best on the human QASPER labels? On n = {n} human questions "
        f"its {metric} is {interval(g)}; the best there is {q_best} "
        f"with {interval(q)}. "
        + (
            "**The check passes**: the two are not distinguishable, so the gold ranking is not "
            "contradicted by human labels"
            if passed
            else "**The check fails**: human labels rank the gold's winner clearly lower"
        )
        + f" — with only {n} questions the intervals are wide, so this is a sanity check, "
        "not a leaderboard."
    )


def proxy_reading(proxy: Any) -> Any:
    """Why the topical category proxy cannot stand in for retrieval quality."""
    cp, nd = proxy["category_precision@5"], proxy["chunk nDCG@10"]
    if cp.nunique() < 2 or len(proxy) < 3:
        agree = "the proxy is the same for every retriever, so it cannot rank them at all"
    else:
        agree = f"the two rank the retrievers with Spearman ρ = {cp.rank().corr(nd.rank()):.2f}"
    return md(
        f"**Reading.** The topical proxy ranges only {cp.min():.2f}–{cp.max():.2f} "
        f"(spread {cp.max() - cp.min():.3f}) across {len(proxy)} retrievers, while chunk nDCG@10 "
        f"ranges {nd.min():.3f}–{nd.max():.3f}; {agree}. Most of the corpus shares a few "
        "categories, so any on-topic paper scores on the proxy whether or not it holds the "
        "evidence: it should not be reported as retrieval quality."
    )


def llm_cache_label(meter: dict[str, Any], questions: str = "gold questions") -> str:
    """Legend label of the first latency pass (on ``questions``): cold only when LLM calls were
    actually made."""
    total = meter.get("total", {})
    if not total.get("calls"):
        return f"{questions} (no LLM calls)"
    if total.get("fresh_calls", 0) == 0:
        return f"{questions} (LLM cache warm)"
    return f"{questions} ({total['fresh_calls']} fresh LLM calls in this notebook)"


def latency_reading(latency: Any, meter: dict[str, Any], questions: str = "gold questions") -> Any:
    """Median latency per retriever (on ``questions``) and how many LLM calls were fresh or
    cached."""
    first = latency[latency["dataset"] == latency["dataset"].iloc[0]]
    parts = [f"{r['retriever']} {r['p50']:.1f} ms" for _, r in first.sort_values("p50").iterrows()]
    total = meter.get("total", {})
    the = "" if questions.startswith("your ") else "the "  # "on your questions", "on the gold ..."
    return md(
        f"**Reading.** Median latency per query on {the}{questions}: {join(parts)}. "
        f"LLM calls this notebook: {total.get('calls', 0)}, of which {total.get('fresh_calls', 0)} "
        f"fresh and {total.get('cached_calls', 0)} from the disk cache, cost "
        f"${total.get('cost_usd', 0):.4f}"
        + (
            " — so HyDE's and multi-query's latencies here are cache lookups, not model time."
            if total.get("calls") and not total.get("fresh_calls")
            else "."
        )
    )


def answer_retrieval(chunk: dict[str, Any], pairwise: Any) -> str:
    """The index page's one sentence for notebook 04."""
    names = [n for n in chunk if not n.startswith("_")]
    best = max(names, key=lambda n: chunk[n]["ndcg@10"]["mean"])
    b = CI.from_dict(chunk[best]["ndcg@10"])
    beats, _ = _real_vs(pairwise, best)
    ties = [n for n in names if n != best and n not in beats]
    return (
        f"{best} ranks first on the corpus gold with chunk nDCG@10 "
        f"{interval(b)} "
        f"(n = {chunk[best]['n']}); it beats {join(beats) or 'no retriever'} by a real difference "
        f"and is not distinguishable from {join(ties) or 'none'}."
    )
