"""Model registry: which provider serves a model name, its context length and its list price.

Every call's cost is computed from the usage the provider returns and these prices:
``cost = input_tokens * usd_in_per_m / 1e6 + output_tokens * usd_out_per_m / 1e6``.
Prices are the providers' published list prices (standard tier, no batch or cache discounts)
as of :data:`PRICES_AS_OF`; update them with the date when they change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from rag.errors import ConfigError

log = logging.getLogger(__name__)

Provider = Literal["openai", "anthropic", "groq", "local"]

#: The date the list prices below were taken from the providers' pricing pages.
PRICES_AS_OF = "2025-06-01"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One registered model.

    Attributes:
        name: the project's short name, used in params and reports.
        provider: which backend serves it.
        api_model: the model id sent to the provider's API (or the local file's model id).
        context_length: maximum prompt + answer tokens.
        usd_in_per_m: USD per 1M input (prompt) tokens.
        usd_out_per_m: USD per 1M output (completion) tokens.
    """

    name: str
    provider: Provider
    api_model: str
    context_length: int
    usd_in_per_m: float
    usd_out_per_m: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD cost of one call with this usage, from the list prices."""
        return input_tokens * self.usd_in_per_m / 1e6 + output_tokens * self.usd_out_per_m / 1e6


_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("gpt-4o-mini", "openai", "gpt-4o-mini", 128_000, 0.15, 0.60),
    ModelSpec("gpt-4o", "openai", "gpt-4o", 128_000, 2.50, 10.00),
    ModelSpec("claude-3-5-haiku", "anthropic", "claude-3-5-haiku-20241022", 200_000, 0.80, 4.00),
    ModelSpec("claude-sonnet-4", "anthropic", "claude-sonnet-4-20250514", 200_000, 3.00, 15.00),
    ModelSpec("llama-3.1-8b-instant", "groq", "llama-3.1-8b-instant", 131_072, 0.05, 0.08),
    ModelSpec("llama-3.3-70b-versatile", "groq", "llama-3.3-70b-versatile", 131_072, 0.59, 0.79),
    ModelSpec("smollm2-135m", "local", "SmolLM2-135M-Instruct-Q4_1", 8_192, 0.0, 0.0),
)

#: Registered models by name.
MODELS: dict[str, ModelSpec] = {m.name: m for m in _MODELS}


def model_names() -> list[str]:
    """All registered model names, sorted."""
    return sorted(MODELS)


def get_model(name: str) -> ModelSpec:
    """The spec of a registered model.

    Raises:
        ConfigError: the name is not registered; the message lists the known names.
    """
    try:
        return MODELS[name]
    except KeyError as e:
        raise ConfigError(
            f"unknown model {name!r}; known models: {', '.join(model_names())} "
            "(add it to rag/llm/registry.py with its provider and prices)"
        ) from e
