"""Local stand-ins for provider APIs, for tests and benchmarks (never a mock that cannot fail).

:class:`FakeLLMServer` is a real HTTP server on 127.0.0.1 (random port, one thread per request)
speaking either the OpenAI chat-completions dialect (served to the ``openai`` and ``groq`` SDKs)
or Anthropic's messages dialect. It counts requests, and can be scripted to answer the next
requests with 429, 500, 503, 401, a hang, a malformed body, broken JSON or HTML, so retry and
error paths run through the real SDK clients and real sockets.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

log = logging.getLogger(__name__)

Dialect = Literal["openai", "anthropic"]
#: What the server can be told to do with one request.
Behaviour = Literal["ok", "429", "500", "503", "401", "hang", "malformed", "not_json", "bad_json"]


class FakeLLMServer:
    """A scripted chat-completions server on 127.0.0.1.

    Args:
        dialect: "openai" (any path ending in ``/chat/completions``) or "anthropic"
            (``/v1/messages``).
        reply: the completion text of an "ok" answer.
        echo: answer each "ok" request with the text of its last message instead of ``reply``,
            so a test can tell which answer belongs to which prompt.
        usage: (input_tokens, output_tokens) reported with every "ok" answer.
        hang_s: how long a "hang" lasts before the server gives up (or until :meth:`stop`).
        delay_s: how long every "ok" answer takes (to observe concurrency).
    """

    def __init__(
        self,
        dialect: Dialect = "openai",
        *,
        reply: str = "Hello from the local test server.",
        usage: tuple[int, int] = (12, 7),
        hang_s: float = 10.0,
        delay_s: float = 0.0,
        echo: bool = False,
    ) -> None:
        self.dialect = dialect
        self.reply = reply
        self.echo = echo
        self.usage = usage
        self.hang_s = hang_s
        self.delay_s = delay_s
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        #: Credentials the clients sent (kept in memory only, so tests can prove a key was sent).
        self.credentials: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self._script: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------------
    def script(self, behaviours: Iterable[Behaviour]) -> None:
        """Answer the next requests with these behaviours, then "ok" again."""
        with self._lock:
            self._script.extend(behaviours)

    def _next(self) -> Behaviour:
        with self._lock:
            self.requests += 1
            return self._script.popleft() if self._script else "ok"

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeLLMServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging requests, stop serving and close the socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- bodies --------------------------------------------------------------------------------
    def ok_body(self, request: dict[str, Any]) -> dict[str, Any]:
        """A well-formed completion in this server's dialect."""
        n_in, n_out = self.usage
        model = request.get("model", "unknown")
        text = self.reply
        if self.echo:
            content = (request.get("messages") or [{}])[-1].get("content", "")
            text = content if isinstance(content, str) else json.dumps(content)
        if self.dialect == "anthropic":
            return {
                "id": "msg_local_1",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": n_in, "output_tokens": n_out},
            }
        return {
            "id": "chatcmpl-local-1",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": n_in,
                "completion_tokens": n_out,
                "total_tokens": n_in + n_out,
            },
        }


def _error_body(dialect: Dialect, status: int, message: str) -> dict[str, Any]:
    if dialect == "anthropic":
        return {"type": "error", "error": {"type": f"http_{status}", "message": message}}
    return {"error": {"message": message, "type": f"http_{status}", "code": None}}


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # One buffered write per answer and no Nagle: otherwise headers and body leave in two
        # segments and delayed ACKs add ~40 ms to every request.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("fake server: " + format, *args)  # request line only, never headers

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            path_ok = (
                self.path.rstrip("/").endswith("/v1/messages")
                if server.dialect == "anthropic"
                else self.path.rstrip("/").endswith("/chat/completions")
            )
            if not path_ok:
                self._send(404, json.dumps(_error_body(server.dialect, 404, "no route")).encode())
                return
            try:
                request = json.loads(raw or b"{}")
            except ValueError:
                request = {}
            cred = self.headers.get("x-api-key") or self.headers.get("Authorization") or ""
            with server._lock:
                server.bodies.append(request)
                server.credentials.append(cred)
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                self._answer(request)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(self, request: dict[str, Any]) -> None:
            what = server._next()
            if what == "ok":
                if server.delay_s:
                    server._stopping.wait(server.delay_s)
                self._send(200, json.dumps(server.ok_body(request)).encode())
            elif what in ("429", "500", "503", "401"):
                body = _error_body(server.dialect, int(what), f"scripted HTTP {what}")
                self._send(int(what), json.dumps(body).encode())
            elif what == "hang":
                server._stopping.wait(server.hang_s)
                try:
                    self._send(200, json.dumps(server.ok_body(request)).encode())
                except OSError:
                    pass  # the client gave up first, which is the point of a hang
            elif what == "malformed":
                self._send(200, json.dumps({"id": "x", "object": "surprise"}).encode())
            elif what == "bad_json":
                self._send(200, b'{"id": "chatcmpl-cut-short", "choices": [')
            else:  # not_json
                self._send(200, b"<html>upstream proxy error</html>", "text/html")

    return Handler


def cache_writer(directory: str, prefix: str, n: int, shared: int) -> int:
    """Write ``n`` own entries and ``shared`` entries common to all writers; for a
    multiprocessing test that two processes do not corrupt one cache. Returns entries written."""
    from rag.llm.cache import CacheEntry, CompletionCache

    c = CompletionCache(directory)
    for i in range(max(n, shared)):
        if i < n:
            c.set(f"{prefix}-{i}", CacheEntry(f"{prefix} answer {i}", i, 2 * i, i / 1e6, 0.0))
        if i < shared:
            c.set(f"shared-{i}", CacheEntry(f"shared answer {i}", i, i, 0.0, 0.0))
    c.close()
    return n + shared
