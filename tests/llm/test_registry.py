from __future__ import annotations

import pytest

from rag.errors import ConfigError
from rag.llm.registry import PRICES_AS_OF, get_model, model_names


def test_cost_from_list_prices():
    # gpt-4o-mini: $0.15 / $0.60 per 1M -> 1000 in + 500 out = 0.00015 + 0.0003
    assert get_model("gpt-4o-mini").cost(1000, 500) == pytest.approx(0.00045)
    # claude-sonnet-4: $3 / $15 -> 2M in + 1M out = 6 + 15
    assert get_model("claude-sonnet-4").cost(2_000_000, 1_000_000) == pytest.approx(21.0)
    assert get_model("smollm2-135m").cost(10**6, 10**6) == 0.0


def test_required_models_and_providers():
    providers = {n: get_model(n).provider for n in model_names()}
    assert providers["gpt-4o"] == "openai"
    assert providers["claude-3-5-haiku"] == "anthropic"
    assert providers["llama-3.1-8b-instant"] == "groq"
    assert providers["llama-3.3-70b-versatile"] == "groq"
    assert providers["smollm2-135m"] == "local"
    assert PRICES_AS_OF[:4].isdigit()


def test_unknown_model_lists_known_names():
    with pytest.raises(ConfigError, match="unknown model 'gpt-5-ultra'.*gpt-4o-mini"):
        get_model("gpt-5-ultra")
