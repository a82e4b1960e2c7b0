"""Settings of the LLM layer, and the one place API keys and endpoints are read from the env.

Keys come only from ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GROQ_API_KEY`` and (optional, for
an OpenAI-compatible endpoint) ``RAG_OPENAI_COMPATIBLE_API_KEY``, read by :func:`keys_from_env`;
self-hosted endpoints come from ``RAG_OPENAI_COMPATIBLE_BASE_URL`` and ``OLLAMA_HOST``, read by
:func:`endpoints_from_env` when the settings name none, and the price a user states for an endpoint
on another machine from ``RAG_OPENAI_COMPATIBLE_PRICE`` / ``RAG_OLLAMA_PRICE``
(``"IN,OUT"`` USD per 1M tokens), read by :func:`prices_from_env`. All are passed down
explicitly, so tests hand in fake keys and nothing deep in the code reads the environment. Keys are
held as :class:`pydantic.SecretStr` so a repr, a log line or a traceback shows ``**********``,
never the key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from rag.errors import ConfigError
from rag.shard import default_shards

log = logging.getLogger(__name__)

#: Environment variable holding each remote provider's API key.
KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "groq": "GROQ_API_KEY",
}
#: The optional key of an OpenAI-compatible endpoint (most self-hosted servers need none).
COMPATIBLE_KEY_ENV = "RAG_OPENAI_COMPATIBLE_API_KEY"
#: Where the base URLs of self-hosted endpoints come from when the settings leave them None.
ENDPOINT_ENV: dict[str, str] = {
    "openai-compatible": "RAG_OPENAI_COMPATIBLE_BASE_URL",
    "ollama": "OLLAMA_HOST",
}
#: Ollama's address when ``OLLAMA_HOST`` is unset (its own default).
OLLAMA_DEFAULT = "http://127.0.0.1:11434/v1"
#: Where a user states the price of a self-hosted endpoint: ``"IN,OUT"`` USD per 1M tokens.
PRICE_ENV: dict[str, str] = {
    "openai-compatible": "RAG_OPENAI_COMPATIBLE_PRICE",
    "ollama": "RAG_OLLAMA_PRICE",
}
#: USD per 1M input and output tokens.
UsdPerM = tuple[
    Annotated[float, Field(ge=0, allow_inf_nan=False)],
    Annotated[float, Field(ge=0, allow_inf_nan=False)],
]


class LLMSettings(BaseModel):
    """How the LLM layer reaches providers, retries, caches and runs the local model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    openai_base_url: str | None = Field(
        None, description="OpenAI API base URL (None: the SDK default). Tests use 127.0.0.1."
    )
    anthropic_base_url: str | None = Field(
        None, description="Anthropic API base URL (None: the SDK default)."
    )
    groq_base_url: str | None = Field(None, description="Groq API base URL (None: SDK default).")
    openai_compatible_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible endpoint serving openai-compatible:NAME, "
        "e.g. http://127.0.0.1:8000/v1 (None: $RAG_OPENAI_COMPATIBLE_BASE_URL).",
    )
    ollama_base_url: str | None = Field(
        None,
        description="Ollama's OpenAI-compatible base URL for ollama:NAME "
        "(None: $OLLAMA_HOST + /v1, else http://127.0.0.1:11434/v1).",
    )
    openai_compatible_price: UsdPerM | None = Field(
        None,
        description="USD per 1M input and output tokens of the openai-compatible endpoint, e.g. "
        '(0.1, 0.4) (None: $RAG_OPENAI_COMPATIBLE_PRICE="0.1,0.4"). Without one, an endpoint '
        "on this machine costs $0 (self-hosted) and one on another host is 'price unknown'.",
    )
    ollama_price: UsdPerM | None = Field(
        None,
        description="USD per 1M input and output tokens of the Ollama endpoint "
        "(None: $RAG_OLLAMA_PRICE); priced like openai_compatible_price.",
    )
    gguf_context: int = Field(
        8192,
        ge=256,
        le=1 << 20,
        description="Context tokens llama.cpp allocates for a gguf: model (capped by the file's "
        "own context length).",
    )
    timeout_s: float = Field(60.0, gt=0, le=600, description="Per-request timeout in seconds.")
    max_attempts: int = Field(
        5, ge=1, le=20, description="Attempts per call, first one included, before LLMError."
    )
    backoff_initial_s: float = Field(
        1.0, ge=0, le=60, description="Initial backoff before the first retry (doubles each time)."
    )
    backoff_max_s: float = Field(30.0, ge=0, le=600, description="Cap on one backoff wait.")
    backoff_jitter_s: float = Field(
        1.0, ge=0, le=60, description="Upper bound of the random jitter added to each wait."
    )
    concurrency: int = Field(
        4, ge=1, le=64, description="Maximum simultaneous requests per model (complete_many)."
    )
    cache_enabled: bool = Field(True, description="Serve repeated calls from the disk cache.")
    cache_dir: str | None = Field(
        None, description="Cache folder (None: rag.paths.cache_dir('llm'))."
    )
    local_backend: Literal["auto", "llama_cpp", "transformers"] = Field(
        "auto",
        description="Engine for the local GGUF model; auto: llama_cpp if installed, else "
        "transformers (rag/llm/local.py says why).",
    )
    local_threads: int = Field(2, ge=1, le=64, description="CPU threads for the local model.")
    local_workers: int = Field(
        default_factory=default_shards,
        ge=1,
        le=64,
        description="llama.cpp instances for sharded calls (rag.shard): answerers and "
        "retrievers that map many prompts run one pinned shard per instance, each with "
        "local_threads // local_workers threads (two single-thread instances serve more calls "
        "per second than one 2-thread instance: outputs/bench/llm_shards.json); 1: one "
        "instance, calls in order. "
        "Default: $RAG_SHARDS or 2 (`rag sweep` sets 1 for cells run side by side).",
    )
    local_weights: Literal["q4_1", "f16", "bf16"] = Field(
        "bf16",
        description="Weights llama.cpp runs: the packaged Q4_1 file, or its values converted "
        "once to f16 / bf16 (cached; faster prompt evaluation where the CPU has bf16 "
        "instructions, see outputs/bench/local_weights.json). transformers always dequantises "
        "the Q4_1 file to float32.",
    )


