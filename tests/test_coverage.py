"""Term coverage, by hand: the one function behind the extractive answerers' decline rule and
the offline judge's coverage features."""

from __future__ import annotations

import pytest

from rag.text.coverage import term_coverage


def test_share_of_terms_found_counts_each_occurrence():
    assert term_coverage(["bm25", "fast", "index"], {"bm25", "index", "other"}) == 2 / 3
    # a repeated claim word counts twice (the judge's content stems keep repeats)
    assert term_coverage(["cat", "cat", "dog"], {"cat"}) == 2 / 3
    assert term_coverage([], {"cat"}) == 0.0
    assert term_coverage(["cat"], set()) == 0.0


def test_weights_and_the_unseen_term_default():
    idf = {"cat": 1.0, "dog": 3.0}
    assert term_coverage(["cat", "dog"], {"dog"}, idf) == pytest.approx(3.0 / 4.0)
    # "emu" has no weight: it takes the largest one (3.0), as rare as the rarest seen term
    assert term_coverage(["cat", "emu"], {"cat"}, idf) == pytest.approx(1.0 / 4.0)
    assert term_coverage(["cat", "emu"], {"cat"}, {}) == 0.5  # no weights at all: 1.0 each


def test_the_extractive_answerer_covers_distinct_question_terms():
    from rag.answer.context import assemble_context
    from rag.answer.extractive import ExtractiveAnswerer
    from rag.types import Hit

    ctx = assemble_context(
        [Hit("c1", "p1", 1, "", "Skipgram vectors use character n-grams of three to six.", 1.0)]
    )
    (score, cover, cand) = ExtractiveAnswerer().score("Which character n-grams are used?", ctx)[0]
    # query terms (stemmed, question words and stopwords dropped): charact, n, gram, use
    assert cover == 1.0 and score > 0
    (_, cover2, _) = ExtractiveAnswerer().score("Which character embeddings are used?", ctx)[0]
    assert cover2 == pytest.approx(2 / 3)  # charact, use found; embed not
