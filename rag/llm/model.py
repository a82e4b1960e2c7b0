"""The one :class:`~rag.llm.base.ChatModel` implementation: cache, retries, metering, batching.

Providers differ only in a small :class:`Backend` that turns messages into a
:class:`RawCompletion` (text + provider-reported usage). Everything else — the cache lookup, the
bounded concurrency, retries, the cost from the registry's prices, the meter — lives here once.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from tqdm.auto import tqdm

from rag.errors import ConfigError
from rag.llm.base import Completion, Message
from rag.llm.cache import CacheEntry, CompletionCache, cache_key
from rag.llm.errors import MalformedResponse, RetriesExhausted
from rag.llm.meter import CostMeter
from rag.llm.registry import ModelSpec
from rag.llm.retry import call_with_retries
from rag.llm.settings import LLMSettings

log = logging.getLogger(__name__)

_ROLES = frozenset({"system", "user", "assistant"})


@dataclass(frozen=True, slots=True)
class RawCompletion:
    """What a backend returns: the text and the usage as the provider reported it."""

    text: str
    input_tokens: int
    output_tokens: int

    @classmethod
    def reported(cls, label: str, text: str, n_in: Any, n_out: Any) -> RawCompletion:
        """The completion of a provider's response whose usage said ``n_in`` / ``n_out`` tokens;
        MalformedResponse naming ``label`` (provider/model) when a count is missing."""
        if not isinstance(n_in, int) or not isinstance(n_out, int):
            raise MalformedResponse(f"{label}: usage token counts missing ({n_in!r}, {n_out!r})")
        return cls(text=text, input_tokens=n_in, output_tokens=n_out)


class CallOptions(TypedDict):
    """The decoding options every backend's ``call`` takes by keyword, declared once."""

    temperature: float
    max_tokens: int
    stop: list[str] | None
    seed: int | None
    json_mode: bool


class Backend(Protocol):
    """One provider's way of running a chat completion (no cache, no retries)."""

    supports_json_mode: bool

    def call(
        self, model: str, messages: list[Message], **opts: Unpack[CallOptions]
    ) -> RawCompletion: ...