class ApiKeys(BaseModel):
    """API keys per remote provider; a missing key makes that provider unavailable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    openai: SecretStr | None = None
    anthropic: SecretStr | None = None
    groq: SecretStr | None = None
    openai_compatible: SecretStr | None = None

    def get(self, provider: str) -> SecretStr | None:
        """The key for a provider (None for a local provider or a missing key)."""
        if provider == "openai-compatible":
            return self.openai_compatible
        return getattr(self, provider, None) if provider in KEY_ENV else None


def keys_from_env(environ: Mapping[str, str] | None = None) -> ApiKeys:
    """Read the API keys from the environment: the only function that does.

    Args:
        environ: the mapping to read (default ``os.environ``); empty values count as missing.
    """
    env = os.environ if environ is None else environ
    found = {p: SecretStr(env[v]) for p, v in KEY_ENV.items() if env.get(v, "").strip()}
    if env.get(COMPATIBLE_KEY_ENV, "").strip():
        found["openai_compatible"] = SecretStr(env[COMPATIBLE_KEY_ENV])
    log.debug("API keys present for: %s", sorted(found) or "none")
    return ApiKeys(**found)


def _v1(url: str) -> str:
    """``host:port`` or a URL without a path, as an OpenAI-compatible base URL ending in /v1."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    scheme, _, rest = url.partition("://")
    return url if "/" in rest else f"{scheme}://{rest}/v1"


def endpoints_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Base URLs of the self-hosted providers from the environment: the only function that reads
    them. ``OLLAMA_HOST`` takes Ollama's own forms (``127.0.0.1:11434``, ``http://host:11434``)
    and gets ``/v1`` appended; without it Ollama is at :data:`OLLAMA_DEFAULT`."""
    env = os.environ if environ is None else environ
    out = {"ollama": OLLAMA_DEFAULT}
    for provider, var in ENDPOINT_ENV.items():
        if value := env.get(var, "").strip():
            out[provider] = _v1(value) if provider == "ollama" else value
    return out


def parse_price(text: str, source: str) -> UsdPerM:
    """``"IN,OUT"`` (USD per 1M input and output tokens) as a pair of non-negative floats.

    Raises:
        ConfigError: not two non-negative numbers; the message names ``source`` and the value.
    """
    parts = [p.strip() for p in text.split(",")]
    try:
        usd_in, usd_out = (float(p) for p in parts)
    except ValueError:
        usd_in = usd_out = -1.0
    if len(parts) != 2 or not (0 <= usd_in < float("inf") and 0 <= usd_out < float("inf")):
        raise ConfigError(
            f"{source}={text!r}: give the price as IN,OUT USD per 1M input and output tokens, "
            'e.g. "0.10,0.40"'
        )
    return usd_in, usd_out


def prices_from_env(environ: Mapping[str, str] | None = None) -> dict[str, tuple[UsdPerM, str]]:
    """User-stated prices of the self-hosted providers from the environment, each with the
    variable it came from: the only function that reads them.

    Raises:
        ConfigError: a set variable that is not ``IN,OUT`` (named with its value).
    """
    env = os.environ if environ is None else environ
    return {
        provider: (parse_price(value, var), var)
        for provider, var in PRICE_ENV.items()
        if (value := env.get(var, "").strip())
    }
