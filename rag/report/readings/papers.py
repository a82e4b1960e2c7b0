"""Readings of notebook 07 (papers): the citation graph, related work and summaries.

Each reading takes the dicts :mod:`rag.papers.measure` and :mod:`rag.papers.summary_eval` return
(the same ones the notebook records in ``metrics.json``) and states the finding from them; where a
measurement has too few items to say anything (a handful of papers), it says that instead of
quoting an undefined mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md, num

#: Related-work methods in table order, with what each reads.
RELATED_METHODS = {
    "text": "cosine of mean chunk embeddings (the paper's own text)",
    "cocitation": "corpus papers citing both (the graph, the paper's list hidden)",
    "popularity": "how many corpus papers cite the candidate (ignores the paper)",
    "fusion": "RRF of text and co-citation",
}


def _ci(d: Mapping[str, Any] | None) -> CI:
    return CI.from_dict(d) if d and d.get("n") else CI.missing()


def _papers(n: int) -> str:
    return f"{n:,} paper" + ("" if n == 1 else "s")


def ratio(d: Mapping[str, Any] | None) -> str:
    """``61/62``: hits over items of a recorded proportion, or "none measured" when ``n`` is 0."""
    return f"{d['k']}/{d['n']}" if d and d.get("n") else "none measured"


def proportion(d: Mapping[str, Any] | None) -> str:
    """``1.000 (61/61; exact 95 % CI 0.941–1.000)``, or "no items" when ``n`` is 0."""
    if not d or not d.get("n"):
        return "no items"
    text = f"{num(d['mean'])} ({d['k']}/{d['n']}"
    if d.get("exact_low") is not None:
        text += f"; exact 95 % CI {num(d['exact_low'])}–{num(d['exact_high'])}"
    return text + ")"


def graph_reading(graph: Mapping[str, Any], drawn: Mapping[str, Any], titles: Mapping[str, str]):
    """What the network shows: coverage, edges, hubs, and the out-of-corpus ids most cited."""
    if not graph["edges_in_corpus"]:
        return md(
            f"No paper of these {graph['papers']} cites another one of them, so there is no "
            "network to draw; the out-of-corpus links below still show what they cite."
        )
    hubs = [f"{titles.get(n, n)} ({n})" for n in drawn["labelled"][:3]]
    outside = graph["most_cited_outside"][:3]
    how = graph["edges_in_corpus_by_how"]
    return md(
        f"**{graph['edges_in_corpus']:,} citations link {drawn['linked']} of the "
        f"{graph['papers']} papers**: {graph['papers_citing_corpus']} cite at least one other "
        f"corpus paper and {graph['papers_cited_in_corpus']} are cited by one; "
        f"{drawn['alone']} stand alone. The links were resolved by an arXiv id written in the "
        f"reference ({how['arxiv_id']}), a DOI ({how['doi']}) or the title alone "
        f"({how['title']}). The hubs are {join(hubs)}. Outside the corpus the references name "
        f"{graph['arxiv_ids_outside']:,} distinct arXiv ids; the most cited, "
        + join([f"{o['arxiv_id']} ({o['citing_papers']} papers)" for o in outside])
        + ", are the papers most worth adding."
    )


def resolution_reading(res: Mapping[str, Any]):
    """Title resolution with the id hidden: precision and recall on the held-out half."""
    held = res["held_out"]
    if not res["probes"] or not held["recall"].get("n"):
        return md(
            f"Too few references to measure title resolution here: {res['probes']} entries carry "
            f"an arXiv id and {held['entries_citing_corpus']} of the held-out half cite a "
            "corpus paper. The graph uses the threshold pinned on the whole corpus."
        )
    return md(
        f"On the held-out half ({held['papers']} citing papers, {held['entries']:,} entries with "
        f"an arXiv id, {held['entries_citing_corpus']} of them citing a corpus paper), resolving "
        f"by the text alone at threshold {res['threshold']:g} has **precision "
        f"{proportion(held['precision'])}** and **recall {proportion(held['recall'])}**. The "
        f"threshold is the middle of the range {res['tied_range'][0]:g}–{res['tied_range'][1]:g} "
        "that maximises F0.5 on the tuning half: a wide flat optimum, so the exact value matters "
        "little. Near 100 % the bootstrap interval collapses to a point; the exact "
        "(Clopper-Pearson) interval is the one to read."
    )


def splitting_reading(split: Mapping[str, Any], refextract: Mapping[str, Any] | None):
    """Numbered splitting: found against the largest ``[N]``; refextract beside it (bench)."""
    if not split["papers"]:
        return md("None of these papers has a numbered reference list, so splitting is unmeasured.")
    o = split["overall"]
    text = (
        f"On the {_papers(split['papers'])} with numbered lists the splitter finds "
        f"**{o['found']:,} of {o['true']:,} entries** ({num(o['ratio'])}); "
        f"{split['exact_papers']} of {split['papers']} papers exactly, per-paper ratio "
        f"{interval(_ci(split['per_paper_ratio']))}."
    )
    if refextract:
        r = refextract["splitting_numbered"]["refextract"]
        text += (
            f" refextract {refextract['refextract_version']} (INSPIRE-HEP), run on the same "
            f"blocks of the whole corpus, finds {r['found']:,} of {r['true']:,} "
            f"({num(r['ratio'])}) and takes {refextract['seconds']['refextract']:,.0f} s against "
            f"{refextract['seconds']['own']:g} s (committed `outputs/bench/"
            "citations_refextract.json`, not this run)."
        )
    return md(text)


def related_table(rel: Mapping[str, Any]) -> pd.DataFrame:
    """One row per related-work method: each metric as mean with its CI bounds."""
    rows = []
    for m, what in RELATED_METHODS.items():
        if m not in rel.get("methods", {}):
            continue
        row: dict[str, Any] = {"method": m, "reads": what}
        for metric, d in rel["methods"][m].items():
            row[metric] = d["mean"]
            row[f"{metric} CI"] = f"{num(d['ci_low'])}–{num(d['ci_high'])}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("method") if rows else pd.DataFrame()


def related_reading(rel: Mapping[str, Any]):
    """The best method's recall@10 with its CI, and the paired test against text alone."""
    if "methods" not in rel:
        return md(
            f"Leave-one-out needs at least two papers citing another corpus paper; here "
            f"{rel['queries']} do, so related work is not measured on this selection."
        )
    best = rel["best_by_recall@10"]
    r10 = rel["methods"][best]["recall@10"]
    text = (
        f"Hiding each paper's own reference list and ranking the other "
        f"{rel['candidates_per_query']} papers ({rel['queries']} papers with in-corpus "
        f"references, {num(rel['relevant_per_query_mean'], 1)} relevant each on average): "
        f"**{best} ranks best, recall@10 {interval(_ci(r10))}**."
    )
    if best != "text":
        pair = next(
            (t for t in rel["paired_tests"]["recall@10"] if {t["a"], t["b"]} == {best, "text"}),
            None,
        )
        if pair is not None:
            sign = 1 if pair["a"] == best else -1
            lo, hi = sorted((sign * pair["ci_low"], sign * pair["ci_high"]))
            verdict = "a real difference" if pair["significant"] else "not a settled difference"
            diff = sign * pair["diff"]
            text += (
                f" Against text similarity alone the paired difference is {diff:+.3f}"
                f" (95 % CI {lo:+.3f} to {hi:+.3f}, Holm-corrected p = "
                f"{num(pair['p_adjusted'])}, n = {pair['n']}): {verdict}."
            )
    return md(text)


