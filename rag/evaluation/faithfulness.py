"""Grade answerers on the same contexts: faithfulness, citations, answer quality, with CIs.

Notebook 05 calls :func:`grade_answerer` once per answerer (every answerer sees exactly the same
stored contexts, so only the answerer varies), then :func:`summary_table` and :func:`paired_table`.
A judge's numbers are only as good as the judge: the notebook shows them beside its balanced
accuracy on human labels (:mod:`rag.evaluation.judge_validation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rag.answer.base import Answer
from rag.answer.claims import parse_answer
from rag.answer.context import Context
from rag.errors import RagError
from rag.evaluation.answers import answer_quality
from rag.evaluation.citations import (
    citation_scores,
    cited_units,
    faithfulness,
    faithfulness_metrics,
)
from rag.evaluation.gold import GoldItem
from rag.evaluation.stats import CI, bootstrap_ci, correct, describe_difference, paired_test

#: Per-question columns summarised with bootstrap CIs.
SCORED = ("faithfulness", "citation_recall", "citation_precision", "answer_f1", "exact_match")


def context_text(context: Context) -> str:
    """What the judge checks claims against: the sources' texts, in prompt order."""
    return "\n\n".join(context.source_texts[n] for n in sorted(context.source_texts))


@dataclass
class AnswererGrade:
    """One answerer's answers, judgements and per-question scores."""

    name: str
    answers: dict[str, Answer]
    per_question: pd.DataFrame
    faithfulness: dict[str, Any]
    quality: dict[str, Any]
    judgements: dict[str, Any] = field(default_factory=dict)
    citations: dict[str, Any] = field(default_factory=dict)

    def to_metrics(self, summary_row: Mapping[str, Any]) -> dict[str, Any]:
        """This answerer's block of ``metrics.json``, from its row of :func:`summary_table`."""
        fm, f = self.faithfulness, row_interval(summary_row, "faithfulness")
        out: dict[str, Any] = {
            "faithfulness": {
                "mean": f.estimate,
                "ci": list(f.bounds),
                "n_scored": fm["n_scored"],
                "answered_rate": fm["answered_rate"],
                "n_refusal": fm["n_refusal"],
                "n_no_claims": fm["n_no_claims"],
                "n_judge_failure": fm["n_judge_failure"],
            }
        }
        for m in ("citation_precision", "citation_recall", "answer_f1", "exact_match"):
            out[m] = row_interval(summary_row, m).to_pair_dict()
        for m in ("boolean_accuracy", "negative_rejection", "false_rejection", "repeated_lines"):
            out[m] = summary_row[m]
        out["boolean_n"] = int(summary_row["boolean_accuracy n"])
        out["boolean_answers"] = summary_row.get("boolean answers", "")
        out["negative_rejection_n"] = int(summary_row["negative_rejection n"])
        out["claims_per_answer"] = summary_row["claims_per_answer"]
        out["cost_usd"] = summary_row["cost_usd"]
        out["tokens"] = summary_row["tokens"]
        return out

    def cost(self) -> dict[str, Any]:
        """Cost, tokens, fresh and cached calls, and mean fresh latency of the answers."""
        a = list(self.answers.values())
        fresh = [x for x in a if not x.cached]
        return {
            "cost_usd": float(sum(x.cost_usd for x in fresh)),
            "tokens": {
                "input": int(sum(x.tokens_in for x in a)),
                "output": int(sum(x.tokens_out for x in a)),
            },
            "calls_fresh": len(fresh),
            "calls_cached": len(a) - len(fresh),
            "latency_s_fresh_mean": float(np.mean([x.latency_s for x in fresh])) if fresh else None,
        }


