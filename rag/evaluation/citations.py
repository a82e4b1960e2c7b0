"""Faithfulness and citation precision / recall: pure functions over judged answers.

**Faithfulness** of an answer = supported claims / claims, judged against the whole retrieved
context. Refusals and claimless answers are not scored (they are counted, giving the *answered
rate*), and a judge failure is counted apart too: none of them enters the mean as 0 or 1.

**Citation recall and precision** follow ALCE (Gao et al., 2023, "Enabling Large Language Models
to Generate Text with Citations", Sec. 2.3), over units that are sentences (ALCE) or claims:

* recall of a unit = 1 if the concatenation of its cited sources entails it, else 0; a unit with
  no citation scores 0. Answer recall = mean over its units.
* a citation of a unit is *relevant* when the unit is supported by its cited sources jointly and
  either it is the unit's only citation, or it alone entails the unit, or the remaining
  citations without it do not. Answer precision = relevant citations / citations.

A citation to an id that is not among the sources counts as an empty source. Undefined cases are
``None`` with a reason: recall when the answer has no unit (refusal / no claims), precision when
it has no citation. Aggregates average the defined values and report how many were undefined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rag.answer.claims import ParsedAnswer
from rag.judge import AnswerJudgement

logger = logging.getLogger(__name__)

#: ``entails(claim, premise) -> bool``: does ``premise`` support ``claim``?
Entails = Callable[[str, str], bool]
#: Separator between concatenated sources (ALCE joins passages with newlines).
SOURCE_SEP = "\n"


@dataclass(frozen=True, slots=True)
class CitedUnit:
    """A sentence or claim with the source ids it cites."""

    text: str
    citations: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class UnitCitations:
    """Per-unit citation outcome: joint support and which citations were relevant."""

    text: str
    citations: tuple[int, ...]
    supported: bool
    relevant: tuple[bool, ...]
    unknown: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CitationScores:
    """Citation recall and precision of one answer (``None`` when undefined, see ``reason``)."""

    recall: float | None
    precision: float | None
    n_units: int
    n_citations: int
    units: tuple[UnitCitations, ...]
    reason: str = ""


def cited_units(
    parsed: ParsedAnswer, level: Literal["sentence", "claim"] = "sentence"
) -> list[CitedUnit]:
    """Units of citation scoring: claim-bearing sentences, or claims with their sentence's ids."""
    if level == "sentence":
        return [CitedUnit(s.text, s.citations) for s in parsed.claim_sentences]
    return [CitedUnit(c, s.citations) for s in parsed.claim_sentences for c in s.claims]


def _concat(ids: Sequence[int], sources: Mapping[int, str]) -> str:
    return SOURCE_SEP.join(sources.get(i, "") for i in ids)


def unit_citations(unit: CitedUnit, sources: Mapping[int, str], entails: Entails) -> UnitCitations:
    """Joint support and per-citation relevance of one unit (ALCE rules, module docstring)."""
    cites = unit.citations
    unknown = tuple(i for i in cites if i not in sources)
    if not cites:
        return UnitCitations(unit.text, cites, False, (), unknown)
    supported = entails(unit.text, _concat(cites, sources))
    if not supported:
        return UnitCitations(unit.text, cites, False, (False,) * len(cites), unknown)
    if len(cites) == 1:
        return UnitCitations(unit.text, cites, True, (True,), unknown)
    relevant = []
    for i in cites:
        alone = i in sources and entails(unit.text, sources[i])
        if alone:
            relevant.append(True)
            continue
        others = [j for j in cites if j != i]
        relevant.append(not entails(unit.text, _concat(others, sources)))
    return UnitCitations(unit.text, cites, True, tuple(relevant), unknown)


def citation_scores(
    units: Sequence[CitedUnit], sources: Mapping[int, str], entails: Entails
) -> CitationScores:
    """ALCE citation recall and precision of one answer."""
    per_unit = tuple(unit_citations(u, sources, entails) for u in units)
    n_cit = sum(len(u.citations) for u in per_unit)
    if not per_unit:
        return CitationScores(None, None, 0, 0, (), reason="no claim-bearing unit")
    recall = sum(u.supported for u in per_unit) / len(per_unit)
    if n_cit == 0:
        return CitationScores(recall, None, len(per_unit), 0, per_unit, reason="no citation")
    precision = sum(sum(u.relevant) for u in per_unit) / n_cit
    return CitationScores(recall, precision, len(per_unit), n_cit, per_unit)


def mean_defined(values: Sequence[float | None]) -> dict:
    """Mean of the defined values, with how many were defined and undefined (never NaN)."""
    defined = [v for v in values if v is not None]
    return {
        "mean": sum(defined) / len(defined) if defined else None,
        "n": len(defined),
        "n_undefined": len(values) - len(defined),
    }


def citation_metrics(
    answers: Sequence[tuple[Sequence[CitedUnit], Mapping[int, str]]], entails: Entails
) -> dict:
    """Citation recall / precision per answer and aggregated (mean over defined answers)."""
    scores = [citation_scores(u, s, entails) for u, s in answers]
    recall = [s.recall for s in scores]
    precision = [s.precision for s in scores]
    return {
        "per_answer": scores,
        "citation_recall": mean_defined(recall),
        "citation_precision": mean_defined(precision),
    }


def faithfulness(judgement: AnswerJudgement) -> float | None:
    """Supported claims / claims for a scored judgement; ``None`` for anything not scored."""
    if judgement.status != "scored" or not judgement.claims:
        return None
    return judgement.n_supported / len(judgement.claims)


def faithfulness_metrics(judgements: Sequence[AnswerJudgement]) -> dict:
    """Faithfulness per answer and aggregated; refusals, claimless answers and failures counted.

    ``answered_rate`` = answers with claims (scored or judge failure) / all answers; the mean is
    over scored answers only.
    """
    per = [faithfulness(j) for j in judgements]
    counts = {s: sum(j.status == s for j in judgements) for s in ("scored", "refusal", "no_claims")}
    failures = sum(j.status == "judge_failure" for j in judgements)
    n = len(judgements)
    return {
        "per_answer": per,
        "faithfulness": mean_defined(per)["mean"],
        "n_answers": n,
        "n_scored": counts["scored"],
        "n_refusal": counts["refusal"],
        "n_no_claims": counts["no_claims"],
        "n_judge_failure": failures,
        "answered_rate": (counts["scored"] + failures) / n if n else None,
        "claims_per_answer": mean_defined(
            [len(j.claims) if j.status == "scored" else None for j in judgements]
        )["mean"],
    }
