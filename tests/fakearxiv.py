"""A small arXiv look-alike HTTP server on 127.0.0.1 for the download and ingest tests.

It serves the export API (``/api/query`` with ``search_query`` or ``id_list``, Atom XML as arXiv
sends it) and versioned PDFs (``/pdf/<id><version>``), records every request with its arrival
time, and misbehaves on demand, per PDF, request by request: ``429`` (with ``Retry-After``),
``503``, ``reset`` (close without answering), ``cut`` (send Content-Length, then half the body,
then close), ``hang`` (answer after ``hang_s``), ``slow`` (trickle the body over ``slow_s``),
``html`` (a 200 page that is not a PDF), ``pair`` (two clients fetching one PDF at once: the
first request waits up to ``pair_wait_s`` for a second one, then trickles over ``slow_s``; the
second starts 0.7 ``slow_s`` later and trickles ten times slower, as two connections of unequal
speed would). Once a PDF's plan is used up it is served normally.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

import pymupdf


def make_pdf(text: str, pages: int = 1) -> bytes:
    """A small valid PDF whose pages carry ``text`` (built with PyMuPDF, never shared data)."""
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"{text} page {i + 1}", fontsize=11)
    data = doc.tobytes()
    doc.close()
    return data


@dataclass
class Entry:
    """One paper in the fake export API."""

    arxiv_id: str
    version: str
    title: str
    primary_category: str = "cs.IR"
    published: str = "2025-01-02T03:04:05Z"


@dataclass
class Request:
    t: float
    path: str
    action: str


@dataclass
class FakeArxiv:
    """State of the fake server; start it with :meth:`start` (or use it as a context manager)."""

    pdfs: dict[str, bytes] = field(default_factory=dict)
    plans: dict[str, list[str]] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    retry_after: str = "1"
    hang_s: float = 1.0
    slow_s: float = 1.0
    pair_wait_s: float = 8.0
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: dict[str, int] = {}
        self._paired = threading.Condition()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeArxiv:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # resets and cuts are deliberate; the client side is what is tested

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeArxiv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/query"

    @property
    def pdf_base_url(self) -> str:
        return f"{self.base}/pdf"

    def pdf_requests(self, versioned_id: str | None = None) -> list[Request]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path.startswith("/pdf/")
                and (versioned_id is None or r.path == f"/pdf/{versioned_id}")
            ]

    # -- handling ----------------------------------------------------------------------------

    def _next_action(self, key: str) -> str:
        with self._lock:
            plan = self.plans.get(key)
            return plan.pop(0) if plan else "ok"

    def _log(self, path: str, action: str) -> None:
        with self._lock:
            self.requests.append(Request(time.monotonic(), path, action))

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlsplit(h.path)
        if url.path == "/api/query":
            self._log(h.path, "api")
            self._send(h, 200, self._atom(parse_qs(url.query)), "application/atom+xml")
            return
        if not url.path.startswith("/pdf/"):
            self._log(h.path, "404")
            self._send(h, 404, b"not found", "text/plain")
            return
        key = url.path.removeprefix("/pdf/")
        action = self._next_action(key)
        self._log(url.path, action)
        body = self.pdfs.get(key)
        if body is None:
            self._send(h, 404, b"no such paper version", "text/plain")
        elif action == "429":
            self._send(h, 429, b"slow down", "text/plain", {"Retry-After": self.retry_after})
        elif action == "503":
            self._send(h, 503, b"unavailable", "text/plain")
        elif action == "reset":
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
        elif action == "cut":
            h.send_response(200)
            h.send_header("Content-Type", "application/pdf")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
        elif action == "hang":
            time.sleep(self.hang_s)
            self._send(h, 200, body, "application/pdf")
        elif action == "slow":
            self._trickle(h, body, self.slow_s)
        elif action == "pair":
            with self._paired:
                self._pairs[key] = arrival = self._pairs.get(key, 0) + 1
                self._paired.notify_all()
                if arrival == 1:
                    self._paired.wait_for(lambda: self._pairs[key] >= 2, self.pair_wait_s)
            if arrival > 1:
                time.sleep(0.7 * self.slow_s)
            self._trickle(h, body, self.slow_s * (1 if arrival == 1 else 10))
        elif action == "html":
            self._send(h, 200, b"<html>PDF being generated</html>", "text/html")
        else:
            self._send(h, 200, body, "application/pdf")

    @staticmethod
    def _trickle(h: BaseHTTPRequestHandler, body: bytes, seconds: float) -> None:
        """Send ``body`` in ten pieces spread over ``seconds``."""
        h.send_response(200)
        h.send_header("Content-Type", "application/pdf")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        step = max(1, len(body) // 10)
        try:
            for i in range(0, len(body), step):
                h.wfile.write(body[i : i + step])
                h.wfile.flush()
                time.sleep(seconds / 10)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)

    def _atom(self, q: dict[str, list[str]]) -> bytes:
        ids = [i for i in (q.get("id_list", [""])[0]).split(",") if i]
        if ids:
            # Like arXiv: an unversioned id names the latest version, a versioned one itself.
            matched = [
                e for e in self.entries if e.arxiv_id in ids or f"{e.arxiv_id}{e.version}" in ids
            ]
        else:
            term = q.get("search_query", [""])[0]
            cat = term.removeprefix("cat:")
            matched = [e for e in self.entries if e.primary_category == cat]
            matched.sort(key=lambda e: e.published, reverse=True)
        start = int(q.get("start", ["0"])[0])
        size = int(q.get("max_results", ["10"])[0])
        page = matched[start : start + size]
        items = "".join(
            f"""
  <entry>
    <id>http://arxiv.org/abs/{e.arxiv_id}{e.version}</id>
    <updated>{e.published}</updated>
    <published>{e.published}</published>
    <title>{escape(e.title)}</title>
    <summary>An abstract.</summary>
    <author><name>A. Author</name></author>
    <link href="http://arxiv.org/abs/{e.arxiv_id}{e.version}" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/{e.arxiv_id}{e.version}" rel="related"
          type="application/pdf"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom"
          term="{e.primary_category}" scheme="http://arxiv.org/schemas/atom"/>
    <category term="{e.primary_category}" scheme="http://arxiv.org/schemas/atom"/>
  </entry>"""
            for e in page
        )
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title type="html">ArXiv Query</title>
  <id>http://arxiv.org/api/fake</id>
  <updated>2025-01-02T00:00:00-05:00</updated>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">{
            len(matched)
        }</opensearch:totalResults>
  <opensearch:startIndex xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">{
            start
        }</opensearch:startIndex>
  <opensearch:itemsPerPage xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">{
            size
        }</opensearch:itemsPerPage>{items}
</feed>
""".encode()


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
