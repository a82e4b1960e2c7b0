"""Fixtures for the LLM layer: local fake provider servers, fast retry settings, throwaway keys."""

from __future__ import annotations

import secrets

import pytest
from pydantic import SecretStr

from rag.llm.cache import CompletionCache
from rag.llm.meter import CostMeter
from rag.llm.settings import ApiKeys, LLMSettings
from rag.llm.testing import FakeLLMServer


@pytest.fixture()
def keys() -> ApiKeys:
    """Random throwaway keys, distinct per test, so a leak is greppable and never real."""
    return ApiKeys(
        openai=SecretStr("sk-local-oa-" + secrets.token_hex(16)),
        anthropic=SecretStr("sk-local-an-" + secrets.token_hex(16)),
        groq=SecretStr("gsk-local-" + secrets.token_hex(16)),
    )


@pytest.fixture()
def oai_server():
    with FakeLLMServer("openai", usage=(1000, 500)) as s:
        yield s


@pytest.fixture()
def anth_server():
    with FakeLLMServer("anthropic", usage=(1000, 500)) as s:
        yield s


def fast_settings(**kw) -> LLMSettings:
    """Settings with millisecond backoff so retry tests take no time."""
    base = dict(
        timeout_s=2.0,
        max_attempts=3,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        backoff_jitter_s=0.01,
        concurrency=2,
    )
    base.update(kw)
    return LLMSettings(**base)


@pytest.fixture()
def settings(oai_server, anth_server) -> LLMSettings:
    return fast_settings(
        openai_base_url=f"{oai_server.url}/v1",
        groq_base_url=oai_server.url,
        anthropic_base_url=anth_server.url,
    )


@pytest.fixture()
def cache(tmp_path):
    c = CompletionCache(tmp_path / "llm-cache")
    yield c
    c.close()


@pytest.fixture()
def meter() -> CostMeter:
    return CostMeter()
