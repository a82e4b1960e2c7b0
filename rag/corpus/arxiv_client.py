"""A polite arXiv client: rate-limited, retrying, atomic, verifying PDF downloads.

arXiv's terms of use ask for at most one request every 3 seconds and a bounded, backing-off retry
policy. Every request this client sends — metadata (export API, through the ``arxiv`` package) and
PDFs (the versioned URL ``<pdf_base_url>/<id><version>``) — goes through one :class:`RateLimiter`
and one tenacity retry loop: exponential backoff ``initial * 2**(attempt-1)`` capped at
``backoff_max_s`` on 429/500/502/503/504, timeouts, connection resets and cut-short bodies, with
``Retry-After`` honoured (waited at least that long). A refused connection or an unresolvable host
fails at once (:class:`ArxivUnreachable`): retrying cannot help an offline machine. A PDF is
written to ``.<name>.part`` in the destination folder and moved into place with ``os.replace``
only after its body is complete (Content-Length), starts with ``%PDF-`` and ends with ``%%EOF``,
so a killed run never leaves a truncated PDF under the final name. Base URLs are settings so
tests point the client at 127.0.0.1.

The rate limiter lives in :mod:`rag.corpus.rate_limit`, the PDF file checks in
:mod:`rag.corpus.pdf_check`.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import tenacity
from pydantic import BaseModel, ConfigDict, Field
from urllib3.exceptions import ConnectTimeoutError, MaxRetryError, NewConnectionError

from rag.corpus.manifest import Paper
from rag.corpus.pdf_check import PDF_MAGIC, looks_like_pdf, pdf_problem
from rag.corpus.rate_limit import RateLimiter
from rag.errors import DownloadError
from rag.filehash import sha256_file
from rag.paths import MIRROR_ENV

log = logging.getLogger(__name__)

#: HTTP statuses worth retrying: rate limited, or a transient server-side failure.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class ClientSettings(BaseModel):
    """How to reach arXiv and how politely."""

    model_config = ConfigDict(extra="forbid")

    api_url: str = Field(
        "https://export.arxiv.org/api/query", description="arXiv export API query endpoint"
    )
    pdf_base_url: str = Field(
        "https://arxiv.org/pdf", description="PDF URL prefix; the file is <prefix>/<id><version>"
    )
    min_interval_s: float = Field(
        3.0, ge=0.0, le=600.0, description="minimum seconds between request starts (arXiv: 3)"
    )
    max_attempts: int = Field(5, ge=1, le=20, description="attempts per request, first included")
    backoff_initial_s: float = Field(
        2.0, ge=0.0, le=300.0, description="wait before the 2nd attempt; doubles per attempt"
    )
    backoff_max_s: float = Field(60.0, ge=0.0, le=3600.0, description="cap on one backoff wait")
    max_retry_after_s: float = Field(
        300.0, ge=0.0, le=86400.0, description="give up when Retry-After asks for longer"
    )
    connect_timeout_s: float = Field(10.0, gt=0.0, le=300.0, description="TCP connect timeout")
    read_timeout_s: float = Field(60.0, gt=0.0, le=3600.0, description="timeout between reads")
    chunk_bytes: int = Field(1 << 16, ge=1024, le=1 << 24, description="download chunk size")
    user_agent: str = Field(
        "arxiv-rag-lab/0.1 (pinned research corpus; >=3 s between requests)",
        min_length=1,
        description="User-Agent sent with every request",
    )


class ArxivUnreachable(DownloadError):
    """arXiv (or the configured base URL) cannot be connected to at all."""


class _Retryable(Exception):
    """A transient failure worth another attempt (retry status or a cut-short body)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class FetchResult:
    """A verified PDF now at ``path``."""

    path: Path
    sha256: str
    bytes: int
    attempts: int
    url: str


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date, RFC 9110)."""
    if value is None or not value.strip():
        return None
    v = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", v):
        return float(v)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        log.warning("ignoring unparseable Retry-After %r", value)
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _is_refused(exc: BaseException) -> bool:
    """Nothing answers at all: connection refused or the host name does not resolve.

    Not worth a retry ladder (an offline machine would wait 2+4+8+16 s per paper); a connect
    *timeout* is, since it may be a slow network rather than none.
    """
    if isinstance(exc, requests.exceptions.ConnectionError) and not isinstance(
        exc, requests.exceptions.ConnectTimeout
    ):
        for arg in exc.args:
            if isinstance(arg, MaxRetryError) and isinstance(arg.reason, NewConnectionError):
                return True
    return False


def _should_retry(exc: BaseException) -> bool:
    """Transient failures are retried; a refused connection or a DNS failure is not."""
    retryable = (
        _Retryable,
        requests.exceptions.Timeout,
        requests.exceptions.ConnectionError,
        requests.exceptions.ChunkedEncodingError,
    )
    return isinstance(exc, retryable) and not _is_refused(exc)


def _is_unreachable(exc: BaseException) -> bool:
    """A failure to connect at all (refused, DNS, connect timeout), as opposed to a reset."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(exc, requests.exceptions.ConnectionError):
        for arg in exc.args:
            if isinstance(arg, MaxRetryError) and isinstance(
                arg.reason, NewConnectionError | ConnectTimeoutError
            ):
                return True
    return False


