"""Readings of notebook 05 (faithfulness): the judge, the answerers, and worked examples."""

from __future__ import annotations

from typing import Any

from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md


def judge_validation(jm: dict[str, Any], target: float = 0.75) -> Any:
    """The judge's balanced accuracy on human labels against the target, and its CONTRADICT row."""
    conf = jm.get("confusion", {})
    c = conf.get("CONTRADICT", {})
    n_c = sum(c.values()) if c else 0
    text = (
        f"**Reading.** Rows are the human labels, columns the judge's. Balanced accuracy "
        f"{interval(CI.from_dict(jm, 'balanced_accuracy'))} on n = {jm['n']} "
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
    return md(text)


def _p(p: float) -> str:
    return f"p = {p:.3f}" if p >= 0.001 else f"p = {p:.1g}"


def _paired_line(m: dict[str, Any]) -> str:
    d = m["paired"]
    c = m["class_recall"]["CONTRADICT"]
    return (
        f"{interval(CI.from_dict(m, 'balanced_accuracy'))}, {d['diff']:+.3f} against "
        f"{d['baseline']} on the same pairs (95 % CI {d['ci_low']:+.3f} to {d['ci_high']:+.3f}, "
        f"randomisation {_p(d['p'])}), {c['k']} of {c['n']} contradictions caught"
    )


def judge_candidates(
    dev: dict[str, Any],
    claims: dict[str, Any],
    default: str,
    candidates: list[str],
    not_run: dict[str, str],
) -> Any:
    """The candidate judges beside the default on SciFact dev (and the lab's own claims), and
    whether one replaces it by the pre-registered rule: a paired difference on dev whose whole
    95 % CI lies above zero."""
    names = [n for n in candidates if "paired" in dev.get(n, {})]
    parts = []
    for n in names:
        text = f"`{n}` scores {_paired_line(dev[n])} on SciFact dev"
        if "paired" in claims.get(n, {}):
            text += f"; on the claims about the corpus papers {_paired_line(claims[n])}"
        parts.append(text + ".")
    if claims.get(default):
        c = claims[default]["class_recall"]["CONTRADICT"]
        parts.append(
            f"The default `{default}` scores "
            f"{interval(CI.from_dict(claims[default], 'balanced_accuracy'))} on those claims and "
            f"passes {c['n'] - c['k']} of {c['n']} that contradict their passage."
        )
    winners = [n for n in names if dev[n]["paired"]["ci_low"] > 0]
    rule = (
        "A candidate replaces the default only when its paired difference on SciFact dev lies "
        "above zero across the whole 95 % CI (the rule written in docs/experiments.md before dev "
        "was read) and it runs from a fresh clone; "
    )
    if not names:
        rule += "no candidate ran here."
    elif winners:
        rule += f"{join([f'`{w}`' for w in winners])} clears it on these pairs."
    else:
        rule += f"none does, so `{default}` grades every answer below."
    parts.append(rule)
    parts += [f"`{n}`: {why}" for n, why in not_run.items()]
    return md("**Reading.** " + " ".join(parts))


def context_choice_reading(retriever: str, chunk: dict[str, Any]) -> Any:
    """Why the held-constant retriever: its chunk nDCG@10 in notebook 04's ``chunk`` block
    (``{}`` when 04 has not run on this profile), beside the best row there."""
    if retriever not in chunk:
        return md(
            f"**Retrieval held constant:** `{retriever}` (notebook 04 has not recorded this "
            "profile's "
            "retriever comparison, so no comparison is quoted here)."
        )
    names = [n for n in chunk if not n.startswith("_")]
    best = max(names, key=lambda n: chunk[n]["ndcg@10"]["mean"])
    r, b = CI.from_dict(chunk[retriever]["ndcg@10"]), CI.from_dict(chunk[best]["ndcg@10"])
    if best == retriever:
        rel = f"the highest chunk nDCG@10 in notebook 04, {interval(r)}"
    else:
        rel = (
            f"chunk nDCG@10 {interval(r)} in notebook 04; "
            f"{best} scored "
            f"higher ({b.estimate:.3f}, CI {b.low:.3f}–{b.high:.3f}) — see 04's paired "
            "tests for whether that difference is real — and needs a second model per query"
        )
    return md(f"**Retrieval held constant:** `{retriever}`, {rel}.")


def questions_reading(n_total: int, n_answerable: int, k: int, retriever: str) -> Any:
    """How many questions are answerable, and the context every answerer gets."""
    return md(
        f"**Reading.** {n_total} questions: {n_answerable} answerable and "
        f"{n_total - n_answerable} unanswerable (the corpus holds no answer: the right response is "
        f"to decline). Each gets the same {k} chunks from {retriever}, stored once."
    )


def answerers_status(status: dict[str, str]) -> Any:
    """The answerers run and those not run, with the reason."""
    ran = [n for n, s in status.items() if not s.startswith("not run")]
    skipped = [f"{n} ({s})" for n, s in status.items() if s.startswith("not run")]
    return md(
        f"**Reading.** Answerers run: {join(ran)}."
        + (f" Not run: {join(skipped)} — reported, never silently dropped." if skipped else "")
    )


def _answerer_line(name: str, a: dict[str, Any]) -> str:
    f, f1 = a["faithfulness"], a["answer_f1"]
    return (
        f"{name}: faithfulness {interval(CI.from_dict(f), 2)} over {f['n_scored']} scored "
        f"answers, answered rate {f['answered_rate']:.2f}, "
        f"answer F1 {interval(CI.from_dict(f1))}"
    )


def faithfulness_reading(per_answerer: dict[str, Any], judge_ba: float) -> Any:
    """Each answerer's faithfulness beside its answered rate and F1, and what the rows check."""
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
    return md(text)


def paired_reading(pairs: Any, pairs_f1: Any) -> Any:
    """The paired tests' readings on faithfulness and answer F1."""
    out = []
    for metric, t in (("faithfulness", pairs), ("answer F1", pairs_f1)):
        for _, r in t.iterrows():
            out.append(f"- {metric}: {r['reading']}")
    return md(
        "**Reading.** Paired tests on the same questions:\n\n"
        + ("\n".join(out) or "- (one answerer only: nothing to compare)")
    )


def trim_answer(text: str, width: int = 320) -> str:
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
    """The rule-picked questions with every answerer's (shortened) answer and faithfulness."""
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
                f"“{trim_answer(answers[g.name][qid].text)}”"
            )
        out.append("")
    out.append(
        "**Reading.** A retrieval miss leaves every answerer without evidence: the faithful "
        "response is to decline, and an answer that goes on anyway is scored on claims its sources "
        "cannot support. Answers are shortened here (repeated lines collapsed); the notebook's "
        "outputs keep them whole."
    )
    return md("\n".join(out))


def answer_faithfulness(
    per_answerer: dict[str, Any], judge_ba: float, judge_ci: tuple[float, float]
) -> str:
    """The index page's one sentence for notebook 05."""
    parts = [_answerer_line(n, a) for n, a in per_answerer.items()]
    return (
        "By an offline judge that agrees with humans at balanced accuracy "
        f"{interval(CI(judge_ba, *judge_ci, 0, 'stored'))}: " + "; ".join(parts) + "."
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
