"""Named failures of LLM calls, all :class:`rag.errors.LLMError` so callers can catch one class."""

from __future__ import annotations

from rag.errors import LLMError


class RetriesExhausted(LLMError):
    """A transient failure (429, 5xx, timeout, connection) persisted through every attempt.

    ``endpoint`` is the base URL that could not be reached, when the backend has one.
    """

    def __init__(self, message: str, *, endpoint: str = "") -> None:
        super().__init__(message)
        self.endpoint = endpoint


class EndpointRefused(RetriesExhausted):
    """The connection was refused: nothing listens at the address (a local server not started, a
    wrong port), which a retry seconds later will not change, so it is not retried."""


class RequestRejected(LLMError):
    """The provider refused the request for good (400, 401, 403, 404, ...): retrying won't help."""


class MalformedResponse(LLMError):
    """The provider answered, but not with a usable completion (no choices, no usage, no text)."""


class UnusableReply(MalformedResponse):
    """The model answered, but its reply fails the caller's parser (no summary sentence, judge
    output that is not the JSON asked for, an empty answer); such a reply is never cached.

    ``str()`` shows the start of the reply for a reader at a terminal; :attr:`public` names the
    model and the cause only, for a service whose clients must not see model output.
    """

    def __init__(self, model: str, cause: str, reply: str = "") -> None:
        self.model, self.cause = model, cause
        shown = f": {reply[:120]!r}" if reply else ""
        super().__init__(f"{model} returned {cause}{shown}")

    @property
    def public(self) -> str:
        """The message without the reply."""
        return f"{self.model} returned {self.cause} (the reply is not shown)"
