"""What stands before every endpoint: rate limit, API key, body size; and scrubbing of messages.

One pure ASGI middleware, in this order: ``/health`` (and the static demo page) pass untouched;
each client IP gets a token bucket of ``rate_burst`` requests refilled at ``rate_limit_per_minute``
(429 with ``Retry-After``), checked before the key so guessing keys is limited too; with an API key
configured (``RAG_API_KEY``) every other request needs a matching ``X-API-Key`` (401, compared in
constant time); a POST/PUT/PATCH body over the limit is refused with 413 before it reaches the app
(the body is read at most one chunk past the limit, whether or not ``Content-Length`` is sent).
Errors are :class:`rag.serve.models.ErrorResponse` JSON ``{error, detail}``. :func:`scrub` removes
the key and absolute local paths from any text a client or a log line may see.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rag.scrub import scrub as scrub_text

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths open without a key: liveness and the demo page's static files (they hold no data; the
#: page sends the key, typed by the user, with every API call).
PUBLIC = ("/health", "/")
PUBLIC_PREFIX = "/static/"
#: Methods whose body the guard reads and limits (others reach the app without a body read).
BODY_METHODS = ("POST", "PUT", "PATCH")


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without ``secrets``, secret environment values, key shapes or absolute local
    paths, by :func:`rag.scrub.scrub` (the scrubber of published reports)."""
    return scrub_text(text, secrets=secrets)[0]


class ScrubFilter(logging.Filter):
    """A log filter applying :func:`scrub` to every record's rendered message."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.secrets = secrets

    def _one(self, value: Any) -> Any:
        return scrub(value, self.secrets) if isinstance(value, str) else value

    def filter(self, record: logging.LogRecord) -> bool:
        # Arguments keep their shape: formatters such as uvicorn's access log unpack them.
        record.msg = self._one(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._one(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: self._one(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info),
                                    self.secrets)  # fmt: skip
        return True


class TokenBuckets:
    """Per-client token buckets: ``burst`` capacity, refilled at ``per_minute / 60`` per second."""

    def __init__(self, per_minute: int, burst: int, max_clients: int = 10_000) -> None:
        self.rate, self.burst, self.max_clients = per_minute / 60.0, burst, max_clients
        self._state: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        """0 when the request may pass, else the seconds until a token is available."""
        now = time.monotonic()
        with self._lock:
            if len(self._state) > self.max_clients:  # forget idle clients (full buckets)
                idle = self.burst / self.rate if self.rate else 0.0
                self._state = {k: v for k, v in self._state.items() if now - v[1] < idle}
            tokens, last = self._state.get(client, (float(self.burst), now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._state[client] = (tokens - 1.0, now)
                return 0.0
            self._state[client] = (tokens, now)
            return (1.0 - tokens) / self.rate


async def send_json(send: Send, status: int, body: dict[str, Any], headers=()) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class Guard:
    """The ASGI middleware described in the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        per_minute: int,
        burst: int,
        max_body: int,
        max_upload: int,
        upload_paths: tuple[str, ...] = ("/ingest",),
    ) -> None:
        self.app, self.api_key = app, api_key
        self.buckets = TokenBuckets(per_minute, burst) if per_minute > 0 else None
        self.max_body, self.max_upload, self.upload_paths = max_body, max_upload, upload_paths

    def _public(self, path: str) -> bool:
        return path in PUBLIC or path.startswith(PUBLIC_PREFIX)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if self._public(path):
            await self.app(scope, receive, send)
            return
        if self.buckets is not None:
            wait = self.buckets.take("ip:" + str((scope.get("client") or ("?",))[0]))
            if wait > 0:
                await send_json(
                    send, 429,
                    {"error": "rate limited", "detail": f"too many requests; retry in {wait:.1f}s"},
                    [(b"retry-after", str(math.ceil(wait)).encode())],
                )  # fmt: skip
                return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-api-key", "")
        if self.api_key and not hmac.compare_digest(given.encode(), self.api_key.encode()):
            why = "missing X-API-Key header" if not given else "wrong API key"
            await send_json(send, 401, {"error": "unauthorized", "detail": why})
            return
        if scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        limit = self.max_upload if path in self.upload_paths else self.max_body
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await send_json(send, 413, _too_large(limit))
            return
        body, more = bytearray(), True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
            if len(body) > limit:
                await send_json(send, 413, _too_large(limit))
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _too_large(limit: int) -> dict[str, str]:
    return {"error": "request body too large", "detail": f"the limit is {limit} bytes"}
