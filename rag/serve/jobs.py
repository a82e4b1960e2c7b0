"""Ingest jobs: one paper at a time through the report's own fetch, parse, chunk and embed path.

``POST /ingest`` queues a job and returns its id at once; one worker thread runs jobs in order, so
two adds never race on the served index (which is also locked). A paper comes from the pinned
manifest when it is pinned there (so its sha256 is checked), else from arXiv's metadata when the
network is allowed; its PDF goes through :func:`rag.corpus.ingest.ingest` (cache → mirror → polite
arXiv client) and the parser's cache. An uploaded PDF is parsed directly and served under the id
``upload-<sha256[:12]>``, so the same file twice is one paper.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag import paths
from rag.corpus.ingest import IngestSettings, ingest
from rag.corpus.manifest import ARXIV_ID_RE, Paper, load_manifest
from rag.errors import DownloadError, RagError
from rag.serve.index import ServedIndex
from rag.types import AsDict

log = logging.getLogger(__name__)


@dataclass
class Job(AsDict):
    """The state of one ingest job, as ``GET /ingest/{job}`` reports it."""

    job_id: str
    paper_id: str
    status: str = "queued"  # queued | running | done | failed
    stage: str = "queued"  # queued | fetching | parsing | chunking | embedding | committing | done
    added_chunks: int = 0
    detail: str = ""
    created: float = 0.0
    finished: float | None = None


def resolve_paper(arxiv_id: str, manifest_path: str, *, allow_network: bool) -> Paper:
    """The pinned :class:`Paper` for ``arxiv_id``, or its arXiv metadata when not pinned.

    Raises:
        DownloadError: not pinned and the network is off or arXiv does not know the id.
    """
    arxiv_id = re.sub(r"v\d+$", "", arxiv_id.strip())
    for p in load_manifest(paths.resolve(manifest_path)):
        if p.arxiv_id == arxiv_id:
            return p
    if not allow_network:
        raise DownloadError(
            f"{arxiv_id} is not pinned in {manifest_path} and network fetching is off "
            "(the service runs offline: only pinned papers in the cache or the mirror can be added)"
        )
    from rag.corpus.arxiv_client import ArxivClient, ClientSettings

    with ArxivClient(ClientSettings()) as client:
        found = client.metadata([arxiv_id])
    if not found:
        raise DownloadError(f"arXiv has no paper {arxiv_id}")
    return found[0]


class IngestWorker:
    """Runs ingest jobs one at a time on a daemon thread."""

    def __init__(
        self,
        index: Callable[[], ServedIndex],
        *,
        manifest_path: str = "data/manifest.jsonl",
        pdf_mirror: str = "",
        allow_network: bool = True,
    ) -> None:
        self._index = index
        self.manifest_path, self.pdf_mirror, self.allow_network = (
            manifest_path,
            pdf_mirror,
            allow_network,
        )
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue[tuple[Job, Callable[[Job], None]]] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="ingest", daemon=True)
        self._thread.start()

    def _submit(self, paper_id: str, work: Callable[[Job], None]) -> Job:
        job = Job(uuid.uuid4().hex[:16], paper_id, created=time.time())
        self.jobs[job.job_id] = job
        self._queue.put((job, work))
        return job

    def _run(self) -> None:
        while True:
            job, work = self._queue.get()
            job.status = "running"
            try:
                work(job)
                job.status, job.stage = "done", "done"
            except RagError as e:
                job.status, job.detail = "failed", str(e)
                log.warning("ingest job %s (%s) failed: %s", job.job_id, job.paper_id, e)
            except Exception as e:  # a worker must outlive any one bad paper; reason kept
                job.status, job.detail = "failed", f"{type(e).__name__}: {e}"
                log.exception("ingest job %s (%s) crashed", job.job_id, job.paper_id)
            job.finished = time.time()

    def submit_arxiv(self, arxiv_id: str) -> Job:
        """Queue the pinned (or, with network, any) arXiv paper ``arxiv_id``."""
        if not re.match(ARXIV_ID_RE, re.sub(r"v\d+$", "", arxiv_id)):
            raise DownloadError(f"{arxiv_id!r} is not an arXiv id (e.g. 1908.10084)")

        def work(job: Job) -> None:
            index = self._index()
            paper = resolve_paper(arxiv_id, self.manifest_path, allow_network=self.allow_network)
            job.paper_id = paper.arxiv_id
            if paper.arxiv_id in index.snapshot.paper_ids():
                job.detail = "already served: nothing added"
                return
            job.stage = "fetching"
            settings = IngestSettings(
                **({"mirror": paths.resolve(self.pdf_mirror)} if self.pdf_mirror else {})
            )
            if not self.allow_network and not _local_pdf(paper, settings):
                raise DownloadError(
                    f"{paper.arxiv_id} is in neither the PDF cache nor the mirror, and network "
                    "fetching is off"
                )
            summary = ingest([paper], settings)
            out = summary.outcomes[0]
            parsed = summary.parsed.get(paper.arxiv_id)
            if parsed is None:
                raise DownloadError(
                    f"{paper.arxiv_id}: {out.status}: {out.reason or out.parse_error or 'no text'}"
                )
            job.added_chunks = index.add_paper(
                parsed, paper.title, "arxiv", sha256=out.sha256, progress=_stage(job)
            )
            job.detail = (
                f"added {job.added_chunks} chunks" if job.added_chunks else "already served"
            )

        return self._submit(re.sub(r"v\d+$", "", arxiv_id), work)

    def submit_pdf(self, data: bytes, title: str) -> Job:
        """Queue an uploaded PDF (served as ``upload-<sha256[:12]>``); a file that is not a PDF
        fails its job, before anything is written."""
        sha = hashlib.sha256(data).hexdigest()
        paper_id = f"upload-{sha[:12]}"

        def work(job: Job) -> None:
            from rag.corpus.parse import ParseSettings, load_parsed

            if not data.startswith(b"%PDF-"):
                raise DownloadError(f"the upload is not a PDF (it starts with {data[:8]!r})")
            index = self._index()
            if paper_id in index.snapshot.paper_ids():
                job.detail = "already served: nothing added"
                return
            job.stage = "parsing"
            pdf = paths.cache_dir("uploads") / f"{paper_id}.pdf"
            pdf.write_bytes(data)
            parsed = load_parsed(pdf, sha, ParseSettings())
            if not parsed.ok:
                raise DownloadError(f"uploaded PDF not parsed ({parsed.status}): {parsed.error}")
            parsed.paper_id = paper_id
            job.added_chunks = index.add_paper(
                parsed, title or f"Uploaded PDF {sha[:12]}", "upload", sha256=sha,
                progress=_stage(job),
            )  # fmt: skip
            job.detail = f"added {job.added_chunks} chunks"

        return self._submit(paper_id, work)


def _stage(job: Job) -> Callable[[str], None]:
    def set_stage(stage: str) -> None:
        job.stage = stage

    return set_stage


def _local_pdf(paper: Paper, settings: IngestSettings) -> Path | None:
    for folder in (settings.resolved_pdf_dir(), settings.mirror):
        if folder is not None and (folder / paper.filename).is_file():
            return folder / paper.filename
    return None
