"""Backend for OpenAI-style chat completions, served by the ``openai`` and ``groq`` SDKs.

Both SDKs expose ``client.chat.completions.create`` with the same request and response shape
(``choices[0].message.content``, ``usage.prompt_tokens`` / ``usage.completion_tokens``), so one
backend takes an injected client of either kind.
"""

from __future__ import annotations

import logging
from typing import Any, Unpack

from rag.llm.base import Message
from rag.llm.errors import MalformedResponse
from rag.llm.model import CallOptions, RawCompletion

log = logging.getLogger(__name__)


class OpenAIChatBackend:
    """Chat completions through an injected ``openai.OpenAI`` or ``groq.Groq`` client."""

    supports_json_mode = True

    def __init__(self, client: Any, provider: str) -> None:
        self._client = client
        self.provider = provider

    @property
    def client(self) -> Any:
        """The SDK client every request goes through (the research loop's tool calls use it too)."""
        return self._client

    @property
    def endpoint(self) -> str:
        """The base URL requests go to (named when it cannot be reached)."""
        return str(getattr(self._client, "base_url", "") or "")

    def call(
        self, model: str, messages: list[Message], **opts: Unpack[CallOptions]
    ) -> RawCompletion:
        """One request; SDK errors propagate for the retry layer to classify."""
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": opts["temperature"],
            "max_tokens": opts["max_tokens"],
        }
        if stop := opts["stop"]:
            kwargs["stop"] = list(stop)
        if (seed := opts["seed"]) is not None:
            kwargs["seed"] = seed
        if opts["json_mode"]:
            kwargs["response_format"] = {"type": "json_object"}
        resp = self._client.chat.completions.create(**kwargs)
        return parse_chat_response(resp, f"{self.provider}/{model}")


def parse_chat_response(resp: Any, label: str) -> RawCompletion:
    """Text and usage from a chat-completions response; MalformedResponse when absent."""
    try:
        text = resp.choices[0].message.content
        usage = resp.usage
        n_in, n_out = usage.prompt_tokens, usage.completion_tokens
    except (AttributeError, IndexError, TypeError) as e:
        raise MalformedResponse(
            f"{label}: response has no choices[0].message.content or usage ({e}); "
            "check that the base URL points at an OpenAI-compatible chat-completions API"
        ) from e
    raw = RawCompletion.reported(label, "" if text is None else text, n_in, n_out)
    if not isinstance(raw.text, str):
        raise MalformedResponse(f"{label}: message content is {type(text).__name__}, not text")
    return raw
