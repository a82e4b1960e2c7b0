"""Settings of the LLM layer, and the one place API keys are read from the environment.

Keys come only from ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` and ``GROQ_API_KEY``, read by
:func:`keys_from_env` and passed down explicitly, so tests hand in fake keys and nothing deep in
the code reads the environment. Keys are held as :class:`pydantic.SecretStr` so a repr, a log
line or a traceback shows ``**********``, never the key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from rag.shard import default_shards

log = logging.getLogger(__name__)

#: Environment variable holding each remote provider's API key.
KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "groq": "GROQ_API_KEY",
}


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

    def get(self, provider: str) -> SecretStr | None:
        """The key for a provider (None for the local provider or a missing key)."""
        return getattr(self, provider, None) if provider in KEY_ENV else None


def keys_from_env(environ: Mapping[str, str] | None = None) -> ApiKeys:
    """Read the API keys from the environment: the only function that does.

    Args:
        environ: the mapping to read (default ``os.environ``); empty values count as missing.
    """
    env = os.environ if environ is None else environ
    found = {p: SecretStr(env[v]) for p, v in KEY_ENV.items() if env.get(v, "").strip()}
    log.debug("API keys present for: %s", sorted(found) or "none")
    return ApiKeys(**found)
