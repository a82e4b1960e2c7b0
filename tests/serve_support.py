"""Helpers for the service tests: a tiny served index over hand-made chunks, a hashing embedder,
and a real ``rag serve`` subprocess on 127.0.0.1.

The hashing embedder (bag of hashed word unigrams, 64-d, L2-normalised) stands in for MiniLM so the
TestClient tests run in seconds; the end-to-end, concurrency and fuzz tests run the real
``rag serve`` (:class:`Server`) and model over two small pinned papers from the mirror.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from rag.index.build import index_chunks
from rag.serve.config import LabSettings
from rag.serve.engine import Engine
from rag.serve.index import ServedIndex
from rag.text.chunk import chunk_settings
from rag.types import Chunk
from tests.fakeembed import BowEmbedder

#: Two real pinned papers, with a few sentences each (paraphrased from their abstracts).
TEXTS = {
    "1607.01759": [
        ("Introduction", 1, "fastText is a simple and efficient baseline for text classification. "
         "Our experiments show that fastText is often on par with deep learning classifiers in "
         "terms of accuracy, and many orders of magnitude faster for training and evaluation."),
        ("Model architecture", 2, "Sentences are represented as a bag of words and bag of n-grams. "
         "The word representations are averaged into a text representation which is in turn fed "
         "to a linear classifier with a hierarchical softmax."),
        ("Experiments", 3, "We can train fastText on more than one billion words in less than ten "
         "minutes using a standard multicore CPU, and classify half a million sentences among "
         "312K classes in less than a minute."),
    ],
    "1810.08699": [
        ("Introduction", 1, "pair2vec learns word pair embeddings from co-occurrence contexts. "
         "The pair embeddings encode background knowledge about the relation between two words."),
        ("Method", 2, "The word pair representations are trained with a multivariate negative "
         "sampling objective over the contexts that connect the two words in text."),
        ("Results", 4, "Adding pair2vec to a question answering model improves the SQuAD 2.0 "
         "score by 2.7 points and helps on the MultiNLI natural language inference task."),
    ],
}  # fmt: skip


HashEmbedder = BowEmbedder


def tiny_chunks() -> list[Chunk]:
    out = []
    for pid, rows in TEXTS.items():
        for i, (section, page, text) in enumerate(rows):
            cid = hashlib.sha256(f"{pid}:{i}".encode()).hexdigest()[:16]
            out.append(Chunk(cid, pid, "fixed", text, section, page, page, 0, len(text), 50))
    return out


TITLES = {
    "1607.01759": "Bag of Tricks for Efficient Text Classification",
    "1810.08699": "pair2vec: Compositional Word-Pair Embeddings for Cross-Sentence Inference",
}


def tiny_lab(root, **lab_kw) -> Engine:
    """An :class:`Engine` over :func:`tiny_chunks` (call with ``RAG_CACHE_DIR`` set to a tmp)."""
    chunks = tiny_chunks()
    base = index_chunks(chunks, "tiny-serve-test", embedder=HashEmbedder(), show_progress=False)
    settings = LabSettings(paper_ids=tuple(TEXTS))
    served = ServedIndex(root, base, dict(TITLES), chunk_settings(settings.chunking()))
    return Engine(settings, served, **lab_kw)


#: The pinned papers a real ``rag serve`` serves in the tests (small; embedded once per session).
SERVED_PAPERS = ("1607.01759", "1810.08699")
READY_TIMEOUT_S = 420


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_cache_dir(tmp_path_factory) -> Path:
    """One cache root for every real server of the session (parsed papers, embeddings), so the
    served papers are embedded once per test run."""
    d = tmp_path_factory.getbasetemp() / "serve-cache"
    d.mkdir(exist_ok=True)
    return d


class Server:
    """One ``rag serve`` subprocess on 127.0.0.1 (its own session; stopped by its pid only).

    Args:
        tmp: folder for the log (and the served index unless ``index_dir`` is given).
        extra: more ``rag serve`` arguments.
        env: more environment variables (e.g. ``RAG_API_KEY``).
        cache: the cache root (default ``tmp/cache``).
        module: the module run with ``python -m`` and the arguments before ``serve``.
    """

    def __init__(
        self,
        tmp: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        cache: Path | None = None,
        index_dir: Path | None = None,
        module: tuple[str, ...] = ("rag.cli",),
        rate_limit: int = 0,
    ) -> None:
        from rag import paths

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        self.index_dir = index_dir or tmp / "served"
        cmd = [sys.executable, "-m", *module, "serve", "--port", str(self.port),
               "--papers", *SERVED_PAPERS, "--index-dir", str(self.index_dir), "--offline",
               "--rate-limit", str(rate_limit), *extra]  # fmt: skip
        full_env = {**os.environ, "RAG_CACHE_DIR": str(cache or tmp / "cache"), **(env or {})}
        self.proc = subprocess.Popen(
            cmd, stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=full_env,
            cwd=paths.project_root(), start_new_session=True,
        )  # fmt: skip
        self.causes: list[str] = []

    def client(self, source: str = "127.0.0.1", **kw) -> httpx.Client:
        """A client of this server whose connections come from ``source`` (any 127.x.y.z: each
        is another client to the rate limiter)."""
        transport = httpx.HTTPTransport(local_address=source)
        return httpx.Client(base_url=self.url, transport=transport, **kw)

    def wait_ready(
        self, timeout: float = READY_TIMEOUT_S, headers=None, spread: bool = False
    ) -> dict:
        """Poll ``/ready`` until 200 (returned); ``spread``: each poll from another loopback
        address, so polling a rate-limited server spends no test client's bucket."""
        deadline, n = time.monotonic() + timeout, 0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"rag serve exited: {self.log.read_text()[-3000:]}")
            n += 1
            source = f"127.1.{n // 250}.{n % 250 + 1}" if spread else "127.0.0.1"
            try:
                with self.client(source, headers=headers, timeout=5) as c:
                    r = c.get("/ready")
            except httpx.TransportError:
                time.sleep(0.3)
                continue
            if r.status_code == 200:
                return r.json()
            assert r.status_code == 503, r.text
            self.causes.append(r.json()["cause"])
            time.sleep(0.3)
        raise AssertionError(f"not ready in {timeout} s: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_until(check, timeout: float, what: str, every: float = 0.1):
    """Poll ``check()`` until it returns a truthy value (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout} s")
