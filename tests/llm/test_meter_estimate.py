from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.llm.base import Completion
from rag.llm.estimate import estimate_cost, estimate_frame, prompt_tokens
from rag.llm.meter import CostMeter


def _c(model: str, provider: str, n_in: int, n_out: int, cost: float, cached: bool) -> Completion:
    return Completion("t", model, provider, n_in, n_out, cost, 0.5, cached)


def test_meter_splits_fresh_and_cached():
    m = CostMeter()
    m.record(_c("gpt-4o-mini", "openai", 1000, 500, 0.00045, False))
    m.record(_c("gpt-4o-mini", "openai", 1000, 500, 0.00045, True))
    m.record(_c("smollm2-135m", "local", 10, 5, 0.0, False))
    d = m.to_dict()
    assert d["total"]["calls"] == 3
    assert d["total"]["fresh_calls"] == 2 and d["total"]["cached_calls"] == 1
    assert d["total"]["input_tokens"] == 2010 and d["total"]["output_tokens"] == 1005
    assert d["total"]["cost_usd"] == pytest.approx(0.00045)  # the cached call spent nothing
    assert d["total"]["saved_usd"] == pytest.approx(0.00045)
    assert [r["model"] for r in d["by_model"]] == ["smollm2-135m", "gpt-4o-mini"]  # by provider
    frame = m.to_frame()
    assert list(frame["provider"]) == ["local", "openai", "total"]
    assert m.total_cost_usd == pytest.approx(0.00045)


def test_prompt_token_accounting_chars4():
    # "abcdefgh" = 8 chars -> 2 tokens; + 4 per message + 3 reply priming = 9
    assert prompt_tokens([{"role": "user", "content": "abcdefgh"}], lambda t: len(t) // 4) == 9


def test_estimate_by_hand():
    est = estimate_cost(
        ["abcdefgh", "abcdefghi"],
        ["gpt-4o-mini", "smollm2-135m"],
        output_tokens=100,
        method="chars/4",
    )
    # prompt 1: 2 + 4 + 3 = 9; prompt 2: ceil(9/4)=3 + 7 = 10 -> 19 input, 200 output
    mini = est[0]
    assert (mini.input_tokens, mini.output_tokens, mini.method) == (19, 200, "chars/4")
    assert mini.cost_usd == pytest.approx(19 * 0.15e-6 + 200 * 0.60e-6)
    assert est[1].cost_usd == 0.0
    assert list(estimate_frame(est)["model"]) == ["gpt-4o-mini", "smollm2-135m"]


def test_estimate_rejects_unknown_model_and_negative_output():
    with pytest.raises(ConfigError, match="unknown model"):
        estimate_cost(["x"], ["nope"])
    with pytest.raises(ConfigError, match="output_tokens=-1"):
        estimate_cost(["x"], ["gpt-4o"], output_tokens=-1)
