from __future__ import annotations

import pydantic
import pytest

from rag.llm.settings import LLMSettings, keys_from_env


def test_keys_only_from_the_three_variables():
    env = {
        "OPENAI_API_KEY": "sk-from-env-123",
        "GROQ_API_KEY": "   ",  # blank counts as missing
        "ANTHROPIC_KEY": "wrong-name",  # not the documented variable
    }
    keys = keys_from_env(env)
    assert keys.get("openai").get_secret_value() == "sk-from-env-123"
    assert keys.get("groq") is None and keys.get("anthropic") is None
    assert keys.get("local") is None
    assert "sk-from-env-123" not in repr(keys) and "sk-from-env-123" not in str(keys)


def test_settings_forbid_unknown_keys_and_check_bounds():
    with pytest.raises(pydantic.ValidationError, match="openai_api_key"):
        LLMSettings(openai_api_key="sk-x")  # keys never live in settings
    with pytest.raises(pydantic.ValidationError, match="max_attempts"):
        LLMSettings(max_attempts=0)


def test_models_frame_shows_reason_for_unavailable():
    from rag.llm.commands import models_frame
    from rag.llm.settings import ApiKeys

    f = models_frame(LLMSettings(), ApiKeys()).set_index("model")
    assert f.loc["gpt-4o", "reason"] == "no key: set OPENAI_API_KEY"
    assert not f.loc["gpt-4o", "available"]
    assert f.loc["gpt-4o-mini", "usd_in_per_m"] == 0.15
