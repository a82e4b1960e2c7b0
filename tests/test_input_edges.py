"""Input edges of the Python front door: a boolean is refused where a whole number is expected
(as HTTP refuses ``true``), and an error quotes at most ~200 characters of a bad value with its
length instead of repeating a megabyte of it."""

from __future__ import annotations

import pytest

from rag.serve.desk import AskArgs, Desk, JudgeArgs, SearchArgs, ToolInputError, validate
from tests.serve_support import tiny_lab


@pytest.fixture
def desk(tmp_cache, tmp_path):
    return Desk(tiny_lab(tmp_path / "served"))


@pytest.mark.parametrize("k", [True, False])
def test_a_boolean_k_is_refused_like_http_refuses_true(desk, k):
    with pytest.raises(ToolInputError, match="whole number is expected, not a boolean") as e:
        desk.search("fastText", k=k)
    assert e.value.field == "k"
    assert len(desk.search("fastText", k=2)["hits"]) == 2  # a whole number still works


def test_an_optional_whole_number_refuses_a_boolean_too():
    with pytest.raises(ToolInputError, match="not a boolean"):
        validate(AskArgs, question="q", k=True)


@pytest.mark.parametrize(
    "model, field, size",
    [(JudgeArgs, "source", 1_000_000), (SearchArgs, "query", 100_000)],
)
def test_an_oversized_value_is_quoted_short_with_its_length(model, field, size):
    kw = {"claim": "a claim", "source": "s"} if model is JudgeArgs else {"query": "q"}
    kw[field] = "x" * size
    with pytest.raises(ToolInputError) as e:
        validate(model, **kw)
    msg = str(e.value)
    assert len(msg) < 400, len(msg)
    assert f"({size:,} characters)" in msg and "at most" in msg
