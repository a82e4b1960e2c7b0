"""Model registry: which provider serves a model, its context length and its dated list price.

The registered models and their prices are data, ``rag/llm/prices.yaml``: one row per model with
its provider, the model id its API takes, context length, USD per 1M input and output tokens, the
page the price was read from and the date it was read. Every call's cost is computed from the
usage the provider returns: ``cost = input_tokens * usd_in_per_m / 1e6 + output_tokens *
usd_out_per_m / 1e6``.

Any other model is named ``provider:model`` (:mod:`rag.llm.names`) and gets a spec here too:

- a model of an API provider that the table does not list has no price ("price unknown", never
  $0);
- a model run in this process (a ``gguf:`` file, the packaged ``local:`` one) is "$0 (local)";
- a model behind an Ollama or OpenAI-compatible endpoint is "$0 (self-hosted)" when the endpoint
  is on this machine (a loopback address, ``localhost``, ``0.0.0.0`` or this host's name:
  :func:`on_this_machine`); on another host it costs what the user states
  (``RAG_OPENAI_COMPATIBLE_PRICE`` / ``RAG_OLLAMA_PRICE`` = ``"IN,OUT"`` USD per 1M tokens, or
  ``LLMSettings.openai_compatible_price`` / ``ollama_price``), else "price unknown": a hosted
  vLLM or a rented GPU is not free, and its price is not ours to guess.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError
from rag.llm.assembled import ASSEMBLED, chat_names
from rag.llm.names import ModelRef
from rag.llm.names import parse_model as _parse
from rag.llm.settings import (
    PRICE_ENV,
    LLMSettings,
    UsdPerM,
    endpoints_from_env,
    prices_from_env,
)

log = logging.getLogger(__name__)

Provider = Literal["openai", "anthropic", "groq", "ollama", "openai-compatible", "gguf", "local"]

#: Providers whose models run in this process: "$0 (local)".
IN_PROCESS = ("gguf", "local")
#: Providers reached at an endpoint the user runs: "$0 (self-hosted)" when it is on this machine.
ENDPOINTS = ("ollama", "openai-compatible")


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
        as_of: the date the price was read (None for unpriced, user-priced and $0 models).
        hosting: "local" (run in this process) or "self-hosted" (an endpoint on this machine)
            for a $0 model, else None.
    """

    name: str
    provider: Provider
    api_model: str
    context_length: int | None
    usd_in_per_m: float | None
    usd_out_per_m: float | None
    price_source: str = "price unknown"
    as_of: str | None = None
    hosting: str | None = None

    @property
    def priced(self) -> bool:
        """Whether the cost of a call is known."""
        return self.usd_in_per_m is not None and self.usd_out_per_m is not None

    @property
    def price_label(self) -> str:
        """How the cost is known: "list price as of <date>", "$0 (local)", "$0 (self-hosted)",
        "user price (<where it was stated>)" or "price unknown"."""
        if self.hosting is not None:
            return f"$0 ({self.hosting})"
        if not self.priced:
            return "price unknown"
        return f"list price as of {self.as_of}" if self.as_of else self.price_source

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
            "local" if r.provider == "local" else None,
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
    """Parse a model name (:func:`rag.llm.names.parse_model`) against the registered names
    (the price table's and the assembled local models' of :mod:`rag.llm.assembled`)."""
    known = {n: m.provider for n, m in MODELS.items()}
    return _parse(name, {**dict.fromkeys(ASSEMBLED, "local"), **known})


def registered(ref: ModelRef) -> ModelSpec | None:
    """The registered spec a reference names (by name or API model id), or None."""
    for m in MODELS.values():
        if m.provider == ref.provider and ref.model in (m.name, m.api_model):
            return m
    return None


def on_this_machine(url: str) -> bool:
    """Whether a base URL points at this machine: a loopback address (127.0.0.0/8, ``::1``),
    ``localhost``, the unspecified address (``0.0.0.0``, which clients reach locally) or this
    host's own name. Decided from the URL alone, without a DNS lookup."""
    host = (urlsplit(url if "://" in url else f"http://{url}").hostname or "").rstrip(".")
    if host == "localhost" or host.endswith(".localhost") or host == socket.gethostname().lower():
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