def grade_answerer(
    name: str,
    answers: Mapping[str, Answer],
    contexts: Mapping[str, Context],
    items: Sequence[GoldItem],
    judge: Any,
) -> AnswererGrade:
    """Judge every answer against its own context and score it.

    ``judge`` needs ``judge_answer(answer, context_text) -> AnswerJudgement`` and
    ``entails(claim, premise) -> bool`` (the offline judge and the LLM judge both have them).
    """
    by_qid = {i.qid: i for i in items}
    judgements = {}
    cites = {}
    rows = []
    for qid, ans in answers.items():
        ctx = contexts[qid]
        j = judge.judge_answer(ans.text, context_text(ctx))
        judgements[qid] = j
        cs = citation_scores(cited_units(parse_answer(ans.text)), ctx.source_texts, judge.entails)
        cites[qid] = cs
        item = by_qid.get(qid)
        rows.append(
            {
                "qid": qid,
                "kind": item.kind if item else None,
                "answerable": item.answerable if item else None,
                "status": j.status,
                "claims": len(j.claims) if j.status == "scored" else None,
                "faithfulness": faithfulness(j),
                "citation_recall": cs.recall,
                "citation_precision": cs.precision,
                "refused": ans.refused,
                "answer": ans.text,
            }
        )
    per_q = pd.DataFrame(rows).set_index("qid")
    quality = answer_quality(answers, [by_qid[q] for q in answers if q in by_qid])
    per_q["answer_f1"] = pd.Series(quality["answer_f1"].per_question, dtype=float)
    per_q["exact_match"] = pd.Series(quality["exact_match"].per_question, dtype=float)
    per_q["support"] = pd.Series({q: a.support for q, a in answers.items()}, dtype=float)
    fm = faithfulness_metrics([judgements[q] for q in answers])
    fm.pop("per_answer", None)
    return AnswererGrade(name, dict(answers), per_q, fm, quality, judgements, cites)


def _ci(values: pd.Series, seed: int) -> CI:
    v = values.dropna().astype(float).to_numpy()
    if len(v) == 0:
        return CI.missing()
    return bootstrap_ci(v, seed=seed)


def row_interval(summary_row: Mapping[str, Any], metric: str) -> CI:
    """The interval of ``metric`` in a row of :func:`summary_table` (columns ``m``, ``m CI``,
    ``m n``)."""
    low, high = summary_row[f"{metric} CI"]
    return CI(summary_row[metric], low, high, int(summary_row[f"{metric} n"]), "stored")


def boolean_answers(extra: dict[str, Any]) -> str:
    """``"0 yes / 6 no (constant; gold 2 yes / 4 no)"``: what the yes/no answers were."""
    pred, gold = extra.get("predicted"), extra.get("gold")
    if not pred or not gold or not sum(gold.values()):
        return ""
    const = "; constant" if extra.get("constant") else ""
    return f"{pred['yes']} yes / {pred['no']} no{const} (gold {gold['yes']} yes / {gold['no']} no)"


def summary_table(grades: Sequence[AnswererGrade], *, seed: int = 0) -> pd.DataFrame:
    """One row per answerer: each scored metric's mean, 95 % CI and n; rejection rates; claims."""
    rows = []
    for g in grades:
        row: dict[str, Any] = {"answerer": g.name}
        for m in SCORED:
            ci = _ci(g.per_question[m], seed)
            row[m], row[f"{m} CI"], row[f"{m} n"] = ci.estimate, ci.bounds, ci.n
        row["answered_rate"] = g.faithfulness["answered_rate"]
        row["claims_per_answer"] = g.faithfulness["claims_per_answer"]
        row["negative_rejection"] = g.quality["negative_rejection"].value
        row["false_rejection"] = g.quality["false_rejection"].value
        row["boolean_accuracy"] = g.quality["boolean_accuracy"].value
        row["boolean_accuracy n"] = g.quality["boolean_accuracy"].n
        row["boolean answers"] = boolean_answers(g.quality["boolean_accuracy"].extra)
        row["negative_rejection n"] = g.quality["negative_rejection"].n
        row["repeated_lines"] = g.quality["repeated_lines"].value
        row.update(g.cost())
        rows.append(row)
    return pd.DataFrame(rows).set_index("answerer")


def paired_table(
    grades: Sequence[AnswererGrade], metric: str = "faithfulness", *, seed: int = 0
) -> pd.DataFrame:
    """All-pairs paired randomisation tests on the questions both answerers were scored on."""
    rows, results = [], []
    for i, a in enumerate(grades):
        for b in grades[i + 1 :]:
            both = pd.concat(
                [a.per_question[metric], b.per_question[metric]], axis=1, keys=["a", "b"]
            ).dropna()
            if len(both) < 2:
                rows.append(
                    {
                        "a": a.name,
                        "b": b.name,
                        "n": len(both),
                        "reading": f"not comparable: {len(both)} question(s) scored by both",
                    }
                )
                results.append(None)
                continue
            r = paired_test(both["a"].to_numpy(float), both["b"].to_numpy(float), seed=seed)
            results.append(r)
            rows.append(
                {
                    "a": a.name,
                    "b": b.name,
                    "n": len(both),
                    "diff": r.diff,
                    "ci_low": r.ci.low,
                    "ci_high": r.ci.high,
                    "p_value": r.p_value,
                }
            )
    valid = [r for r in results if r is not None]
    adjusted = correct(valid, "holm") if valid else []
    it = iter(adjusted)
    for row, r in zip(rows, results, strict=True):
        if r is None:
            continue
        r2 = next(it)
        row["p_adjusted"] = r2.p_adjusted
        row["reading"] = describe_difference(row["a"], row["b"], r2, metric=metric)
    return pd.DataFrame(rows)


