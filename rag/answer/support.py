"""Which source sentence supports the statement a question asks about, by the offline judge?

The sharper extractive answerer, the decline gate and the post-hoc attribution filter all ask one
question of a faithfulness judge: *does this source span support this statement?* The judge is
injected (a :class:`rag.verdicts.ClaimJudge`, batched when it also has ``predict(pairs)``, such
as :class:`rag.judge.offline.OfflineJudge`); this floor never imports a judge.

Spans are the context's sentences (:func:`rag.text.sentences.split_sentences`, ``"answer"``
mode, existing bracket citations of the paper removed) and their clauses
(:func:`rag.answer.claims.split_claims`), so a shorter span can be chosen when it alone is
supported. The statement is the question's :func:`rag.answer.questions.declarative_form`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from rag.answer.claims import source_sentences, split_claims
from rag.answer.context import Context
from rag.errors import ConfigError
from rag.verdicts import ClaimJudge, Verdict


@dataclass(frozen=True, slots=True)
class Span:
    """A candidate answer span: a source sentence or one of its clauses, with its support.

    Attributes:
        n: the source number it comes from.
        position: sentence index within the source.
        clause: whether it is a clause of the sentence (False: the whole sentence).
        score: the judge's p(supported) of the statement given this span.
        label: the judge's label (supported / unsupported / not_found).
        reason: the judge's one-line reason.
    """

    n: int
    position: int
    text: str
    clause: bool
    score: float
    label: str
    reason: str


def candidate_spans(
    context: Context, *, min_words: int = 4, max_words: int = 80
) -> list[tuple[int, int, str, bool]]:
    """``(n, position, text, is_clause)`` for every sentence and multi-clause part of a context."""
    out = []
    for n, i, clean in source_sentences(context, min_words, max_words):
        out.append((n, i, clean, False))
        parts = split_claims(clean)
        if len(parts) > 1:
            out.extend((n, i, p, True) for p in parts if len(p.split()) >= min_words)
    return out


def judge_pairs(judge: ClaimJudge, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
    """Verdicts for ``(claim, premise)`` pairs, batched when the judge has ``predict``."""
    if not pairs:
        return []
    predict = getattr(judge, "predict", None)
    if predict is not None:
        return list(predict(list(pairs)))
    return [judge.verdict(c, p) for c, p in pairs]


#: Scored spans of recent (judge, statement, context) requests: the extractive answerer, the
#: gate and the trade-off run ask the same question of the same context within one notebook.
_MEMO: dict[tuple[str, str, str], list[Span]] = {}
_MEMO_MAX = 2048


def support_spans(judge: ClaimJudge, statement: str, context: Context, **kw: int) -> list[Span]:
    """Every candidate span scored by the judge for ``statement``, best first.

    Ties (equal p(supported)) go to the shorter span, then source number, then position, so the
    order is deterministic. Results are memoised per judge content (its
    :attr:`~rag.verdicts.ClaimJudge.fingerprint`: the judge is deterministic), statement, context
    and span bounds, so asking again costs nothing.
    """
    key = (judge.fingerprint, statement, context.render() + repr(sorted(kw.items())))
    if key in _MEMO:
        return list(_MEMO[key])
    if len(_MEMO) >= _MEMO_MAX:
        _MEMO.clear()
    cands = candidate_spans(context, **kw)
    verdicts = judge_pairs(judge, [(statement, t) for _, _, t, _ in cands])
    spans = [
        Span(n, pos, t, cl, round(float(v.score), 6), v.label, v.reason)
        for (n, pos, t, cl), v in zip(cands, verdicts, strict=True)
    ]
    spans.sort(key=lambda s: (-s.score, len(s.text), s.n, s.position))
    _MEMO[key] = spans
    return list(spans)


def threshold_field(needs: str) -> Any:
    """A settings field holding a support threshold: the p(supported) ``needs`` (what must reach
    it), at most 1; negative, the default, defers to the judge's own (:func:`resolve_threshold`)."""
    return Field(
        -1.0,
        le=1.0,
        description=f"p(supported) {needs}; negative: the judge's own threshold "
        "(rag.answer.support.resolve_threshold).",
    )


def resolve_threshold(judge: ClaimJudge, threshold: float) -> float:
    """``threshold`` itself, or the judge's own decision threshold when it is negative.

    The offline judge's threshold was chosen by cross-validation on SciFact ``judge_train``
    (never on the corpus gold), so "-1: the judge's own" is a choice made before any dev result.

    Raises:
        ConfigError: a negative threshold with a judge that exposes none, or one above 1.
    """
    if threshold > 1.0:
        raise ConfigError(f"support threshold {threshold}: must be <= 1 (or < 0: the judge's own)")
    if threshold >= 0:
        return threshold
    fitted = getattr(judge, "fitted", None)
    if fitted is None or getattr(fitted, "threshold", None) is None:
        raise ConfigError(
            f"support threshold {threshold} means 'the judge's own', but {type(judge).__name__} "
            "exposes no fitted threshold; pass a value in [0, 1]"
        )
    return float(fitted.threshold)


__all__ = ["Span", "candidate_spans", "judge_pairs", "resolve_threshold", "support_spans"]
