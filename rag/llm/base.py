"""The one chat-completion interface every provider implements.

Callers (multi-query, HyDE, answerers, judges) depend only on :class:`ChatModel` and
:class:`Completion`; a client is built once by the factory and injected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class Completion:
    """The result of one chat completion (fresh or from the cache)."""

    text: str
    model: str
    provider: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool
    #: how ``cost_usd`` is known: "list price as of <date>", "$0 (local)", "price unknown"
    price: str = ""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model behind one interface. Temperature 0 unless asked otherwise."""

    name: str

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
    ) -> Completion: ...
