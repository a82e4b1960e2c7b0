"""Backend for Anthropic's Messages API through the ``anthropic`` SDK.

System messages go to the separate ``system`` field. The API has no JSON mode; ``json_mode`` is
emulated by prefilling the assistant turn with ``{`` (Anthropic's documented technique for
forcing JSON), and the ``{`` is put back in front of the returned text.

Recent SDKs (2.x) dropped the ``temperature`` argument from ``messages.create`` although the
Messages API still takes it for the registered models; it is then sent in ``extra_body`` so
decoding stays at temperature 0 whatever the SDK version.
"""

from __future__ import annotations

import inspect
import logging
from functools import cache
from typing import Any, Unpack

from rag.llm.base import Message
from rag.llm.errors import MalformedResponse
from rag.llm.model import CallOptions, RawCompletion

log = logging.getLogger(__name__)


@cache
def sdk_takes_temperature(create: Any) -> bool:
    """Whether this SDK's ``messages.create`` takes ``temperature`` (newer ones do not)."""
    try:
        return "temperature" in inspect.signature(create).parameters
    except (TypeError, ValueError):
        return False


class AnthropicBackend:
    """Messages through an injected ``anthropic.Anthropic`` client."""

    supports_json_mode = True

    def __init__(self, client: Any) -> None:
        self._client = client
        self.provider = "anthropic"

    @property
    def client(self) -> Any:
        """The SDK client every request goes through (the research loop's tool calls use it too)."""
        return self._client

    def call(
        self, model: str, messages: list[Message], **opts: Unpack[CallOptions]
    ) -> RawCompletion:
        """One request (``seed`` is not supported by the API and is only part of the cache key)."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns: list[dict[str, str]] = [dict(m) for m in messages if m["role"] != "system"]
        prefill = "{" if opts["json_mode"] else ""
        if prefill:
            turns.append({"role": "assistant", "content": prefill})
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": turns,
            "max_tokens": opts["max_tokens"],
        }
        create = self._client.messages.create
        if sdk_takes_temperature(type(self._client.messages).create):
            kwargs["temperature"] = opts["temperature"]
        else:
            kwargs["extra_body"] = {"temperature": opts["temperature"]}
        if system:
            kwargs["system"] = system
        if stop := opts["stop"]:
            kwargs["stop_sequences"] = list(stop)
        resp = create(**kwargs)
        label = f"anthropic/{model}"
        try:
            parts = [b.text for b in resp.content if getattr(b, "type", None) == "text"]
            n_in, n_out = resp.usage.input_tokens, resp.usage.output_tokens
        except (AttributeError, TypeError) as e:
            raise MalformedResponse(
                f"{label}: response has no content blocks or usage ({e}); "
                "check that the base URL points at an Anthropic Messages API"
            ) from e
        return RawCompletion.reported(label, prefill + "".join(parts), n_in, n_out)
