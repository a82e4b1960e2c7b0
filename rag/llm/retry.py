"""Retries of provider calls: exponential backoff with jitter on transient failures only.

Wait before retry *n* (1-based) is ``min(backoff_max, backoff_initial * 2**(n-1)) + U(0, jitter)``
("full jitter" spreads clients that failed together, AWS Architecture Blog, 2015). Transient:
HTTP 408/409/429/5xx, timeouts and connection errors, as recognised on the exception classes of
the ``openai``, ``anthropic`` and ``groq`` SDKs (all three share the same error shapes). A refused
connection is not transient: nothing listens at the address (a local server not started, a wrong
port), so it fails at once as :class:`EndpointRefused` instead of after the whole backoff. The
SDKs' own retries are disabled (``max_retries=0``) so these are the only ones.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable
from functools import cache
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from rag.errors import LLMError
from rag.llm.errors import EndpointRefused, MalformedResponse, RequestRejected, RetriesExhausted
from rag.llm.settings import KEY_ENV, LLMSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth another attempt.
TRANSIENT_STATUS = frozenset({408, 409, 429})


@cache
def _sdk_error_types() -> tuple[tuple[type[BaseException], ...], ...]:
    """(connection/timeout, HTTP status, any API error) classes of the installed SDKs."""
    conn: list[type[BaseException]] = []
    status: list[type[BaseException]] = []
    base: list[type[BaseException]] = []
    for name in ("openai", "anthropic", "groq"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        conn.append(mod.APIConnectionError)  # APITimeoutError is a subclass
        status.append(mod.APIStatusError)
        base.append(mod.APIError)
    return tuple(conn), tuple(status), tuple(base)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK status error, else None."""
    status = _sdk_error_types()[1]
    return int(exc.status_code) if isinstance(exc, status) else None  # type: ignore[attr-defined]


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` or an exception it was raised from is a refused connection."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ConnectionRefusedError):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed (429, 5xx, 408, 409, timeout, a connection error other
    than a refused connection)."""
    conn = _sdk_error_types()[0]
    if isinstance(exc, conn):
        return not refused(exc)
    code = status_of(exc)
    return code is not None and (code in TRANSIENT_STATUS or code >= 500)


def _what_failed(exc: BaseException) -> str:
    """A short description of a failure, with no request headers (hence no key) in it."""
    code = status_of(exc)
    kind = type(exc).__name__
    if code is not None:
        return f"HTTP {code} ({kind})"
    return f"{kind}: {exc}"


def _advice(exc: BaseException, provider: str, settings: LLMSettings) -> str:
    code = status_of(exc)
    if code == 429:
        return "wait and re-run, lower LLMSettings.concurrency or raise max_attempts"
    if code is not None and code >= 500:
        return "the provider is failing; re-run later (cached calls are not repeated)"
    if "Timeout" in type(exc).__name__:
        return f"raise LLMSettings.timeout_s (now {settings.timeout_s:g}s) or re-run later"
    return f"check the network and the {provider} base URL, then re-run"


def _log_retry(label: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs",
            label,
            state.attempt_number,
            _what_failed(exc) if exc else "?",
            wait,
        )

    return before_sleep


def call_with_retries(fn: Callable[[], T], *, provider: str, model: str, s: LLMSettings) -> T:
    """Run ``fn`` with backoff on transient failures; raise a named LLMError when it gives up.

    Raises:
        RetriesExhausted: transient failures on all ``s.max_attempts`` attempts.
        RequestRejected: a non-transient HTTP error (bad request, bad key, unknown model).
        MalformedResponse: the body was not valid JSON or failed the SDK's validation.
    """
    label = f"{provider}/{model}"
    retrying = Retrying(
        stop=stop_after_attempt(s.max_attempts),
        wait=wait_exponential(multiplier=s.backoff_initial_s, max=s.backoff_max_s)
        + wait_random(0, s.backoff_jitter_s),
        retry=retry_if_exception(is_transient),
        before_sleep=_log_retry(label),
        reraise=True,
    )
    try:
        return retrying(fn)
    except LLMError:
        raise
    except Exception as e:
        if isinstance(e, _sdk_error_types()[0]) and refused(e):
            raise EndpointRefused(
                f"{label}: connection refused, nothing listens there (not retried); start the "
                f"server or check the {provider} base URL, then re-run"
            ) from e
        if is_transient(e):
            raise RetriesExhausted(
                f"{label}: {_what_failed(e)} on all {s.max_attempts} attempts; "
                f"{_advice(e, provider, s)}"
            ) from e
        code = status_of(e)
        if code is None:
            if isinstance(e, (json.JSONDecodeError, *_sdk_error_types()[2])):
                raise MalformedResponse(
                    f"{label}: unreadable response ({type(e).__name__}: {e}); check that the "
                    f"{provider} base URL points at the provider's API"
                ) from e
            raise
        hint = (
            f"check {KEY_ENV.get(provider, 'the API key')}"
            if code in (401, 403)
            else "check the model id in rag/llm/registry.py and the request parameters"
        )
        raise RequestRejected(f"{label}: request rejected with {_what_failed(e)}; {hint}") from e
