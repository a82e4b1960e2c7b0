"""Build chat models from settings: the one place SDK clients are constructed.

Keys are read from the environment only by :func:`rag.llm.settings.keys_from_env`, called here
when the caller passes none; SDK clients get ``max_retries=0`` (our retries are the only ones),
the configured timeout and base URL, and an optional injected ``httpx.Client``.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from typing import Any

from rag.errors import LLMError, ProviderUnavailable
from rag.llm.anthropic_chat import AnthropicBackend
from rag.llm.base import ChatModel
from rag.llm.cache import CompletionCache
from rag.llm.local import LocalBackend, engine_missing, find_gguf, resolve_engine
from rag.llm.meter import CostMeter
from rag.llm.model import Backend, CachedChatModel
from rag.llm.openai_chat import OpenAIChatBackend
from rag.llm.registry import MODELS, get_model
from rag.llm.settings import KEY_ENV, ApiKeys, LLMSettings, keys_from_env

log = logging.getLogger(__name__)

_SDK = {"openai": "openai", "anthropic": "anthropic", "groq": "groq"}

#: One local backend per (engine, threads, weights), so several model objects share loaded weights.
_LOCAL: dict[tuple[str, int, str, int], LocalBackend] = {}


def _unavailable_reason(provider: str, settings: LLMSettings, keys: ApiKeys) -> str | None:
    if provider == "local":
        try:
            find_gguf()
        except ProviderUnavailable as e:
            return str(e)
        return engine_missing(resolve_engine(settings.local_backend))
    if importlib.util.find_spec(_SDK[provider]) is None:
        return f"Python package {_SDK[provider]!r} not installed"
    if keys.get(provider) is None:
        return f"no key: set {KEY_ENV[provider]}"
    return None


def available_models(
    settings: LLMSettings | None = None, keys: ApiKeys | None = None
) -> list[tuple[str, bool, str]]:
    """Every registered model as ``(name, available, reason)``, sorted by name.

    ``reason`` is "ok" or why the model cannot run here (e.g. "no key: set GROQ_API_KEY"), so a
    notebook can report "not run: no key" instead of skipping silently.
    """
    settings = settings or LLMSettings()
    keys = keys_from_env() if keys is None else keys
    rows = []
    for name in sorted(MODELS):
        why = _unavailable_reason(MODELS[name].provider, settings, keys)
        rows.append((name, why is None, why or "ok"))
    return rows


def model_status(
    names: Sequence[str], settings: LLMSettings | None = None, keys: ApiKeys | None = None
) -> dict[str, str]:
    """``{name: "run" | "not run: <why>"}`` for the named models, in the order given.

    Raises:
        ConfigError: a name is not registered (a typo is an error, not a model "not run").
    """
    for name in names:
        get_model(name)
    available = {n: (ok, why) for n, ok, why in available_models(settings, keys)}
    out = {}
    for name in names:
        ok, why = available[name]
        out[name] = "run" if ok else f"not run: {why}"
    return out


#: The one tiny request :func:`model_failure` sends (cached like any call, so a re-run is free).
HEALTH_CHECK = [{"role": "user", "content": "Reply with the word OK."}]


def model_failure(chat: ChatModel) -> str | None:
    """Why a configured model cannot answer right now (one tiny call), or None when it can.

    A key can be set while the API is unreachable or failing; checking once before a batch turns
    that into one reason ("failed: RetriesExhausted: ...") instead of a retry ladder per item.
    """
    try:
        chat.complete(HEALTH_CHECK, max_tokens=2, prompt_version="health-1")
    except LLMError as e:
        return f"{type(e).__name__}: {e}"
    return None


def _sdk_client(provider: str, settings: LLMSettings, key: str, http_client: Any) -> Any:
    common: dict[str, Any] = {
        "api_key": key,
        "timeout": settings.timeout_s,
        "max_retries": 0,
    }
    if http_client is not None:
        common["http_client"] = http_client
    if provider == "openai":
        import openai

        return openai.OpenAI(base_url=settings.openai_base_url, **common)
    if provider == "groq":
        import groq

        return groq.Groq(base_url=settings.groq_base_url, **common)
    import anthropic

    return anthropic.Anthropic(base_url=settings.anthropic_base_url, **common)


def make_chat_model(
    name: str,
    settings: LLMSettings | None = None,
    *,
    cache: CompletionCache | None = None,
    meter: CostMeter | None = None,
    http_client: Any = None,
    keys: ApiKeys | None = None,
) -> CachedChatModel:
    """A ready :class:`~rag.llm.base.ChatModel` for a registered model name.

    Args:
        name: a name from :mod:`rag.llm.registry`.
        settings: LLM settings (defaults when None).
        cache: the completion cache (None: no caching).
        meter: the run's cost meter (None: not metered).
        http_client: an ``httpx.Client`` handed to the SDK (proxies, tests).
        keys: API keys (None: read from the environment by :func:`keys_from_env`).

    Raises:
        ConfigError: unknown model name (the message lists the known ones).
        ProviderUnavailable: missing key (naming the variable), SDK or local weights.
    """
    spec = get_model(name)
    settings = settings or LLMSettings()
    keys = keys_from_env() if keys is None else keys
    why = _unavailable_reason(spec.provider, settings, keys)
    if why is not None:
        raise ProviderUnavailable(f"model {name!r} ({spec.provider}) unavailable: {why}")
    backend: Backend
    if spec.provider == "local":
        k = (
            resolve_engine(settings.local_backend),
            settings.local_threads,
            settings.local_weights,
            settings.local_workers,
        )
        if k not in _LOCAL:
            _LOCAL[k] = LocalBackend(k[0], threads=k[1], weights=k[2], workers=k[3])
        backend = _LOCAL[k]
    else:
        secret = keys.get(spec.provider)
        if secret is None:  # pragma: no cover - ruled out by _unavailable_reason
            raise ProviderUnavailable(f"no key: set {KEY_ENV[spec.provider]}")
        client = _sdk_client(spec.provider, settings, secret.get_secret_value(), http_client)
        backend = (
            AnthropicBackend(client)
            if spec.provider == "anthropic"
            else OpenAIChatBackend(client, spec.provider)
        )
    return CachedChatModel(spec, backend, settings, cache=cache, meter=meter)


def make_cache(settings: LLMSettings | None = None) -> CompletionCache:
    """The completion cache at ``settings.cache_dir`` (default ``cache_dir('llm')``)."""
    settings = settings or LLMSettings()
    return CompletionCache(settings.cache_dir)
