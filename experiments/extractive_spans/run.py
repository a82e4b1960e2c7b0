"""How far can span *selection* take the extractive answerer's F1? Rules and ceilings, measured.

The extractive answerer copies one source span the offline judge scores as supporting the
question's statement (:class:`rag.answer.support_extractive.SupportExtractiveAnswerer`).
``python -m experiments.extractive_spans.run`` asks whether a different choice among the same
scored spans would do better:

- on the **held-out questions** of notebook 05's threshold rule (the gold file's single-paper
  answerable questions outside the graded slice, never graded), at the notebook's support
  threshold, it scores the published rule against alternative selection rules: the most novel span
  (fewest question words) within ``delta`` of the best score, the shortest within ``delta``, two or
  three spans, leading question-restating clauses trimmed, score plus question coverage, and
  the span closest to the *question* (not its statement) under the retriever's embedder, alone,
  added to the score, or with novelty (the question ranks answers, the statement ranks
  restatements);
- on both the held-out questions and the graded slice's answerable questions, it reports
  **ceilings**: the F1 an oracle would reach picking the best span among those that pass the
  threshold, among the judge's top 5, and among every candidate span. The slice's ceilings are a
  diagnosis (what no selection rule can exceed), never used to choose anything; the slice also
  gets the published rule's F1, a cross-check against notebook 05's ``answer_f1``.

As in the report, F1 is taken over answerable non-boolean questions and a declined one scores 0.
Writes ``outputs/bench/extractive_spans.json``; needs the corpus index (built or cached) and
``../shared``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rag import paths
from rag.bench import write_json
from rag.errors import ConfigError

#: Where the support threshold is read: the one notebook 05 chose (held-out rule) for the default
#: profile's published run, so this experiment never holds a copy that could drift from it.
PUBLISHED_METRICS = "outputs/default/05_faithfulness/metrics.json"
Rule = Callable[[str, list[Any]], list[Any]]


def _answer_text(question: str, chosen: Sequence[Any], yes_no: bool) -> str:
    from rag.answer.support_extractive import span_text

    body = " ".join(f"{span_text(s)} [{s.n}]." for s in chosen)
    return ("Yes, " if yes_no else "") + body


def _distinct(passed: list[Any], k: int) -> list[Any]:
    out, seen = [], set()
    for s in passed:
        if (s.n, s.position) in seen:
            continue
        seen.add((s.n, s.position))
        out.append(s)
        if len(out) == k:
            break
    return out


def rules(
    tok: Any, similarity: Callable[[str, str], float] | None = None
) -> dict[str, tuple[Rule, bool]]:
    """Selection rules: name -> (rule over the passing spans, trim leading question clauses).

    ``similarity(question, span)`` (the retriever's embedder: cosine of the *question*, not its
    statement) adds the rules that rank spans as answers to the question rather than as support
    for its statement.
    """

    def novelty(q: str, text: str) -> float:
        qs, ts = set(tok.query(q)), tok.document(text)
        return sum(t not in qs for t in ts) / max(1, len(ts))

    def coverage(q: str, text: str) -> float:
        from rag.text.coverage import term_coverage

        return term_coverage(sorted(set(tok.query(q))), set(tok.document(text)))

    out: dict[str, tuple[Rule, bool]] = {
        "published (best score, ties to the shorter)": (lambda q, p: p[:1], False),
        "published + leading question clauses trimmed": (lambda q, p: p[:1], True),
        "two spans": (lambda q, p: _distinct(p, 2), False),
        "three spans": (lambda q, p: _distinct(p, 3), False),
    }
    for delta in (0.05, 0.1, 0.2):

        def most_novel(q: str, p: list[Any], d: float = delta) -> list[Any]:
            top = [s for s in p if s.score >= p[0].score - d]
            return [max(top, key=lambda s: (novelty(q, s.text), -len(s.text)))]

        def shortest(q: str, p: list[Any], d: float = delta) -> list[Any]:
            top = [s for s in p if s.score >= p[0].score - d]
            return [min(top, key=lambda s: len(s.text))]

        out[f"most novel within {delta}"] = (most_novel, False)
        out[f"shortest within {delta}"] = (shortest, False)
    for lam in (0.2, 0.4):
        out[f"score + {lam} x question coverage"] = (
            lambda q, p, lam=lam: [max(p, key=lambda s: s.score + lam * coverage(q, s.text))],
            False,
        )
    if similarity is not None:
        out["max question cosine"] = (
            lambda q, p: [max(p, key=lambda s: similarity(q, s.text))],
            False,
        )
        for lam in (0.5, 1.0):
            out[f"score + {lam} x question cosine"] = (
                lambda q, p, lam=lam: [max(p, key=lambda s: s.score + lam * similarity(q, s.text))],
                False,
            )
        out["question cosine + 0.5 x novelty"] = (
            lambda q, p: [max(p, key=lambda s: similarity(q, s.text) + 0.5 * novelty(q, s.text))],
            False,
        )
    return out


def trim_restating(tok: Any, question: str, text: str) -> str:
    """Drop leading comma-separated parts that mostly restate the question (or are <= 4 words)."""
    qs = set(tok.query(question))
    parts = re.split(r"(?<=,)\s+", text)
    while len(parts) > 1:
        ts = tok.document(parts[0])
        if len(parts[0].split()) <= 4 or (ts and sum(t in qs for t in ts) / len(ts) >= 0.5):
            parts = parts[1:]
        else:
            break
    return " ".join(parts)


def _summary(values: list[float], seed: int = 0) -> dict[str, Any]:
    from rag.evaluation.stats import bootstrap_ci

    ci = bootstrap_ci(values, seed=seed)
    return {"mean": round(float(np.mean(values)), 4), "ci": [ci.low, ci.high], "n": len(values)}


def published_threshold(path: str = PUBLISHED_METRICS) -> float:
    """The support threshold of the published default run's notebook 05."""
    import json

    f = paths.resolve(path)
    if not f.exists():
        raise ConfigError(f"no published notebook 05 metrics at {path}: run `make report` first")
    return float(json.loads(f.read_text(encoding="utf-8"))["support_threshold"]["value"])