def pick_examples(
    grades: Mapping[str, AnswererGrade],
    contexts: Mapping[str, Context],
    relevant_chunks: Mapping[str, Mapping[str, int]],
    items: Sequence[GoldItem],
    answerer: str,
) -> dict[str, str | None]:
    """Two worked examples chosen by rule (not by hand), in gold-file order:

    - ``retrieval_miss``: the first answerable question none of whose context chunks is relevant;
    - ``faithful_non_answer``: the first question the ``answerer`` declined whose context holds no
      relevant chunk (an unanswerable question qualifies), i.e. declining was the faithful answer.
    """
    g = grades[answerer]

    def miss(qid: str) -> bool:
        rel = {d for d, s in relevant_chunks.get(qid, {}).items() if s > 0}
        return not rel & set(contexts[qid].citation_map.values())

    out: dict[str, str | None] = {"retrieval_miss": None, "faithful_non_answer": None}
    for it in items:
        q = it.qid
        if q not in contexts or q not in g.answers:
            continue
        if out["retrieval_miss"] is None and it.answerable and miss(q):
            out["retrieval_miss"] = q
        if out["faithful_non_answer"] is None and g.answers[q].refused and miss(q):
            out["faithful_non_answer"] = q
    return out


def grade_with_llm_judges(
    chats: Mapping[str, Any],
    status: dict[str, str],
    *,
    dev_path: str,
    limit: int | None,
    seed: int,
    answers: Mapping[str, Mapping[str, Answer]],
    contexts: Mapping[str, Context],
    items: Sequence[GoldItem],
) -> tuple[dict[str, dict[str, Any]], dict[str, pd.DataFrame]]:
    """Validate each LLM judge on human labels, then grade every answerer with it.

    A judge whose model fails (one health-check call raises :class:`rag.errors.LLMError`, or its
    validation fails on every pair) is skipped and ``status[name]`` becomes
    ``"failed: <reason>"``: the notebook goes on and the report shows the row.

    Args:
        chats: ``{judge name: chat model}`` of the judges to run.
        status: ``{judge name: status}``, updated in place for failed judges.
        dev_path: the human-labelled validation file (a path parameter).
        limit: judge only the first ``limit`` validation pairs.
        seed: bootstrap seed.
        answers: ``{answerer: {qid: answer}}`` to grade.
        contexts: the contexts the answers were given.
        items: the gold items of the questions.

    Returns:
        ``({judge: validation metrics without timing}, {judge: summary table})``.
    """
    from rag.evaluation.judge_validation import validate_judge
    from rag.judge.llm_judge import LLMJudge
    from rag.llm.factory import model_failure

    validation: dict[str, dict[str, Any]] = {}
    tables: dict[str, pd.DataFrame] = {}
    for name, chat in chats.items():
        why = model_failure(chat)
        if why is None:
            judge = LLMJudge(chat)
            try:
                metrics, _ = validate_judge(judge, dev_path, limit=limit, seed=seed)
            except RagError as e:  # e.g. every pair failed: JudgeError
                why = f"{type(e).__name__}: {e}"
        if why is not None:
            status[name] = f"failed: {why}"
            continue
        validation[name] = {k: v for k, v in metrics.items() if k != "seconds"}
        grades = [grade_answerer(n, answers[n], contexts, items, judge) for n in answers]
        tables[name] = summary_table(grades, seed=seed)
    return validation, tables


