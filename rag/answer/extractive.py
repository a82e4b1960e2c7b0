"""The model-free extractive answerer: source sentences that best match the question, cited.

Scoring is BM25 (Robertson & Zaragoza 2009) of the question's terms against each source sentence,
with IDF over the context's sentences (:func:`rag.index.bm25.bm25_scores`, Lucene's IDF since a
question term easily occurs in half of a few dozen sentences), or, with an injected embedder, the
cosine of question and sentence vectors. Declining is a fixed share of the question's terms the
best sentence must contain (:func:`rag.text.coverage.term_coverage`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rag.answer.base import Answer, make_answer, settings_with
from rag.answer.claims import source_sentences
from rag.answer.context import Context
from rag.answer.prompts import REFUSAL
from rag.index.bm25 import Tokenizer, TokenizerSettings, bm25_scores
from rag.ir import EmbedderLike
from rag.text.coverage import term_coverage


class ExtractiveSettings(BaseModel):
    """The model-free answerer: which sentences it copies and when it declines."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_sentences: int = Field(2, ge=1, le=3, description="Sentences stitched into the answer.")
    min_coverage: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Decline unless the best sentence holds this share of the question's "
        "distinct content terms (a fixed lexical rule, not tuned on gold labels).",
    )
    min_words: int = Field(5, ge=1, le=50, description="Ignore shorter source sentences.")
    max_words: int = Field(80, ge=5, le=500, description="Ignore longer source sentences.")
    k1: float = Field(1.2, ge=0.0, le=10.0, description="BM25 term-frequency saturation.")
    b: float = Field(0.75, ge=0.0, le=1.0, description="BM25 length normalisation.")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A source sentence the extractive answerer may copy, with its BM25 terms."""

    n: int
    position: int
    text: str
    terms: tuple[str, ...]


class ExtractiveAnswerer:
    """Copies the source sentences that best match the question, each with its citation.

    Scoring: every source sentence (``min_words``..``max_words`` words, existing bracket
    citations of the paper removed) is scored by BM25 of the question's distinct terms with the
    sentence as the document and IDF over the context's sentences,
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``; with an injected embedder the score is the
    cosine of question and sentence vectors instead. Terms are Porter2-stemmed, stopwords and
    question words removed (:class:`rag.index.bm25.Tokenizer`).

    Declining: the answer is :data:`~rag.answer.prompts.REFUSAL` unless the best sentence
    contains at least ``min_coverage`` of the question's distinct terms. The 0.5 default is a
    fixed a-priori rule ("at least half of what the question asks about is mentioned"), chosen
    without looking at the gold labels, so negative rejection measured on gold is not fitted to
    it. Only sentences that pass the same rule are stitched. Ties break by source number, then
    sentence position.

    Faithful by construction: every sentence is copied verbatim (whitespace aside) from the
    source it cites.

    Args:
        settings: :class:`ExtractiveSettings`; its fields may also be given as keywords.
        embedder: score by cosine of this embedder's vectors instead of BM25.
        name: answerer name.
    """

    def __init__(
        self,
        settings: ExtractiveSettings | None = None,
        *,
        embedder: EmbedderLike | None = None,
        name: str = "extractive",
        **overrides: object,
    ) -> None:
        self.settings = settings_with(ExtractiveSettings, settings, overrides)
        self.embedder = embedder
        self.name = name
        self._tok = Tokenizer(TokenizerSettings(stemmer="english"))

    def _candidates(self, context: Context) -> list[Candidate]:
        s = self.settings
        return [
            Candidate(n, i, clean, tuple(self._tok.document(clean)))
            for n, i, clean in source_sentences(context, s.min_words, s.max_words)
        ]

    def score(self, question: str, context: Context) -> list[tuple[float, float, Candidate]]:
        """``(score, coverage, sentence)`` for every candidate, best first."""
        s = self.settings
        cands = self._candidates(context)
        q_terms = sorted(set(self._tok.query(question)))
        if not cands or not q_terms:
            return []
        if self.embedder is not None:
            q = np.asarray(self.embedder.encode_queries([question]))[0]
            m = np.asarray(self.embedder.encode_passages([c.text for c in cands]))
            scores = m @ q
        else:
            scores = bm25_scores(
                q_terms, [c.terms for c in cands], k1=s.k1, b=s.b, idf_variant="lucene"
            )
        cover = [term_coverage(q_terms, set(c.terms)) for c in cands]
        rows = [
            (round(float(sc), 12), cv, c) for sc, cv, c in zip(scores, cover, cands, strict=True)
        ]
        rows.sort(key=lambda r: (-r[0], r[2].n, r[2].position))
        return rows

    def answer(self, question: str, context: Context) -> Answer:
        """The top sentences with their citations, or :data:`~rag.answer.prompts.REFUSAL`."""
        t0 = time.perf_counter()
        s = self.settings
        chosen = [c for _, cv, c in self.score(question, context) if cv >= s.min_coverage]
        chosen = chosen[: s.max_sentences]
        if not chosen:
            text = REFUSAL
        else:
            text = " ".join(f"{c.text.rstrip(' .!?;:')} [{c.n}]." for c in chosen)
        return make_answer(text, context, self.name, latency_s=time.perf_counter() - t0)


__all__ = ["Candidate", "ExtractiveAnswerer", "ExtractiveSettings"]
