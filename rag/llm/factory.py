"""Build chat models from settings: the one place SDK clients are constructed.

A model is named by a registered bare name or ``provider:model`` (:mod:`rag.llm.names`).
Keys are read from the environment only by :func:`rag.llm.settings.keys_from_env`, called here
when the caller passes none, and self-hosted endpoints by
:func:`rag.llm.settings.endpoints_from_env` when the settings name none;
SDK clients get ``max_retries=0`` (our retries are the only ones), the configured timeout and base
URL, and an optional injected ``httpx.Client``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from rag.errors import ConfigError, LLMError, ProviderUnavailable
from rag.llm.anthropic_chat import AnthropicBackend
from rag.llm.assembled import ASSEMBLED, assembled_path
from rag.llm.base import ChatModel
from rag.llm.cache import CompletionCache
from rag.llm.gguf import check_context, check_gguf_path, file_sha256, read_gguf
from rag.llm.local import LocalBackend, engine_missing, find_gguf, resolve_engine
from rag.llm.meter import CostMeter
from rag.llm.model import Backend, CachedChatModel
from rag.llm.names import ModelRef
from rag.llm.openai_chat import OpenAIChatBackend
from rag.llm.registry import MODELS, ModelSpec, parse_model, resolve_model
from rag.llm.settings import (
    ENDPOINT_ENV,
    KEY_ENV,
    ApiKeys,
    LLMSettings,
    endpoints_from_env,
    keys_from_env,
)

log = logging.getLogger(__name__)

_SDK = {
    "openai": "openai",
    "anthropic": "anthropic",
    "groq": "groq",
    "ollama": "openai",
    "openai-compatible": "openai",
}

#: One local backend per (engine, threads, weights, workers[, file, context]), so several model
#: objects share loaded weights.
_LOCAL: dict[tuple[Any, ...], LocalBackend] = {}


def _base_url(provider: str, settings: LLMSettings, endpoints: Mapping[str, str]) -> str | None:
    own = settings.ollama_base_url if provider == "ollama" else settings.openai_compatible_base_url
    return own or endpoints.get(provider)


def _gguf_ref(ref: ModelRef) -> ModelRef:
    """``gguf:PATH`` of an assembled local model (``local:NAME``); any other reference as is.

    Raises:
        ProviderUnavailable: the assembled file is absent (the message names the command).
    """
    if ref.provider == "local" and ref.model in ASSEMBLED:
        return ModelRef("gguf", str(assembled_path(ref.model)))
    return ref


def _unavailable_reason(
    provider: str,
    settings: LLMSettings,
    keys: ApiKeys,
    ref: ModelRef | None = None,
    endpoints: Mapping[str, str] | None = None,
) -> str | None:
    if ref is not None and ref.provider == "local" and ref.model in ASSEMBLED:
        try:
            ref = _gguf_ref(ref)
        except ProviderUnavailable as e:
            return str(e)
    if provider == "local":
        try:
            find_gguf()
        except ProviderUnavailable as e:
            return str(e)
        return engine_missing(resolve_engine(settings.local_backend))
    if provider == "gguf":
        if (why := engine_missing("llama_cpp")) is not None:
            return why
        try:
            check_gguf_path(ref.model if ref is not None else "")
        except ConfigError as e:
            return str(e)
        return None
    if importlib.util.find_spec(_SDK[provider]) is None:
        return f"Python package {_SDK[provider]!r} not installed"
    if provider in ENDPOINT_ENV:
        endpoints = endpoints_from_env() if endpoints is None else endpoints
        if _base_url(provider, settings, endpoints) is None:
            return (
                f"no endpoint: set {ENDPOINT_ENV[provider]} or LLMSettings."
                f"{provider.replace('-', '_')}_base_url"
            )
        return None
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

    Names are registered bare names or ``provider:model``.

    Raises:
        ConfigError: an unknown bare name or provider (a typo is an error, not a model "not run").
    """
    settings = settings or LLMSettings()
    keys = keys_from_env() if keys is None else keys
    refs = {name: parse_model(name) for name in names}
    specs = {name: resolve_model(ref, settings) for name, ref in refs.items()}
    out = {}
    for name in names:
        why = _unavailable_reason(specs[name].provider, settings, keys, refs[name])
        if why is not None and refs[name].provider == "gguf":
            # a status label names a GGUF file by its name, never the folder it lives in
            why = why.replace(refs[name].model, PurePath(refs[name].model).name)
        out[name] = "run" if why is None else f"not run: {why}"
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