def tradeoff_curve(grade: AnswererGrade, thresholds: Sequence[float]) -> pd.DataFrame:
    """Answered rate and faithfulness of a support-gated answerer across gate thresholds.

    For a gate that answers when ``support >= t`` with an answer that does not depend on ``t``
    (:class:`rag.answer.support_extractive.SupportExtractiveAnswerer`,
    :class:`rag.answer.gate.GatedAnswerer`), one run gives every point: at threshold ``t``
    the answered questions are those with support >= t whose answer was scored, and
    faithfulness is their mean. Answers given below the gate (the extractive "No, ..." to a
    yes/no question) are left out of every point, so the curve shows the gate alone. Beside
    them: answer F1 (a question not answered at ``t`` scores 0, as a refusal does), negative
    rejection and false rejection at each ``t``. Rows with no answered question have
    faithfulness ``None``.
    """
    pq = grade.per_question
    on_all = pq["faithfulness"].notna() & (pq["support"].fillna(-1.0) >= 0)
    answerable = pq["answerable"].astype("boolean")
    rows = []
    for t in thresholds:
        on = on_all & (pq["support"].fillna(-1.0) >= t)
        f = pq.loc[on, "faithfulness"].astype(float)
        f1 = pq["answer_f1"].where(on, 0.0).where(pq["answer_f1"].notna())
        neg, pos = ~answerable.fillna(True), answerable.fillna(False)
        rows.append(
            {
                "threshold": float(t),
                "answered_rate": float(on.mean()) if len(pq) else None,
                "faithfulness": float(f.mean()) if len(f) else None,
                "n_answered": int(on.sum()),
                "answer_f1": float(f1.mean()) if f1.notna().any() else None,
                "negative_rejection": float((~on[neg]).mean()) if neg.any() else None,
                "false_rejection": float((~on[pos]).mean()) if pos.any() else None,
            }
        )
    return pd.DataFrame(rows)


def _verdict_dict(cv: Any) -> dict[str, Any]:
    v = cv.verdict
    return {"claim": cv.claim, "label": v.label, "score": v.score, "reason": v.reason}


def trace_records(
    grade: AnswererGrade,
    contexts: Mapping[str, Context],
    items: Sequence[GoldItem],
    *,
    questions: Mapping[str, str] | None = None,
    context_name: str = "retrieved",
) -> list[dict[str, Any]]:
    """One JSON-ready record per question for ``traces.jsonl`` (no paths, no keys).

    Question, gold answer, the context's chunks (id, paper, page), the answer with its prompt
    version and the answerer's decision trace, its claims with verdicts and reasons, citations
    with whether the cited sources support their sentence, F1 / EM, latency and tokens. A question
    without a gold item (a user's own) takes its text from ``questions``; its gold fields are None.
    """
    by_qid = {i.qid: i for i in items}
    out = []
    for qid, a in grade.answers.items():
        it = by_qid.get(qid)
        ctx = contexts[qid]
        j = grade.judgements.get(qid)
        cs = grade.citations.get(qid)
        pq = grade.per_question.loc[qid]

        def num(x: Any) -> float | None:
            return None if x is None or x != x else float(x)

        out.append(
            {
                "qid": qid,
                "answerer": grade.name,
                "context": context_name,
                "question": it.question if it else (questions or {}).get(qid),
                "gold_answer": it.answer if it else None,
                "answer_type": it.answer_type if it else None,
                "answerable": it.answerable if it else None,
                "sources": [
                    {"n": s.n, "chunk_id": s.chunk_id, "paper": s.paper_id, "page": s.page}
                    for s in ctx.sources
                ],
                "prompt_version": a.prompt_version,
                "answer": a.text,
                "refused": a.refused,
                "decision": a.trace,
                "status": j.status if j else None,
                "claims": [_verdict_dict(c) for c in j.claims] if j else [],
                "faithfulness": num(pq["faithfulness"]),
                "citations": [
                    {
                        "sentence": u.text,
                        "cites": list(u.citations),
                        "supported": u.supported,
                        "relevant": list(u.relevant),
                        "unknown": list(u.unknown),
                    }
                    for u in (cs.units if cs else ())
                ],  # fmt: skip
                "citation_recall": cs.recall if cs else None,
                "citation_precision": cs.precision if cs else None,
                "answer_f1": num(pq["answer_f1"]),
                "exact_match": num(pq["exact_match"]),
                "latency_s": round(a.latency_s, 4),
                "cached": a.cached,
                "tokens": {"input": a.tokens_in, "output": a.tokens_out},
            }
        )
    return out