def unreachable_hint(url: str) -> str:
    """What to do when arXiv cannot be reached."""
    return (
        f"cannot connect to arXiv at {url}. Either point {MIRROR_ENV} (or --mirror) at a folder "
        "of <arxiv_id>.pdf files, e.g. ../shared/corpus/pdfs, or run where arxiv.org is reachable"
    )


class _PoliteGetSession:
    """Duck-types the one ``Session.get`` call the ``arxiv`` package makes, routing it through
    this client's rate limiter and retries (the package's own delay and retries are disabled)."""

    def __init__(self, client: ArxivClient) -> None:
        self._client = client

    def get(self, url: str, headers: dict[str, str] | None = None, **_: Any) -> requests.Response:
        return self._client.get(url)


class ArxivClient:
    """Rate-limited, retrying access to the arXiv export API and versioned PDFs.

    Args:
        settings: base URLs, spacing, retry and timeout policy.
        session: the HTTP session to use (injected; a fresh one is made and owned otherwise).
        sleep: the sleep function for backoff waits (tests may pass a recorder).
        stamp: a file recording the last request time, shared by runs using the same folder.
    """

    def __init__(
        self,
        settings: ClientSettings,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        stamp: Path | None = None,
    ) -> None:
        self.settings = settings
        self._owns_session = session is None
        self.session = session or requests.Session()
        self._sleep = sleep
        self.limiter = RateLimiter(settings.min_interval_s, sleep=sleep, stamp=stamp)
        self.requests_sent = 0

    def __enter__(self) -> ArxivClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the session if this client made it."""
        if self._owns_session:
            self.session.close()

    def pdf_url(self, paper: Paper) -> str:
        """The versioned PDF URL, so the pinned submission is fetched and never a newer one."""
        return f"{self.settings.pdf_base_url.rstrip('/')}/{paper.versioned_id}"

    # -- one attempt ------------------------------------------------------------------------

    def _send(self, url: str, *, stream: bool) -> requests.Response:
        """One rate-limited request; retry statuses become :class:`_Retryable`."""
        s = self.settings
        self.limiter.wait()
        self.requests_sent += 1
        resp = self.session.get(
            url,
            stream=stream,
            timeout=(s.connect_timeout_s, s.read_timeout_s),
            headers={"User-Agent": s.user_agent},
        )
        if resp.status_code in RETRY_STATUSES:
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            resp.close()
            if retry_after is not None and retry_after > s.max_retry_after_s:
                raise DownloadError(
                    f"{url}: HTTP {resp.status_code} with Retry-After {retry_after:.0f} s, longer "
                    f"than max_retry_after_s={s.max_retry_after_s:.0f}; try again later"
                )
            raise _Retryable(f"HTTP {resp.status_code}", retry_after)
        return resp

    def _wait(self, state: tenacity.RetryCallState) -> float:
        s = self.settings
        backoff = min(s.backoff_max_s, s.backoff_initial_s * 2 ** (state.attempt_number - 1))
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return max(backoff, exc.retry_after)
        return backoff

    def _retry(self, url: str, fn: Callable[[], Any]) -> tuple[Any, int]:
        """Run ``fn`` under the retry policy; returns (result, attempts)."""
        attempts = 0

        def counted() -> Any:
            nonlocal attempts
            attempts += 1
            return fn()

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.settings.max_attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(_should_retry),
            sleep=self._sleep,
            reraise=True,
            before_sleep=lambda st: log.warning(
                "%s: attempt %d failed (%s); retrying in %.1f s",
                url,
                st.attempt_number,
                st.outcome.exception() if st.outcome else "?",
                st.next_action.sleep if st.next_action else 0.0,
            ),
        )
        try:
            return retrying(counted), attempts
        except DownloadError:
            raise
        except (_Retryable, requests.exceptions.RequestException) as e:
            if _is_unreachable(e):
                raise ArxivUnreachable(unreachable_hint(url)) from e
            raise DownloadError(f"{url}: gave up after {attempts} attempt(s): {e}") from e

    # -- public ------------------------------------------------------------------------------

    def get(self, url: str) -> requests.Response:
        """GET a small resource (API page) with spacing and retries; any final status returned."""
        resp, _ = self._retry(url, lambda: self._send(url, stream=False))
        return resp

    def download(self, paper: Paper, dest: Path) -> FetchResult:
        """Fetch the paper's versioned PDF to ``dest`` atomically and verify it.

        Verification: complete body (bytes == Content-Length), ``%PDF-`` magic and ``%%EOF``
        trailer. The sha256 is returned, not judged: comparing it with the manifest is the
        caller's decision (:mod:`rag.corpus.ingest` reports a mismatch as "changed").

        Raises:
            ArxivUnreachable: nothing answers at the PDF base URL.
            DownloadError: a non-retryable status, not a PDF, or attempts exhausted.
        """
        url = self.pdf_url(paper)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.part")
        try:
            (sha, size), attempts = self._retry(url, lambda: self._fetch_once(url, tmp))
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        log.info("downloaded %s (%d bytes, %d attempt(s))", url, size, attempts)
        return FetchResult(path=dest, sha256=sha, bytes=size, attempts=attempts, url=url)

    def _fetch_once(self, url: str, tmp: Path) -> tuple[str, int]:
        resp = self._send(url, stream=True)
        with resp:
            if resp.status_code != 200:
                raise DownloadError(
                    f"{url}: HTTP {resp.status_code}; check the arxiv_id and version in the "
                    "manifest (the versioned PDF URL must exist)"
                )
            declared = resp.headers.get("Content-Length")
            h = hashlib.sha256()
            size = 0
            head = b""
            with tmp.open("wb") as f:
                for block in resp.iter_content(self.settings.chunk_bytes):
                    if len(head) < len(PDF_MAGIC):
                        head += block[: len(PDF_MAGIC) - len(head)]
                    h.update(block)
                    size += len(block)
                    f.write(block)
                f.flush()
                os.fsync(f.fileno())
        if declared is not None and declared.isdigit() and size != int(declared):
            raise _Retryable(f"body cut short: {size} of {declared} bytes")
        if head != PDF_MAGIC:
            raise DownloadError(
                f"{url}: response is not a PDF (starts with {head!r}, "
                f"content-type {resp.headers.get('Content-Type')!r})"
            )
        if not looks_like_pdf(tmp):
            raise _Retryable(f"PDF has no %%EOF trailer ({size} bytes): truncated")
        return h.hexdigest(), size

    def _arxiv_client(self, page_size: int) -> Any:
        import arxiv

        c = arxiv.Client(page_size=min(100, page_size), delay_seconds=0.0, num_retries=0)
        c.query_url_format = self.settings.api_url + "?{}"
        # The package reads its session from this attribute (arxiv 2.x-4.x); spacing and
        # retries are ours, so arXiv sees one polite client.
        c._session = _PoliteGetSession(self)
        return c

    def _results(self, search: Any) -> list[Paper]:
        import arxiv

        try:
            results = list(self._arxiv_client(search.max_results or 100).results(search))
        except arxiv.ArxivError as e:
            raise DownloadError(f"arXiv API at {self.settings.api_url} failed: {e}") from e
        return [result_to_paper(r) for r in results]

    def search(self, query: str, max_results: int) -> list[Paper]:
        """Papers matching an arXiv query (e.g. ``cat:cs.IR``), newest submissions first.

        Drifts daily; pin the result with :func:`rag.corpus.manifest.write_manifest`.
        """
        import arxiv

        if max_results < 1:
            raise DownloadError(f"max_results must be >= 1, got {max_results}")
        search = arxiv.Search(
            query=query,
            max_results=max_results,
            sort_by=arxiv.SortCriterion.SubmittedDate,
            sort_order=arxiv.SortOrder.Descending,
        )
        return self._results(search)

    def metadata(self, ids: list[str]) -> list[Paper]:
        """Metadata of the given ids (versioned or not) from the export API's ``id_list``."""
        import arxiv

        if not ids:
            return []
        return self._results(arxiv.Search(id_list=list(ids), max_results=len(ids)))


