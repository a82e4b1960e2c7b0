"""Readings computed, not typed: each section's finding stated from the numbers it records.

A notebook section ends with ``display(readings.<section>(...))`` fed the same values that go into
``metrics.json``, so the prose cannot drift from the numbers when a parameter or the corpus changes.
Each function returns an ``IPython.display.Markdown``; ``answer_*`` functions return the one
sentence the index page shows for the notebook. Fixed wording is for method and caveats only.

Why this module is long: one short function per reading of five notebooks, kept together so their
number formatting (3 significant digits, "95 % CI a–b", n) is the same everywhere.
"""

from __future__ import annotations

from typing import Any


def _md(text: str) -> Any:
    from IPython.display import Markdown

    return Markdown(text)


def num(v: Any, digits: int = 3) -> str:
    """A number for people: ``None`` as "–", floats to ``digits`` decimals, ints with separators."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    try:
        return f"{float(v):.{digits}f}"
    except (TypeError, ValueError):
        return str(v)


def ci(mean: Any, low: Any, high: Any, digits: int = 3) -> str:
    """``0.975 (95 % CI 0.875–1.000)``."""
    if low is None or high is None:
        return num(mean, digits)
    return f"{num(mean, digits)} (95 % CI {num(low, digits)}–{num(high, digits)})"


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# --- 01 ingest ---------------------------------------------------------------------------------


def ingest_counts(papers: dict[str, int], pages: int) -> Any:
    complete = papers["parsed"] == papers["requested"]
    text = (
        f"**Reading.** {papers['parsed']} of {papers['requested']} requested papers were parsed "
        f"({pages:,} pages): {papers['failed']} failed to download, "
        f"{papers['parse_failed']} failed "
        f"to parse and {papers['changed']} arrived with a sha256 different from the pin. "
    )
    text += (
        "The corpus is complete and byte-identical to the pin."
        if complete and not papers["changed"]
        else "The corpus is **not** complete or not identical to the pin: the rows above say why."
    )
    return _md(text)


def block_kinds(by_kind: Any) -> Any:
    share = by_kind["share_of_chars"].to_dict()
    top = max(share, key=share.get)
    excluded = [k for k in ("references", "header_footer") if k in share]
    text = (
        f"**Reading.** `{top}` blocks carry {share[top]:.0%} of the parsed characters"
        + (
            "; " + _join([f"`{k}` {share[k]:.1%}" for k in excluded]) + " are kept out of chunks"
            if excluded
            else ""
        )
        + f". {len(by_kind)} block kinds in all; a paper with few body characters per page would "
        "point to an image-only or badly parsed PDF."
    )
    return _md(text)


def parse_quality(evidence_found: dict[str, Any], found_all: dict[str, Any], target: float) -> Any:
    parts = [
        f"{src} {v['found']}/{v['n']} = "
        + ci(v["found_rate"], v["ci"]["ci_low"], v["ci"]["ci_high"])
        for src, v in evidence_found.items()
    ]
    if not found_all:
        return _md("**Reading.** No evidence passage falls on the selected papers.")
    rate, n = found_all["found_rate"], found_all["n"]
    verdict = "meets" if rate >= target else "misses"
    text = (
        f"**Reading.** Of {n} evidence passages on these papers, {found_all['found']} were "
        "found in "
        f"the parsed text: **{rate:.3f}** overall, which {verdict} the {target:g} target. By "
        f"source: {_join(parts)}. {n - found_all['found']} miss(es) are listed below with their "
        "best similarity. The found rate is the ceiling for everything downstream."
    )
    if found_all.get("on_page_rate") is not None:
        text += f" Gold quotes found on their annotated page: {found_all['on_page_rate']:.3f}."
    return _md(text)


def answer_ingest(papers: dict[str, int], pages: int, found_all: dict[str, Any]) -> str:
    rate = found_all.get("found_rate")
    return (
        f"{papers['parsed']}/{papers['requested']} pinned papers arrived and parsed ({pages:,} "
        f"pages, {papers['changed']} changed); the parser recovers "
        + (
            f"{rate:.3f} of {found_all['n']} human and gold evidence passages."
            if rate is not None
            else "no evidence passages (none on these papers)."
        )
    )


# --- 02 chunk ----------------------------------------------------------------------------------


def parameter_of(profile: str, notebook: str, key: str) -> Any:
    """The value ``notebook`` runs with on ``profile``: the profile's delta, else the default of
    its ``parameters`` cell (so 02 can name the chunking that 03–05 index)."""
    import ast

    from rag.report import profiles

    resolved = profiles.resolve_parameters(profile, f"outputs/{profile}").get(notebook, {})
    if key in resolved:
        return resolved[key]
    nb = next(p for p in profiles.notebook_paths() if p.stem == notebook)
    return ast.literal_eval(profiles.declared_parameters(nb)[key]["default"])


def chunk_sizes(sizes: Any) -> Any:
    parts = [
        f"`{s}` {int(r['chunks']):,} chunks (median {r['median_tokens']:.0f} tokens, p95 "
        f"{r['p95_tokens']:.0f}, max {int(r['max_tokens'])})"
        for s, r in sizes.iterrows()
    ]
    fewest = sizes["chunks"].idxmin()
    return _md(
        f"**Reading.** {_join(parts)}. `{fewest}` makes the fewest chunks, i.e. the fewest vectors "
        "to embed and search; `fixed` windows sit at the cap by construction, sentence and section "
        "chunks end at sentence boundaries and run shorter."
    )


def chunk_choice(survival: Any, sizes: Any, indexed: str) -> tuple[str, str, list[str]]:
    """(the strategy this evidence picks, why, the strategies tied with the best) — the best
    intact rate, ties (overlapping CIs) broken by the fewest chunks."""
    best = survival["intact_rate"].idxmax()
    b = (survival.loc[best, "ci_low"], survival.loc[best, "ci_high"])
    tied = [
        s
        for s in survival.index
        if _overlap(b, (survival.loc[s, "ci_low"], survival.loc[s, "ci_high"]))
    ]
    pick = min(tied, key=lambda s: sizes.loc[s, "chunks"])
    if len(tied) > 1:
        why = (
            f"{_join([f'`{s}`' for s in tied])} are not distinguishable on intact evidence (their "
            f"95 % CIs overlap), so the tie goes to the fewest chunks: `{pick}`"
        )
    else:
        why = f"`{pick}` keeps the most evidence intact, clear of the others' intervals"
    return pick, why, tied


def evidence_intact(survival: Any, sizes: Any, indexed: str) -> Any:
    n = int(survival["quotes"].iloc[0]) if len(survival) else 0
    parts = [
        f"`{s}` {int(r['intact'])}/{int(r['quotes'])} = "
        + ci(r["intact_rate"], r["ci_low"], r["ci_high"])
        for s, r in survival.iterrows()
    ]
    pick, why, _ = chunk_choice(survival, sizes, indexed)
    text = f"**Reading.** Gold quotes intact inside one chunk (n = {n}): {_join(parts)}. {why}. "
    if pick == indexed:
        text += f"Notebooks 03–05 index `{indexed}` (their `chunk_strategy`), the same choice."
    else:
        text += (
            f"Notebooks 03–05 index `{indexed}` (their `chunk_strategy` parameter), not `{pick}`: "
            "on this profile the rule above would pick the other one."
        )
    return _md(text)


def example_chunks(quote: str | None, examples: list[dict[str, Any]], width: int = 420) -> Any:
    if quote is None:
        return _md("_No gold quote falls on these papers: no example._")
    lines = [
        f"**The quote** (first gold quote in gold-file order): “{' '.join(quote.split())}”",
        "",
    ]
    q = " ".join(quote.split())
    for e in examples:
        text = " ".join(e["text"].split())
        at = text.find(q)
        if at >= 0:  # a window around the quote, the quote in bold
            lo, hi = max(0, at - width // 3), min(len(text), at + len(q) + width // 3)
            text = (
                ("… " if lo else "")
                + text[lo:at]
                + f"**{q}**"
                + text[at + len(q) : hi]
                + (" …" if hi < len(text) else "")
            )
        elif len(text) > width:
            text = text[:width].rsplit(" ", 1)[0] + " …"
        has = "contains the quote" if e["contains_quote"] else "does **not** contain it"
        lines += [
            f"- **`{e['strategy']}`** — chunk `{e['chunk_id']}`, section “{e['section'] or '–'}”, "
            f"pages {e['pages']}, {e['tokens']} tokens; {has}:",
            f"  > {text}",
        ]
    lines += ["", "**Reading.** The same quote sits in a chunk of each strategy; how much context "
              "surrounds it is what differs."]  # fmt: skip
    return _md("\n".join(lines))


def answer_chunk(survival: Any, sizes: Any, indexed: str) -> str:
    pick, _, tied = chunk_choice(survival, sizes, indexed)
    r = survival.loc[pick]
    verdict = (
        f"{_join([f'`{s}`' for s in tied])} are not distinguishable on intact evidence"
        if len(tied) > 1
        else "the others lose evidence"
    )
    return (
        f"`{pick}` keeps {ci(r['intact_rate'], r['ci_low'], r['ci_high'])} of {int(r['quotes'])} "
        f"gold quotes inside one chunk with the fewest chunks "
        f"({int(sizes.loc[pick, 'chunks']):,}); "
        f"{verdict}, and notebooks 03–05 index `{indexed}`."
    )


# --- 03 index ----------------------------------------------------------------------------------


def index_build(stats: dict[str, Any], n_chunks: int, n_papers: int) -> Any:
    cached = stats.get("dense_from_cache")
    mem = stats.get("dense_memory_bytes", 0) / 2**20
    return _md(
        f"**Reading.** {n_chunks:,} chunks from {n_papers} papers. The dense vectors take "
        f"{mem:.2f} MB ({n_chunks:,} × 384 float32); "
        + (
            "the indexes were **loaded from the cache** (nothing re-embedded), so these timings "
            "measure loading, not building."
            if cached
            else "the indexes were built in this run."
        )
    )


def embedding_throughput(tp: dict[str, Any], target: float = 0.8) -> Any:
    if not tp:
        return _md("**Reading.** Throughput not measured (the embedder has no local model).")
    ratio = tp["ratio"]
    return _md(
        f"**Reading.** The project's `embed_texts` embeds {tp['embed_texts_chunks_per_s']:.1f} "
        f"chunks/s against {tp['raw_chunks_per_s']:.1f} for raw sentence-transformers on the same "
        f"{tp['n_texts']} texts: a ratio of {ratio:.2f}, which "
        f"{'meets' if ratio >= target else 'misses'} the {target:.0%} target."
    )


def index_growth(growth: list[dict[str, Any]], query_backend: str | None, torch_p50: Any) -> Any:
    first, last = growth[0], growth[-1]
    k = last["n"] / first["n"] if first["n"] else 1
    sizes = len(growth)
    text = (
        f"**Reading.** From {first['n']:,} to {last['n']:,} chunks (×{k:g}): exact dense search "
        f"(search only) goes from {first['dense_search_only_p50_ms']:.2f} to "
        f"{last['dense_search_only_p50_ms']:.2f} ms p50 and a whole dense query (encoding "
        f"included) from {first['dense_p50_ms']:.1f} to {last['dense_p50_ms']:.1f} ms, so query "
        f"*encoding* dominates at these sizes; BM25 goes from {first['bm25_p50_ms']:.2f} to "
        f"{last['bm25_p50_ms']:.2f} ms. HNSW recall@10 against exact search is "
        f"{first['hnsw_recall@10']:.4f} → {last['hnsw_recall@10']:.4f}. Memory while serving "
        f"(one copy of the vectors, held by faiss): {first['dense_mem_mb']:.1f} → "
        f"{last['dense_mem_mb']:.1f} MB. "
        f"Queries are encoded with {query_backend or 'PyTorch'}"
        + (
            f" (PyTorch path: {float(torch_p50):.1f} ms p50)."
            if isinstance(torch_p50, int | float)
            else "."
        )
    )
    if sizes < 4:
        text += (
            f" Only {sizes} corpus sizes were measured in this profile (`scale_factors`), so the "
            "lines are drawn through too few points to read a growth rate from their shape."
        )
    return _md(text)


def answer_index(n_chunks: int, tp: dict[str, Any], growth: list[dict[str, Any]]) -> str:
    first, last = growth[0], growth[-1]
    return (
        f"{n_chunks:,} chunks embed at {tp.get('embed_texts_chunks_per_s', float('nan')):.1f} "
        f"chunks/s on 2 cores; a dense query takes {first['dense_p50_ms']:.1f} ms p50 (encoding "
        f"included) and BM25 {first['bm25_p50_ms']:.2f} ms, and at {last['n'] / first['n']:g}× the "
        f"corpus exact search still answers in {last['dense_p50_ms']:.1f} ms."
    )


# --- 04 retrieval ------------------------------------------------------------------------------


def scifact_reproduction(
    block: dict[str, Any], n_queries: int, published: dict[str, float], full: int = 300
) -> Any:
    rows = {
        n: block[n]["ndcg@10"]["mean"] for n in ("bm25", "dense") if n in block and n in published
    }
    measured = _join([f"{n} {v:.3f} (published {published[n]:.3f})" for n, v in rows.items()])
    if n_queries < full:
        return _md(
            f"**Reading.** This profile grades a slice of {n_queries} of the {full} SciFact test "
            f"queries: {measured}. The published numbers apply to the full set only, so the check "
            "is not made here."
        )
    ok = {n: abs(v - published[n]) <= 0.01 for n, v in rows.items()}
    verdict = (
        "both within ±0.01 of the published table: **the measurement is reproduced**, and the "
        "other rows can be trusted to the same degree"
        if all(ok.values())
        else f"**not reproduced** for {_join([n for n, g in ok.items() if not g])} "
        "(off by more than 0.01)"
    )
    graded = [n for n in block if not n.startswith("_") and "ndcg@10" in block[n]]  # not "not_run"
    best = max(graded, key=lambda n: block[n]["ndcg@10"]["mean"])
    b = block[best]["ndcg@10"]
    return _md(
        f"**Reading.** On all {n_queries} SciFact test queries: {measured} — {verdict}. Highest "
        f"row: {best} {ci(b['mean'], b['ci_low'], b['ci_high'])}."
    )


def components(
    reranker: str | None, compared: list[str], llm: str, not_run: dict[str, str]
) -> Any:
    """What this run's second stage and LLM actually are (the method text describes the default).

    ``reranker`` is None when the profile has no ``rerank`` row (nothing was loaded for it).
    """
    return _md(
        "**This run:** "
        + (f"the `rerank` row is `{reranker}`" if reranker else "no `rerank` row")
        + (
            f"; also compared over the same pool: {_join([f'`{c}`' for c in compared])}"
            if compared
            else ""
        )
        + f"; HyDE and LLM variants use `{llm}`."
        + (f" Not run: {_join([f'{k} ({v})' for k, v in not_run.items()])}." if not_run else "")
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
    names = [n for n in chunk if not n.startswith("_")]
    order = sorted(names, key=lambda n: -chunk[n]["ndcg@10"]["mean"])
    best = order[0]
    b = chunk[best]["ndcg@10"]
    beats, loses = _real_vs(pairwise, best)
    ties = [n for n in order[1:] if n not in beats]
    spread = chunk[order[0]]["ndcg@10"]["mean"] - chunk[order[-1]]["ndcg@10"]["mean"]
    pspread = [paper[n]["ndcg@10"]["mean"] for n in names if n in paper]
    text = (
        f"**Reading.** {len(names)} retrievers on n = {chunk[best]['n']} questions. Chunk level: "
        f"**{best}** scores highest, nDCG@10 {ci(b['mean'], b['ci_low'], b['ci_high'])}; "
        + (
            f"it beats {_join(beats)} by a real difference"
            if beats
            else "it beats no other retriever by a real difference"
        )
        + (f", and is not distinguishable from {_join(ties)}" if ties else "")
        + f". The rows span {spread:.3f} nDCG@10."
    )
    if pspread:
        text += (
            f" Paper level (the right paper, any passage) they span {min(pspread):.3f}–"
            f"{max(pspread):.3f}: near its ceiling, so it hides the differences the chunk "
            "level shows."
        )
    return _md(text)


def pairwise_reading(pairwise: Any, metric: str = "nDCG@10") -> Any:
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
    return _md(text)


def pool_recall(ceiling: Any, pool: int, depth: int, first_stage: str = "hybrid") -> Any:
    c = ceiling.set_index(["retriever", "depth"])["any_relevant_in_pool"]
    if (first_stage, pool) not in c:
        return _md("**Reading.** The pool-recall ceiling was not measured for the first stage.")
    at_pool, at_depth = c[(first_stage, pool)], c.get((first_stage, depth))
    n = int(ceiling["n"].iloc[0])
    return _md(
        f"**Reading.** {at_pool:.3f} of the n = {n} questions have at least one relevant chunk in "
        f"{first_stage}'s top {pool} (the pool the reranker reorders)"
        + (f", {at_depth:.3f} in its top {depth}" if at_depth is not None else "")
        + f": no second stage over this pool can find evidence for the other "
        f"{1 - at_pool:.1%} of questions."
    )


def breakdown_reading(breakdown: Any, retriever: str) -> Any:
    b = breakdown[breakdown["retriever"] == retriever]
    parts = [
        f"{r['by']} = {r['group']}: {ci(r['mean'], r['ci_low'], r['ci_high'])}, n = {int(r['n'])}"
        for _, r in b.iterrows()
    ]
    small = [f"{r['group']}" for _, r in b.iterrows() if r["n"] < 20]
    return _md(
        f"**Reading.** {retriever}'s chunk nDCG@10 by question group — {'; '.join(parts)}."
        + (
            f" Groups with fewer than 20 questions ({_join(small)}) have intervals too wide "
            "to rank."
            if small
            else ""
        )
    )


def wins_reading(wins: Any, baseline: str) -> Any:
    rows = wins[(wins["a"] == baseline) | (wins["b"] == baseline)]
    parts = []
    for _, r in rows.iterrows():
        other = r["b"] if r["a"] == baseline else r["a"]
        w_other = r["b wins"] if r["a"] == baseline else r["a wins"]
        w_base = r["a wins"] if r["a"] == baseline else r["b wins"]
        parts.append(f"{other} wins {w_other}, loses {w_base}, ties {r['ties']}")
    return _md(
        f"**Reading.** Per question against {baseline} (nDCG@10): {'; '.join(parts)}. Ties are "
        "mostly questions where both find nothing or the same chunk first: the averages above "
        "rest on the minority of questions where the retrievers disagree."
    )


def qasper_check(
    qasper: dict[str, Any], gold_chunk: dict[str, Any], metric: str = "recall@10"
) -> Any:
    names = [n for n in qasper if not n.startswith("_") and n in gold_chunk and metric in qasper[n]]
    if not names:
        return _md("**Reading.** No QASPER question carries evidence on these papers: no check.")
    gold_best = max(names, key=lambda n: gold_chunk[n]["ndcg@10"]["mean"])
    q_best = max(names, key=lambda n: qasper[n][metric]["mean"])
    g, q = qasper[gold_best][metric], qasper[q_best][metric]
    n = qasper[gold_best]["n"]
    passed = gold_best == q_best or _overlap(
        (g["ci_low"], g["ci_high"]), (q["ci_low"], q["ci_high"])
    )
    return _md(
        f"**Reading.** The check: is the retriever that the corpus gold ranks first "
        f"({gold_best}) also among the best on the human QASPER labels? On n = {n} human questions "
        f"its {metric} is {ci(g['mean'], g['ci_low'], g['ci_high'])}; the best there is {q_best} "
        f"with {ci(q['mean'], q['ci_low'], q['ci_high'])}. "
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
    cp, nd = proxy["category_precision@5"], proxy["chunk nDCG@10"]
    if cp.nunique() < 2 or len(proxy) < 3:
        agree = "the proxy is the same for every retriever, so it cannot rank them at all"
    else:
        agree = f"the two rank the retrievers with Spearman ρ = {cp.rank().corr(nd.rank()):.2f}"
    return _md(
        f"**Reading.** The topical proxy ranges only {cp.min():.2f}–{cp.max():.2f} "
        f"(spread {cp.max() - cp.min():.3f}) across {len(proxy)} retrievers, while chunk nDCG@10 "
        f"ranges {nd.min():.3f}–{nd.max():.3f}; {agree}. Most of the corpus shares a few "
        "categories, so any on-topic paper scores on the proxy whether or not it holds the "
        "evidence: it should not be reported as retrieval quality."
    )


def llm_cache_label(meter: dict[str, Any]) -> str:
    """Legend label of the first latency pass: cold only when LLM calls were actually made."""
    total = meter.get("total", {})
    if not total.get("calls"):
        return "gold questions (no LLM calls)"
    if total.get("fresh_calls", 0) == 0:
        return "gold questions (LLM cache warm)"
    return f"gold questions ({total['fresh_calls']} fresh LLM calls in this notebook)"


def latency_reading(latency: Any, meter: dict[str, Any]) -> Any:
    first = latency[latency["dataset"] == latency["dataset"].iloc[0]]
    parts = [f"{r['retriever']} {r['p50']:.1f} ms" for _, r in first.sort_values("p50").iterrows()]
    total = meter.get("total", {})
    return _md(
        f"**Reading.** Median latency per query on the gold questions: {_join(parts)}. "
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
    names = [n for n in chunk if not n.startswith("_")]
    best = max(names, key=lambda n: chunk[n]["ndcg@10"]["mean"])
    b = chunk[best]["ndcg@10"]
    beats, _ = _real_vs(pairwise, best)
    ties = [n for n in names if n != best and n not in beats]
    return (
        f"{best} ranks first on the corpus gold with chunk nDCG@10 "
        f"{ci(b['mean'], b['ci_low'], b['ci_high'])} "
        f"(n = {chunk[best]['n']}); it beats {_join(beats) or 'no retriever'} by a real difference "
        f"and is not distinguishable from {_join(ties) or 'none'}."
    )


# --- 05 faithfulness ---------------------------------------------------------------------------


def judge_validation(jm: dict[str, Any], target: float = 0.75) -> Any:
    conf = jm.get("confusion", {})
    c = conf.get("CONTRADICT", {})
    n_c = sum(c.values()) if c else 0
    text = (
        f"**Reading.** Rows are the human labels, columns the judge's. Balanced accuracy "
        f"{ci(jm['balanced_accuracy'], jm['ci_low'], jm['ci_high'])} on n = {jm['n']} "
        f"human-labelled pairs, "
        f"{'at or above' if jm['balanced_accuracy'] >= target else 'below'} the {target:g} target."
    )
    if n_c:
        text += (
            f" Its weakness is the CONTRADICT row: {c.get('supported', 0)} of {n_c} claims that "
            f"contradict their source ({c.get('supported', 0) / n_c:.0%}) are labelled supported, "
            "the judge sees word alignment plus a handful of contradiction cues (negation, "
            "antonyms, direction words, numbers, comparatives), not meaning. Every faithfulness "
            "number below inherits this error rate."
        )
    return _md(text)


def context_choice(retriever: str, output_dir: str) -> Any:
    """Why the held-constant retriever: what notebook 04 recorded in this run folder (if it ran)."""
    from rag.report.recorder import read_metrics

    try:
        m04 = read_metrics(output_dir, "04_retrieval")
    except (OSError, ValueError):
        m04 = {}
    chunk = m04.get("corpus_gold", {}).get("chunk", {})
    if retriever not in chunk:
        return _md(
            f"**Retrieval held constant:** `{retriever}` (notebook 04 has not recorded this "
            "profile's "
            "retriever comparison, so no comparison is quoted here)."
        )
    names = [n for n in chunk if not n.startswith("_")]
    best = max(names, key=lambda n: chunk[n]["ndcg@10"]["mean"])
    r, b = chunk[retriever]["ndcg@10"], chunk[best]["ndcg@10"]
    if best == retriever:
        rel = (
            f"the highest chunk nDCG@10 in notebook 04, {ci(r['mean'], r['ci_low'], r['ci_high'])}"
        )
    else:
        rel = (
            f"chunk nDCG@10 {ci(r['mean'], r['ci_low'], r['ci_high'])} in notebook 04; "
            f"{best} scored "
            f"higher ({b['mean']:.3f}, CI {b['ci_low']:.3f}–{b['ci_high']:.3f}) — see 04's paired "
            "tests for whether that difference is real — and needs a second model per query"
        )
    return _md(f"**Retrieval held constant:** `{retriever}`, {rel}.")


def questions_reading(n_total: int, n_answerable: int, k: int, retriever: str) -> Any:
    return _md(
        f"**Reading.** {n_total} questions: {n_answerable} answerable and "
        f"{n_total - n_answerable} unanswerable (the corpus holds no answer: the right response is "
        f"to decline). Each gets the same {k} chunks from {retriever}, stored once."
    )


def answerers_status(status: dict[str, str]) -> Any:
    ran = [n for n, s in status.items() if not s.startswith("not run")]
    skipped = [f"{n} ({s})" for n, s in status.items() if s.startswith("not run")]
    return _md(
        f"**Reading.** Answerers run: {_join(ran)}."
        + (f" Not run: {_join(skipped)} — reported, never silently dropped." if skipped else "")
    )


def _answerer_line(name: str, a: dict[str, Any]) -> str:
    f, f1 = a["faithfulness"], a["answer_f1"]
    fci = f.get("ci") or [None, None]
    f1ci = f1.get("ci") or [None, None]
    return (
        f"{name}: faithfulness {ci(f['mean'], fci[0], fci[1], 2)} over {f['n_scored']} scored "
        f"answers, answered rate {f['answered_rate']:.2f}, "
        f"answer F1 {ci(f1['mean'], f1ci[0], f1ci[1])}"
    )


def faithfulness_reading(per_answerer: dict[str, Any], judge_ba: float) -> Any:
    lines = [f"- {_answerer_line(n, a)}" for n, a in per_answerer.items()]
    text = (
        f"**Reading.** Judged by the offline judge (balanced accuracy {judge_ba:.2f} on human "
        "labels):\n\n"
        + "\n".join(lines)
        + "\n\nFaithfulness alone rewards saying nothing, so it is read beside the answered "
        "rate and "
        'answer F1: an answerer that declines everything is perfectly "faithful" and useless.'
    )
    ext = per_answerer.get("extractive")
    if ext and ext["faithfulness"]["mean"] is not None:
        ok = ext["faithfulness"]["mean"] >= 0.95
        text += (
            f" The extractive answerer copies its sources, so its faithfulness "
            f"({ext['faithfulness']['mean']:.2f}) checks the judge: "
            + (
                "it passes verbatim text."
                if ok
                else "the judge misjudges verbatim text, which bounds how far its other "
                "numbers can be trusted."
            )
        )
    filtered = [n for n in per_answerer if n.endswith("+filter")]
    if filtered:
        text += (
            f" The `+filter` rows ({', '.join(filtered)}) kept only the sentences this judge "
            "supports and are graded by the same judge, so their faithfulness is high by "
            "construction; what they show is the answered rate, citation recall and negative "
            "rejection left after filtering."
        )
    return _md(text)


def paired_reading(pairs: Any, pairs_f1: Any) -> Any:
    out = []
    for metric, t in (("faithfulness", pairs), ("answer F1", pairs_f1)):
        for _, r in t.iterrows():
            out.append(f"- {metric}: {r['reading']}")
    return _md(
        "**Reading.** Paired tests on the same questions:\n\n"
        + ("\n".join(out) or "- (one answerer only: nothing to compare)")
    )


def _trim_answer(text: str, width: int = 320) -> str:
    """An answer for display: repeated lines collapsed, whitespace folded, cut at ``width``."""
    seen, lines = set(), []
    for line in text.strip().splitlines():
        key = line.strip()
        if key and key in seen:
            continue
        seen.add(key)
        lines.append(key)
    flat = " ".join(" ".join(lines).split())
    if len(flat) > width:
        flat = flat[:width].rsplit(" ", 1)[0] + " …"
    return flat


def worked_examples(
    examples: dict[str, str | None],
    questions: dict[str, str],
    contexts: dict[str, Any],
    grades: list[Any],
    answers: dict[str, dict[str, Any]],
) -> Any:
    out = []
    for label, qid in examples.items():
        if qid is None:
            out.append(f"**{label}:** no question matches the rule on this slice.")
            continue
        srcs = "; ".join(f"[{s.n}] {s.paper_id} p.{s.page}" for s in contexts[qid].sources)
        out.append(f"**{label}** — `{qid}`: *{questions[qid]}*  \nSources: {srcs}")
        for g in grades:
            pq = g.per_question.loc[qid]
            fa = pq["faithfulness"]
            fa = "–" if fa is None or fa != fa else f"{float(fa):.2f}"
            out.append(
                f"- **{g.name}** (status {pq['status']}, faithfulness {fa}): "
                f"“{_trim_answer(answers[g.name][qid].text)}”"
            )
        out.append("")
    out.append(
        "**Reading.** A retrieval miss leaves every answerer without evidence: the faithful "
        "response is to decline, and an answer that goes on anyway is scored on claims its sources "
        "cannot support. Answers are shortened here (repeated lines collapsed); the notebook's "
        "outputs keep them whole."
    )
    return _md("\n".join(out))


def answer_faithfulness(
    per_answerer: dict[str, Any], judge_ba: float, judge_ci: tuple[float, float]
) -> str:
    parts = [_answerer_line(n, a) for n, a in per_answerer.items()]
    return (
        "By an offline judge that agrees with humans at balanced accuracy "
        f"{ci(judge_ba, *judge_ci)}: " + "; ".join(parts) + "."
    )


def headline_faithfulness(per_answerer: dict[str, Any]) -> dict[str, str]:
    """Index headline: faithfulness always beside answered rate and answer F1."""
    return {
        n: f"faithfulness {a['faithfulness']['mean']:.2f} · "
        f"answered {a['faithfulness']['answered_rate']:.2f} · "
        f"answer F1 {a['answer_f1']['mean']:.3f}"
        if a["faithfulness"]["mean"] is not None
        else f"faithfulness – · answered {a['faithfulness']['answered_rate']:.2f}"
        for n, a in per_answerer.items()
    }
