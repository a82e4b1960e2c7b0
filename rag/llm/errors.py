"""Named failures of LLM calls, all :class:`rag.errors.LLMError` so callers can catch one class."""

from __future__ import annotations

from rag.errors import LLMError


class RetriesExhausted(LLMError):
    """A transient failure (429, 5xx, timeout, connection) persisted through every attempt."""


class RequestRejected(LLMError):
    """The provider refused the request for good (400, 401, 403, 404, ...): retrying won't help."""


class MalformedResponse(LLMError):
    """The provider answered, but not with a usable completion (no choices, no usage, no text)."""