def result_to_paper(result: Any) -> Paper:
    """An ``arxiv.Result`` as an (unobserved: no sha256 yet) manifest paper."""
    short = result.get_short_id()
    m = re.fullmatch(r"(.+?)(v[1-9]\d*)", short)
    if m is None:
        raise DownloadError(f"arXiv entry id {result.entry_id!r} carries no version")
    return Paper(
        arxiv_id=m.group(1),
        version=m.group(2),
        title=" ".join(result.title.split()),
        primary_category=result.primary_category,
    )


def bootstrap_manifest(
    query: str,
    max_results: int,
    settings: ClientSettings,
    *,
    session: requests.Session | None = None,
) -> list[Paper]:
    """Papers for a new manifest from an arXiv query, newest submissions first.

    The result drifts daily (new papers, new versions): it is a starting point, not a corpus.
    Write it with :func:`rag.corpus.manifest.write_manifest`, then run ingest once so the observed
    sha256 is recorded (see :func:`rag.corpus.manifest.observe`) and commit the file; from then on
    the manifest pins the corpus.
    """
    with ArxivClient(settings, session=session) as client:
        return client.search(query, max_results=max_results)


__all__ = [
    "RETRY_STATUSES",
    "ArxivClient",
    "ArxivUnreachable",
    "ClientSettings",
    "FetchResult",
    "RateLimiter",
    "bootstrap_manifest",
    "looks_like_pdf",
    "parse_retry_after",
    "pdf_problem",
    "result_to_paper",
    "sha256_file",
    "unreachable_hint",
]
