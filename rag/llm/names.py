"""Model names: ``provider:model`` wherever a model is named, parsed once into a ``ModelRef``.

- ``openai:gpt-4.1-mini``, ``anthropic:claude-haiku-4-5``, ``groq:llama-3.1-8b-instant`` — an API
  model (key from the provider's variable; any model id the provider serves).
- ``ollama:qwen2.5:7b`` — a model pulled into Ollama, reached through its OpenAI-compatible API at
  ``$OLLAMA_HOST`` (default ``http://127.0.0.1:11434/v1``); the model name may hold colons.
- ``openai-compatible:NAME`` — any OpenAI-compatible chat endpoint (vLLM, llama.cpp's server,
  LM Studio) at ``LLMSettings.openai_compatible_base_url`` or ``$RAG_OPENAI_COMPATIBLE_BASE_URL``.
- ``gguf:/path/to/model.gguf`` — a local GGUF chat model run in-process by llama.cpp with the
  file's own chat template.
- ``local:smollm2-135m`` — the packaged default; ``local:qwen2.5-coder-0.5b`` — a GGUF file
  assembled and verified by ``rag models fetch qwen2.5-coder-0.5b`` (:mod:`rag.llm.assembled`).

A bare name (``gpt-4o-mini``, ``smollm2-135m``) names a model registered in
``rag/llm/prices.yaml`` or an assembled local model. The split is at the first colon, so only the
provider part is checked here: a typo in it is an error naming the known providers; an unknown
model of a known provider is allowed (:func:`rag.llm.registry.resolve_model` reports its price as
unknown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath

from rag.errors import ConfigError

#: Known providers and what serves each.
PROVIDERS: dict[str, str] = {
    "openai": "OpenAI API (OPENAI_API_KEY)",
    "anthropic": "Anthropic API (ANTHROPIC_API_KEY)",
    "groq": "Groq API (GROQ_API_KEY)",
    "ollama": "Ollama's OpenAI-compatible API at $OLLAMA_HOST",
    "openai-compatible": "an OpenAI-compatible endpoint at $RAG_OPENAI_COMPATIBLE_BASE_URL",
    "gguf": "a local GGUF chat model file run by llama.cpp",
    "local": "the packaged SmolLM2-135M, or a model `rag models fetch` assembles",
}


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A parsed model name: the provider and the model as that provider names it.

    Attributes:
        provider: one of :data:`PROVIDERS`.
        model: the provider's model id (a GGUF file: its path).
        bare: the registered bare name it was written as, or None for ``provider:model``.
    """

    provider: str
    model: str
    bare: str | None = None

    def __str__(self) -> str:
        return self.bare or f"{self.provider}:{self.model}"

    @property
    def label(self) -> str:
        """The name shown in reports and meters: a GGUF file by its file name (no local path)."""
        if self.provider == "gguf":
            return f"gguf:{PurePath(self.model).name}"
        return str(self)


def parse_model(name: str, registered: Mapping[str, str]) -> ModelRef:
    """Parse a model name: ``provider:model`` or a bare registered name.

    Args:
        name: the name as written.
        registered: ``{bare name: provider}`` of the registered models
            (:func:`rag.llm.registry.parse_model` passes the price table's).

    Raises:
        ConfigError: empty name, unknown provider (naming the known ones), empty model part, or
            an unknown bare name (naming the registered ones).
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"model name {name!r}: give provider:model or a registered name")
    name = name.strip()
    if name in registered:
        return ModelRef(registered[name], name, bare=name)
    provider, sep, model = name.partition(":")
    if not sep:
        raise ConfigError(
            f"unknown model {name!r}; known models: {', '.join(sorted(registered))}; "
            f"or name any model as provider:model with a provider of {', '.join(PROVIDERS)}"
        )
    if provider not in PROVIDERS:
        hint = f" (did you mean ollama:{name}?)" if provider and "." in provider else ""
        raise ConfigError(
            f"unknown provider {provider!r} in model {name!r}; known providers: "
            f"{', '.join(PROVIDERS)}{hint}"
        )
    if not model.strip():
        raise ConfigError(f"model {name!r}: the model after {provider + ':'!r} is empty")
    return ModelRef(provider, model.strip())