def validate_messages(messages: Sequence[Message]) -> list[Message]:
    """Check the chat messages' shape; raise ConfigError naming the bad one."""
    if not messages:
        raise ConfigError("messages is empty; pass at least one {'role': 'user', 'content': ...}")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise ConfigError(f"message {i} {m!r}: role must be one of {sorted(_ROLES)}")
        if not isinstance(m.get("content"), str):
            raise ConfigError(f"message {i}: content must be a string, got {m.get('content')!r}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _passes(check: Callable[[str], object] | None, text: str) -> bool:
    """Whether ``text`` passes ``check`` (no check: it does)."""
    if check is None:
        return True
    try:
        check(text)
    except Exception:  # noqa: BLE001 - any parse failure means the cached reply is unusable
        return False
    return True


def complete_checked(
    model: object, messages: list[Message], check: Callable[[str], object], **kw: object
) -> Completion:
    """``model.complete(messages, **kw)`` whose reply must pass ``check`` (a parser that raises
    on an unusable reply): a model that takes ``check`` (:class:`CachedChatModel`, and wrappers
    that pass keywords on) never caches a reply that fails it; with any other model the check
    runs after the call. Either way a failing check raises its error."""
    complete = model.complete  # type: ignore[attr-defined]
    params = inspect.signature(complete).parameters.values()
    if any(p.name == "check" or p.kind is p.VAR_KEYWORD for p in params):
        c = complete(messages, check=check, **kw)
    else:
        c = complete(messages, **kw)
    check(c.text)
    return c


class CachedChatModel:
    """A registered model served by a backend, with disk cache, retries and a cost meter."""

    def __init__(
        self,
        spec: ModelSpec,
        backend: Backend,
        settings: LLMSettings,
        *,
        cache: CompletionCache | None,
        meter: CostMeter | None,
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.settings = settings
        self._backend = backend
        self._cache = cache if settings.cache_enabled else None
        self._meter = meter
        self._slots = threading.BoundedSemaphore(settings.concurrency)

    @property
    def backend(self) -> Backend:
        """The provider backend behind the cache, retries and meter."""
        return self._backend

    @property
    def supports_json_mode(self) -> bool:
        """Whether ``json_mode=True`` is honoured by this provider."""
        return self._backend.supports_json_mode

    @property
    def shards(self) -> int:
        """How many pinned shards a caller may run this model's calls in
        (:func:`rag.shard.sharded_map`): the local backend's model instances, else 1 (API
        models have their own ``concurrency`` in :meth:`complete_many`)."""
        return int(getattr(self._backend, "workers", 1))

    def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: list[str] | None = None,
        seed: int | None = 0,
        json_mode: bool = False,
        prompt_version: str = "v1",
        grammar: str | None = None,
        repeat_penalty: float | None = None,
        check: Callable[[str], object] | None = None,
    ) -> Completion:
        """One chat completion, from the cache when this exact request was made before.

        ``grammar`` (GBNF text) and ``repeat_penalty`` constrain decoding where the backend
        supports it (``supports_grammar``: the local llama.cpp engine); both enter the cache key
        when set. ``check`` is the caller's parser: a fresh reply it raises on is not cached (its
        error propagates), and a cached reply it raises on is dropped and asked for again, so a
        reply that cannot be used never becomes a permanent cached answer.

        Raises:
            ConfigError: malformed messages, bad parameters, json_mode where unsupported.
            LLMError: the provider failed after the retries, rejected the request or answered
                something unusable.
        """
        msgs = validate_messages(messages)
        if max_tokens < 1:
            raise ConfigError(f"max_tokens={max_tokens}: must be >= 1")
        if not 0.0 <= temperature <= 2.0:
            raise ConfigError(f"temperature={temperature}: must be within [0, 2]")
        if json_mode and not self._backend.supports_json_mode:
            raise ConfigError(
                f"json_mode is not supported by {self.spec.provider}/{self.name}; "
                "parse JSON from plain text or pick another model"
            )
        decoding: dict[str, object] = {}
        if grammar is not None:
            decoding["grammar"] = grammar
        if repeat_penalty is not None:
            decoding["repeat_penalty"] = float(repeat_penalty)
        if decoding and not getattr(self._backend, "supports_grammar", False):
            raise ConfigError(
                f"grammar / repeat_penalty are not supported by {self.spec.provider}/{self.name}; "
                "use the local llama.cpp engine or drop them"
            )
        t0 = time.perf_counter()
        # a backend that runs other weights than the registered file (the local model's
        # upcast copies) says so; its answers must never be served for the original's
        tag = getattr(self._backend, "weights_tag", None)
        key = cache_key(
            provider=self.spec.provider,
            model=f"{self.spec.api_model}@{tag}" if tag else self.spec.api_model,
            messages=msgs,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            seed=seed,
            json_mode=json_mode,
            prompt_version=prompt_version,
            decoding=decoding or None,
        )
        if self._cache is not None and (hit := self._cache.get(key)) is not None:
            if _passes(check, hit.text):
                return self._record(hit, cached=True, latency=time.perf_counter() - t0)
            log.warning("%s: dropping a cached reply its parser refuses", self.name)
            self._cache.delete(key)

        def attempt() -> RawCompletion:
            with self._slots:
                return self._backend.call(
                    self.spec.api_model,
                    msgs,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    stop=stop,
                    seed=seed,
                    json_mode=json_mode,
                    **decoding,  # type: ignore[arg-type]
                )

        try:
            raw = call_with_retries(
                attempt, provider=self.spec.provider, model=self.name, s=self.settings
            )
        except RetriesExhausted as e:
            if where := getattr(self._backend, "endpoint", ""):
                raise type(e)(f"{e} (endpoint {where})", endpoint=where) from e
            raise
        latency = time.perf_counter() - t0
        entry = CacheEntry(
            text=raw.text,
            input_tokens=raw.input_tokens,
            output_tokens=raw.output_tokens,
            cost_usd=self.spec.cost(raw.input_tokens, raw.output_tokens),
            latency_s=latency,
        )
        if check is not None:
            check(entry.text)  # raises on an unusable reply, which is then never cached
        if self._cache is not None:
            self._cache.set(key, entry, model=self.name)
        return self._record(entry, cached=False, latency=latency)

    @property
    def supports_grammar(self) -> bool:
        """Whether this model takes a llama.cpp grammar and repeat penalty (the local engine)."""
        return bool(getattr(self._backend, "supports_grammar", False))

    def complete_many(
        self, batch: Sequence[list[Message]], *, progress: bool = True, **kwargs: object
    ) -> list[Completion]:
        """Complete many prompts with at most ``settings.concurrency`` requests in flight.

        Results keep the input order; the first failure is raised after in-flight calls end.
        """
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            futures = [pool.submit(self.complete, m, **kwargs) for m in batch]  # type: ignore[arg-type]
            it = tqdm(futures, desc=self.name, disable=not progress or len(batch) < 2)
            return [f.result() for f in it]

    def _record(self, e: CacheEntry, *, cached: bool, latency: float) -> Completion:
        c = Completion(
            text=e.text,
            model=self.name,
            provider=self.spec.provider,
            input_tokens=e.input_tokens,
            output_tokens=e.output_tokens,
            cost_usd=e.cost_usd,
            latency_s=latency,
            cached=cached,
            price=self.spec.price_label,
        )
        if self._meter is not None:
            self._meter.record(c)
        log.debug(
            "%s/%s: %d in, %d out, $%.6f, %.3fs%s",
            c.provider,
            c.model,
            c.input_tokens,
            c.output_tokens,
            c.cost_usd,
            latency,
            " (cached)" if cached else "",
        )
        return c