#: ``summ["sample"]`` when the notebook summarises every measurable paper.
EVERY_PAPER = "every measurable paper"


def summaries_reading(summ: Mapping[str, Any]):
    """Extractive against lead: ROUGE-L with CIs, the paired test, faithfulness and length."""
    if "metrics" not in summ:
        return md(
            f"Only {summ['n_papers']} paper(s) have an abstract and a body to compare, too few "
            "for a mean with an interval."
        )
    m = summ["metrics"]
    e, lead = m["extractive"], m["lead"]
    d = m["extractive_vs_lead"]["rouge_l"]
    lo, hi = d["ci"]["ci_low"], d["ci"]["ci_high"]
    span = f"{lo:+.3f} to {hi:+.3f}" if lo is not None and hi is not None else "undefined"
    return md(
        f"Against each paper's own abstract (which neither method sees), on {summ['n_papers']} "
        f"papers{_drawn(summ)}: extractive ROUGE-L **{interval(_ci(e['rouge_l']))}**, lead "
        f"{interval(_ci(lead['rouge_l']))}; paired difference {d['diff']:+.3f} (95 % CI "
        f"{span}, randomisation p = {num(d['p_value'], 4)}, Wilcoxon p = "
        f"{d['wilcoxon_p']:.2g}; extractive wins on {d['wins']} papers, loses on {d['losses']}). "
        f"Extractive summaries average {num(e['words']['mean'], 0)} words and lead ones "
        f"{num(lead['words']['mean'], 0)}, under the same word budget. Faithfulness is "
        f"{num(e['faithfulness']['mean'])} and {num(lead['faithfulness']['mean'])}: every sentence "
        "is copied from the paper, so this checks the judge, not the summariser."
    )


def _drawn(summ: Mapping[str, Any]) -> str:
    sample = summ.get("sample", EVERY_PAPER)
    return "" if sample == EVERY_PAPER else f" ({sample})"


