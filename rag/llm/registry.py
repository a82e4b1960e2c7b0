"""Model registry: which provider serves a model, its context length and its dated list price.

The registered models and their prices are data, ``rag/llm/prices.yaml``: one row per model with
its provider, the model id its API takes, context length, USD per 1M input and output tokens, the
page the price was read from and the date it was read. Every call's cost is computed from the
usage the provider returns: ``cost = input_tokens * usd_in_per_m / 1e6 + output_tokens *
usd_out_per_m / 1e6``.

Any other model is named ``provider:model`` (:mod:`rag.llm.names`) and gets a spec here too:
a model of an API provider that the table does not list has no price ("price unknown", never
$0); a model served on the user's own machine or endpoint (Ollama, an OpenAI-compatible server,
a GGUF file) costs $0 and says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError
from rag.llm.names import ModelRef
from rag.llm.names import parse_model as _parse

log = logging.getLogger(__name__)

Provider = Literal["openai", "anthropic", "groq", "ollama", "openai-compatible", "gguf", "local"]

#: Providers whose models run on the user's machine or endpoint: $0, "self-hosted" / "local".
SELF_HOSTED: dict[str, str] = {
    "ollama": "self-hosted",
    "openai-compatible": "self-hosted",
    "gguf": "local",
    "local": "local",
}


class _PriceRow(BaseModel):
    """One row of ``prices.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    provider: Literal["openai", "anthropic", "groq", "local"]
    api_model: str = Field(min_length=1)
    context_length: int = Field(gt=0)
    usd_in_per_m: float = Field(ge=0)
    usd_out_per_m: float = Field(ge=0)
    source: str = Field(min_length=1)
    as_of: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One model the lab can call.

    Attributes:
        name: the name used in params, reports and meters (a registered bare name, or
            ``provider:model`` for any other model).
        provider: which backend serves it.
        api_model: the model id sent to the provider's API (a GGUF file: ``sha256:<digest>``).
        context_length: maximum prompt + answer tokens (None: not known before the first call).
        usd_in_per_m: USD per 1M input (prompt) tokens (None: price unknown).
        usd_out_per_m: USD per 1M output (completion) tokens (None: price unknown).
        price_source: where the price comes from ("price unknown" when there is none).
        as_of: the date the price was read (None for unpriced and self-hosted models).
    """

    name: str
    provider: Provider
    api_model: str
    context_length: int | None
    usd_in_per_m: float | None
    usd_out_per_m: float | None
    price_source: str = "price unknown"
    as_of: str | None = None

    @property
    def priced(self) -> bool:
        """Whether the cost of a call is known."""
        return self.usd_in_per_m is not None and self.usd_out_per_m is not None

    @property
    def price_label(self) -> str:
        """How the cost is known: "list price as of <date>", "$0 (local)", "price unknown"."""
        if self.provider in SELF_HOSTED:
            return f"$0 ({SELF_HOSTED[self.provider]})"
        if not self.priced:
            return "price unknown"
        return f"list price as of {self.as_of}"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD cost of one call with this usage, from the list prices (0.0 when unpriced:
        :attr:`priced` and :attr:`price_label` say so, and meters report "price unknown")."""
        if self.usd_in_per_m is None or self.usd_out_per_m is None:
            return 0.0
        return input_tokens * self.usd_in_per_m / 1e6 + output_tokens * self.usd_out_per_m / 1e6


@cache
def _load_table() -> tuple[ModelSpec, ...]:
    text = resources.files("rag.llm").joinpath("prices.yaml").read_text(encoding="utf-8")
    try:
        rows = [_PriceRow(**r) for r in (yaml.safe_load(text) or {}).get("models", [])]
    except (TypeError, ValueError) as e:
        raise ConfigError(f"rag/llm/prices.yaml: {e}") from e
    return tuple(
        ModelSpec(
            r.name,
            r.provider,
            r.api_model,
            r.context_length,
            r.usd_in_per_m,
            r.usd_out_per_m,
            r.source,
            r.as_of,
        )  # fmt: skip
        for r in rows
    )


#: Registered models by name.
MODELS: dict[str, ModelSpec] = {m.name: m for m in _load_table()}

#: The newest as-of date of the price table.
PRICES_AS_OF: str = max(m.as_of or "" for m in MODELS.values())


def model_names() -> list[str]:
    """All registered model names, sorted."""
    return sorted(MODELS)


def get_model(name: str) -> ModelSpec:
    """The spec of a registered model by its bare name.

    Raises:
        ConfigError: the name is not registered; the message lists the known names.
    """
    try:
        return MODELS[name]
    except KeyError as e:
        raise ConfigError(
            f"unknown model {name!r}; known models: {', '.join(model_names())} "
            "(or name any model as provider:model, see docs/your-models.md)"
        ) from e


def parse_model(name: str) -> ModelRef:
    """Parse a model name (:func:`rag.llm.names.parse_model`) against the registered names."""
    return _parse(name, {n: m.provider for n, m in MODELS.items()})


def registered(ref: ModelRef) -> ModelSpec | None:
    """The registered spec a reference names (by name or API model id), or None."""
    for m in MODELS.values():
        if m.provider == ref.provider and ref.model in (m.name, m.api_model):
            return m
    return None


def resolve_model(name: str | ModelRef) -> ModelSpec:
    """The spec of any model name: a registered bare name or ``provider:model``.

    A registered model keeps its bare name and API id whichever way it is named, so
    ``openai:gpt-4o-mini`` and ``gpt-4o-mini`` share one spec and one cache key. A GGUF file's
    spec has a placeholder API id here; the factory replaces it with the file's sha256.

    Raises:
        ConfigError: an unknown provider or bare name, or a local model that is not packaged.
    """
    ref = parse_model(name) if isinstance(name, str) else name
    if (spec := registered(ref)) is not None:
        return spec
    if ref.provider == "local":
        local = [m.name for m in MODELS.values() if m.provider == "local"]
        raise ConfigError(
            f"unknown local model {ref.model!r}: the packaged one is {', '.join(local)}; "
            "run another GGUF file as gguf:/path/to/model.gguf"
        )
    if ref.provider in SELF_HOSTED:
        return ModelSpec(
            ref.label, ref.provider, ref.model, None, 0.0, 0.0, SELF_HOSTED[ref.provider]
        )
    log.info("model %s is not in rag/llm/prices.yaml: price unknown", ref)
    return ModelSpec(ref.label, ref.provider, ref.model, None, None, None)