def endpoint_url(
    provider: str, settings: LLMSettings, endpoints: Mapping[str, str] | None = None
) -> str | None:
    """The base URL of an Ollama / OpenAI-compatible provider: the settings' own, else
    ``endpoints`` (None: :func:`rag.llm.settings.endpoints_from_env`)."""
    own = settings.ollama_base_url if provider == "ollama" else settings.openai_compatible_base_url
    endpoints = endpoints_from_env() if endpoints is None else endpoints
    return own or endpoints.get(provider)


def endpoint_price(
    provider: str,
    settings: LLMSettings,
    prices: Mapping[str, tuple[UsdPerM, str]] | None = None,
) -> tuple[UsdPerM, str] | None:
    """The price a user stated for an endpoint provider and where: the settings' own, else
    ``prices`` (None: :func:`rag.llm.settings.prices_from_env`); None when nobody stated one."""
    own = settings.ollama_price if provider == "ollama" else settings.openai_compatible_price
    if own is not None:
        return own, f"LLMSettings.{provider.replace('-', '_')}_price"
    prices = prices_from_env() if prices is None else prices
    return prices.get(provider)


def resolve_model(
    name: str | ModelRef,
    settings: LLMSettings | None = None,
    *,
    endpoints: Mapping[str, str] | None = None,
    prices: Mapping[str, tuple[UsdPerM, str]] | None = None,
) -> ModelSpec:
    """The spec of any model name: a registered bare name or ``provider:model``.

    A registered model keeps its bare name and API id whichever way it is named, so
    ``openai:gpt-4o-mini`` and ``gpt-4o-mini`` share one spec and one cache key. A GGUF file's
    spec has a placeholder API id here; the factory replaces it with the file's sha256. An
    endpoint model is priced by where its endpoint is (module docstring): ``settings``,
    ``endpoints`` and ``prices`` say that, read from the environment when None.

    Raises:
        ConfigError: an unknown provider or bare name, a local model that is not packaged, or a
            malformed price variable.
    """
    ref = parse_model(name) if isinstance(name, str) else name
    if (spec := registered(ref)) is not None:
        return spec
    if ref.provider == "local" and ref.model in ASSEMBLED:
        if (kind := ASSEMBLED[ref.model].kind) != "chat-gguf":
            raise ConfigError(
                f"{ref.model!r} is an embedding model ({kind}), not a chat model: name it as an "
                f"embedder; the assembled chat models are {', '.join(chat_names())}"
            )
        # an assembled GGUF file (rag.llm.assembled): priced, run and cached as gguf:PATH
        return dataclasses.replace(resolve_model(ModelRef("gguf", ref.model)), name=ref.model)
    if ref.provider == "local":
        local = [m.name for m in MODELS.values() if m.provider == "local"]
        raise ConfigError(
            f"unknown local model {ref.model!r}: the packaged one is {', '.join(local)}, the "
            f"assembled ones (`rag models fetch NAME`) {', '.join(chat_names())}; "
            "run another GGUF file as gguf:/path/to/model.gguf"
        )
    if ref.provider in IN_PROCESS:
        return ModelSpec(ref.label, ref.provider, ref.model, None, 0.0, 0.0, "local", None, "local")
    if ref.provider in ENDPOINTS:
        settings = settings or LLMSettings()
        if (stated := endpoint_price(ref.provider, settings, prices)) is not None:
            (usd_in, usd_out), where = stated
            return ModelSpec(
                ref.label, ref.provider, ref.model, None, usd_in, usd_out, f"user price ({where})"
            )
        url = endpoint_url(ref.provider, settings, endpoints)
        if url is not None and on_this_machine(url):
            return ModelSpec(
                ref.label, ref.provider, ref.model, None, 0.0, 0.0, "self-hosted", None,
                "self-hosted",
            )  # fmt: skip
        log.info(
            "model %s: its endpoint %s is not on this machine and no price is stated "
            "(set %s=IN,OUT USD per 1M tokens): price unknown",
            ref, urlsplit(url).hostname if url else "(none)", PRICE_ENV[ref.provider],
        )  # fmt: skip
        return ModelSpec(ref.label, ref.provider, ref.model, None, None, None)
    log.info("model %s is not in rag/llm/prices.yaml: price unknown", ref)
    return ModelSpec(ref.label, ref.provider, ref.model, None, None, None)