def score_questions(
    items: Sequence[Any],
    contexts: dict[str, Any],
    judge: Any,
    tok: Any,
    *,
    threshold: float,
    with_rules: bool,
    similarity: Callable[[str, str], float] | None = None,
) -> dict[str, Any]:
    """F1 per rule (``with_rules``) and the three oracle ceilings over ``items``."""
    from rag.answer.questions import declarative_form, is_yes_no_question
    from rag.answer.support import support_spans
    from rag.answer.support_extractive import span_text
    from rag.evaluation.answers import token_f1

    spans = {
        g.qid: support_spans(judge, declarative_form(g.question), contexts[g.qid]) for g in items
    }
    res: dict[str, Any] = {"n": len(items)}
    passing = {q: [s for s in sp if s.score >= threshold] for q, sp in spans.items()}
    res["answered_rate"] = round(sum(bool(p) for p in passing.values()) / max(1, len(items)), 4)
    table = rules(tok, similarity)
    if not with_rules:  # the published rule only: a cross-check against the report's F1
        table = dict(list(table.items())[:1])
    if table:
        res["rules"] = {}
        for name, (rule, trim) in table.items():
            f1s = []
            for g in items:
                p = passing[g.qid]
                if not p:
                    f1s.append(0.0)
                    continue
                chosen = rule(g.question, p)
                text = _answer_text(g.question, chosen, is_yes_no_question(g.question))
                if trim:
                    text = trim_restating(tok, g.question, text)
                f1s.append(token_f1(text, g.answer))
            res["rules"][name] = _summary(f1s)
    ceilings: dict[str, list[float]] = {"passing spans": [], "judge's top 5": [], "any span": []}
    for g in items:
        sp = spans[g.qid]
        f = [token_f1(span_text(s), g.answer) for s in sp]
        ceilings["passing spans"].append(
            max((fi for s, fi in zip(sp, f, strict=True) if s.score >= threshold), default=0.0)
        )
        ceilings["judge's top 5"].append(max(f[:5], default=0.0))
        ceilings["any span"].append(max(f, default=0.0))
    res["oracle_ceilings"] = {k: _summary(v) for k, v in ceilings.items()}
    return res


