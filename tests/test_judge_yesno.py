"""The yes/no judge reads P("yes") from one prefill, caches it, and thresholds it."""

from __future__ import annotations

import pytest

from rag.errors import JudgeError
from rag.judge.yesno import YesNoJudge, chatml
from rag.verdicts import ClaimJudge


def test_the_prompt_ends_where_the_answer_token_starts():
    p = chatml(" Claims hold. ", "A passage.\n")
    assert p.endswith("<|im_start|>assistant\n")
    assert "Passage: A passage.\n\nClaim: Claims hold.\n\n" in p


@pytest.fixture(scope="module")
def judge(tmp_cache_module):
    return YesNoJudge("smollm2-135m", threshold=0.5)


@pytest.fixture(scope="module")
def tmp_cache_module(tmp_path_factory):
    import os

    before = os.environ.get("RAG_CACHE_DIR")
    os.environ["RAG_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("RAG_CACHE_DIR")
    else:
        os.environ["RAG_CACHE_DIR"] = before


def test_scores_are_probabilities_cached_and_thresholded(judge):
    assert isinstance(judge, ClaimJudge)
    passage = "The model was trained on 1,000 labelled examples for three epochs."
    a = judge.score("The model saw 1,000 labelled examples.", passage)
    b = judge.score("The sky over Paris is green.", passage)
    assert 0.0 < a < 1.0 and 0.0 < b < 1.0 and a != b
    computed = judge.pairs_computed
    assert judge.score("The model saw 1,000 labelled examples.", passage) == a
    assert judge.pairs_computed == computed, "a repeated pair is read from the cache"
    v = judge.verdict("The model saw 1,000 labelled examples.", passage)
    assert v.score == a and v.label == ("supported" if a >= 0.5 else "unsupported")
    with pytest.raises(JudgeError, match="empty claim"):
        judge.score(" ", passage)