def _backend(
    spec: ModelSpec,
    settings: LLMSettings,
    keys: ApiKeys,
    endpoints: Mapping[str, str],
    http_client: Any,
) -> Backend:
    """The backend of a non-GGUF model: a self-hosted endpoint, the packaged model or an API."""
    if spec.provider in ENDPOINT_ENV:
        import openai

        secret = keys.get(spec.provider)
        client = openai.OpenAI(
            base_url=_base_url(spec.provider, settings, endpoints),
            # self-hosted servers mostly take no key; the SDK insists on one
            api_key=secret.get_secret_value() if secret is not None else "no-key",
            timeout=settings.timeout_s,
            max_retries=0,
            **({"http_client": http_client} if http_client is not None else {}),
        )
        return OpenAIChatBackend(client, spec.provider)
    if spec.provider == "local":
        k = (
            resolve_engine(settings.local_backend),
            settings.local_threads,
            settings.local_weights,
            settings.local_workers,
        )
        if k not in _LOCAL:
            _LOCAL[k] = LocalBackend(k[0], threads=k[1], weights=k[2], workers=k[3])
        return _LOCAL[k]
    secret = keys.get(spec.provider)
    if secret is None:  # pragma: no cover - ruled out by _unavailable_reason
        raise ProviderUnavailable(f"no key: set {KEY_ENV[spec.provider]}")
    client = _sdk_client(spec.provider, settings, secret.get_secret_value(), http_client)
    if spec.provider == "anthropic":
        return AnthropicBackend(client)
    return OpenAIChatBackend(client, spec.provider)


def _gguf_backend(
    ref: ModelRef, spec: ModelSpec, settings: LLMSettings, min_context: int | None
) -> tuple[ModelSpec, LocalBackend]:
    """The spec (API id ``sha256:<digest>``, the context it runs with) and the shared llama.cpp
    backend of a GGUF file; the context budget is checked before any weights load."""
    info = read_gguf(ref.model)
    n_ctx = min(info.context_length, settings.gguf_context)
    if min_context is not None:
        check_context(info, n_ctx, min_context)
    spec = dataclasses.replace(
        spec, api_model=f"sha256:{file_sha256(info.path)}", context_length=n_ctx
    )
    k = ("gguf", str(info.path), settings.local_threads, settings.local_workers, n_ctx)
    if k not in _LOCAL:
        _LOCAL[k] = LocalBackend(
            "llama_cpp",
            threads=settings.local_threads,
            workers=settings.local_workers,
            path=info.path,
            context_tokens=n_ctx,
        )
    return spec, _LOCAL[k]


def make_chat_model(
    name: str | ModelRef,
    settings: LLMSettings | None = None,
    *,
    cache: CompletionCache | None = None,
    meter: CostMeter | None = None,
    http_client: Any = None,
    keys: ApiKeys | None = None,
    endpoints: Mapping[str, str] | None = None,
    min_context: int | None = None,
) -> CachedChatModel:
    """A ready :class:`~rag.llm.base.ChatModel` for a model name.

    Args:
        name: a registered bare name or ``provider:model`` (:mod:`rag.llm.names`).
        settings: LLM settings (defaults when None).
        cache: the completion cache (None: no caching).
        meter: the run's cost meter (None: not metered).
        http_client: an ``httpx.Client`` handed to the SDK (proxies, tests).
        keys: API keys (None: read from the environment by :func:`keys_from_env`).
        endpoints: base URLs of self-hosted providers (None: :func:`endpoints_from_env`); the
            settings' own base URLs win.
        min_context: prompt + answer tokens the caller needs; a model whose known context is
            shorter is refused before any work.

    Raises:
        ConfigError: unknown bare name or provider (the message lists the known ones), or a
            context shorter than ``min_context``.
        ProviderUnavailable: missing key (naming the variable), endpoint, SDK or weights file.
    """
    ref = parse_model(name) if isinstance(name, str) else name
    settings = settings or LLMSettings()
    keys = keys_from_env() if keys is None else keys
    endpoints = endpoints_from_env() if endpoints is None else endpoints
    spec = resolve_model(ref, settings, endpoints=endpoints)  # an endpoint's price: where it is
    why = _unavailable_reason(spec.provider, settings, keys, ref, endpoints)
    if why is not None:
        raise ProviderUnavailable(f"model {str(name)!r} ({spec.provider}) unavailable: {why}")
    backend: Backend
    if spec.provider == "gguf":
        spec, backend = _gguf_backend(_gguf_ref(ref), spec, settings, min_context)
    else:
        if min_context is not None and spec.context_length is not None:
            if min_context > spec.context_length:
                raise ConfigError(
                    f"model {spec.name!r}: {min_context} tokens needed, but its context is "
                    f"{spec.context_length} tokens; shorten the prompts or the answer budget"
                )
        backend = _backend(spec, settings, keys, endpoints, http_client)
    return CachedChatModel(spec, backend, settings, cache=cache, meter=meter)


def make_cache(settings: LLMSettings | None = None) -> CompletionCache:
    """The completion cache at ``settings.cache_dir`` (default ``cache_dir('llm')``)."""
    settings = settings or LLMSettings()
    return CompletionCache(settings.cache_dir)