def run(
    out: str | None = "outputs/bench/extractive_spans.json",
) -> dict[str, Any]:
    """Run the comparison on the default profile's corpus, slice and held-out questions."""
    from rag.answer.context import ContextSettings, build_contexts
    from rag.corpus.papers import corpus_papers
    from rag.evaluation.compare import build_retrievers
    from rag.evaluation.gold import answer_slice, gold_for_papers, load_gold
    from rag.index.bm25 import Tokenizer, TokenizerSettings
    from rag.index.build import index_corpus
    from rag.index.embed import default_passage_backend
    from rag.judge.offline import DEFAULT_JUDGE, embed, make_offline_judge
    from rag.retrieval.retrievers import Components, RetrievalSettings
    from rag.text.chunk import chunk_settings

    papers, parsed = corpus_papers("data/manifest.jsonl", [], 0, pdf_mirror="")
    titles = {p.arxiv_id: p.title for p in papers}
    ix = index_corpus(
        parsed, chunk_settings({"strategy": "fixed", "max_tokens": 254, "overlap_tokens": 32})
    )
    gold = gold_for_papers(load_gold(paths.resolve("../shared/gold/dev.jsonl")), titles)
    graded = answer_slice(gold, 48, include_unanswerable=True)
    in_slice = {g.qid for g in graded}
    # F1 is defined, as in the report, on answerable non-boolean questions
    held = [
        g
        for g in gold
        if g.answerable
        and g.answer_type != "boolean"
        and len(g.relevant_papers) == 1
        and g.qid not in in_slice
    ]
    comps = Components(
        store=ix.store, embedder=ix.embedder, dense_index=ix.dense, bm25_index=ix.bm25
    )
    retr, _ = build_retrievers(["hybrid"], comps, RetrievalSettings(k=5))
    settings = ContextSettings(order="edges", token_budget=1200, per_paper_cap=3)

    def contexts(items: Sequence[Any]) -> dict[str, Any]:
        hits = {g.qid: retr["hybrid"].retrieve(g.question, 5) for g in items}
        return build_contexts(hits, settings, titles=titles)

    judge = make_offline_judge(DEFAULT_JUDGE)
    tok = Tokenizer(TokenizerSettings(stemmer="english"))
    answerable = [g for g in graded if g.answerable and g.answer_type != "boolean"]
    threshold = published_threshold()
    vectors: dict[str, np.ndarray] = {}

    def similarity(question: str, text: str) -> float:
        for t in (question, text):
            if t not in vectors:
                vectors[t] = embed([t], ix.embedder)[0]
        return float(vectors[question] @ vectors[text])

    res = {
        # the corpus vectors (hence hybrid's sources) depend on it: bf16 where the CPU has it
        "passage_backend": default_passage_backend(),
        "threshold": threshold,
        "judge": DEFAULT_JUDGE,
        "declined_score": 0.0,
        "held_out": score_questions(
            held,
            contexts(held),
            judge,
            tok,
            threshold=threshold,
            with_rules=True,
            similarity=similarity,
        ),
        "graded_slice_ceilings_only": score_questions(
            answerable, contexts(answerable), judge, tok, threshold=threshold, with_rules=False
        ),
    }
    if out:
        write_json(res, out)
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="outputs/bench/extractive_spans.json")
    r = run(ap.parse_args(argv).out)
    for part in ("held_out", "graded_slice_ceilings_only"):
        for name, v in r[part]["rules"].items():
            print(f"{part:28s} {name:48s} F1 {v['mean']:.3f} {v['ci']}")
    for part in ("held_out", "graded_slice_ceilings_only"):
        for name, v in r[part]["oracle_ceilings"].items():
            print(f"{part:28s} ceiling, {name:16s} F1 {v['mean']:.3f} {v['ci']} (n={v['n']})")


if __name__ == "__main__":
    main()