def llm_rows(bench: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The LLM summary rows (``llm:<model>``) of a committed ``summaries.json``, or ``{}``."""
    metrics = (bench or {}).get("metrics", {})
    return {k: v for k, v in metrics.items() if k.startswith("llm:") and "_vs_" not in k}


def llm_summaries_reading(bench: Mapping[str, Any] | None):
    """LLM summaries from the committed bench file (too slow for the report), or how to add them."""
    rows = llm_rows(bench)
    if not rows:
        return md(
            "No LLM summary is measured in the committed `outputs/bench/summaries.json`; "
            "`python -m rag.papers.summary_eval --llm MODEL` adds one (the same input sentences, "
            "the same judge), where faithfulness checks the summary rather than the judge."
        )
    parts = []
    for name, agg in rows.items():
        vs = (bench or {})["metrics"].get(f"{name}_vs_extractive", {}).get("rouge_l")
        text = (
            f"`{name}` on {agg['rouge_l']['n']} papers: ROUGE-L {interval(_ci(agg['rouge_l']))}, "
            f"faithfulness {interval(_ci(agg['faithfulness']))}, "
            f"{num(agg['words']['mean'], 0)} words"
        )
        if vs:
            text += f"; {vs['diff']:+.3f} ROUGE-L against extractive on the same papers"
        parts.append(text)
    return md(
        "From the committed `outputs/bench/summaries.json` (not this run: an LLM over every "
        "paper costs more than the report's budget): " + "; ".join(parts) + "."
    )


def answer_papers(
    graph: Mapping[str, Any], res: Mapping[str, Any], rel: Mapping[str, Any],
    summ: Mapping[str, Any],
) -> str:  # fmt: skip
    """The index page's one-sentence answer for 07, from the numbers it records."""
    parts = [
        f"the references of {graph['papers']} papers resolve to {graph['edges_in_corpus']:,} "
        "in-corpus citations"
    ]
    held = res["held_out"]
    if held["precision"].get("n"):
        parts.append(
            f"title-only resolution is right {held['precision']['k']}/{held['precision']['n']} "
            f"times (recall {held['recall']['k']}/{held['recall']['n']})"
        )
    if "methods" in rel:
        best = rel["best_by_recall@10"]
        parts.append(
            f"{best} finds related work best, recall@10 "
            f"{interval(_ci(rel['methods'][best]['recall@10']))}"
        )
    if "metrics" in summ:
        e = summ["metrics"]["extractive"]["rouge_l"]
        lead = summ["metrics"]["lead"]["rouge_l"]
        parts.append(
            f"extractive summaries reach ROUGE-L {num(e['mean'])} against the unseen abstract "
            f"(lead {num(lead['mean'])})"
        )
    text = join(parts)
    return text[0].upper() + text[1:] + "."


def _cell(d: Mapping[str, Any] | None) -> str:
    return interval(_ci(d)) if d and d.get("n") else "–"


def methods_compared(
    result: Mapping[str, Any],
    summ: Mapping[str, Any],
    refextract: Mapping[str, Any] | None,
    summaries_bench: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Every method of the notebook beside its alternative: task, method, measure, value, n and
    where the number comes from (this run, or a committed bench file)."""
    rows: list[tuple[str, str, str, str, int, str]] = []

    def add(task: str, method: str, measure: str, value: str, n: int, source: str = "this run"):
        rows.append((task, method, measure, value, int(n), source))

    split = result["splitting_numbered"]
    if split["papers"]:
        o = split["overall"]
        add("split references", "own splitter", "entries found / true",
            f"{o['found']:,} / {o['true']:,}", split["papers"])  # fmt: skip
    if refextract:
        r = refextract["splitting_numbered"]["refextract"]
        add("split references", f"refextract {refextract['refextract_version']}",
            "entries found / true", f"{r['found']:,} / {r['true']:,}",
            refextract["numbered_papers"], "outputs/bench/citations_refextract.json")  # fmt: skip
    how = result["graph"]["edges_in_corpus_by_how"]
    add("resolve a reference", "arXiv id or DOI written in it", "in-corpus links", "exact",
        how["arxiv_id"] + how["doi"])  # fmt: skip
    held = result["title_resolution"]["held_out"]
    for measure in ("precision", "recall"):
        add("resolve a reference", "title alone (id hidden)", measure,
            proportion(held[measure]), held[measure].get("n", 0))  # fmt: skip
    rel = result["related_work"]
    for m in RELATED_METHODS:
        d = rel.get("methods", {}).get(m, {}).get("recall@10")
        if d:
            add("related work", m, "recall@10 (leave-one-out)", _cell(d), d["n"])
    metrics = summ.get("metrics", {})
    for m in ("extractive", "lead"):
        if m in metrics:
            add("summarise", m, "ROUGE-L F vs abstract", _cell(metrics[m]["rouge_l"]),
                summ["n_papers"])  # fmt: skip
    sampled = summ.get("sample", EVERY_PAPER) != EVERY_PAPER
    bench_metrics = (summaries_bench or {}).get("metrics", {})
    for m in ("extractive", "lead") if sampled else ():  # the whole corpus beside the sample
        if m in bench_metrics:
            add("summarise", f"{m} (every paper)", "ROUGE-L F vs abstract",
                _cell(bench_metrics[m]["rouge_l"]), summaries_bench["n_papers"],
                "outputs/bench/summaries.json")  # fmt: skip
    for name, agg in llm_rows(summaries_bench).items():
        add("summarise", name, "ROUGE-L F vs abstract", _cell(agg["rouge_l"]),
            agg["rouge_l"]["n"], "outputs/bench/summaries.json")  # fmt: skip
    return pd.DataFrame(rows, columns=["task", "method", "measure", "value", "n", "source"])
