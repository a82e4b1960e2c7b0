"""The folder pipeline (rag.index.pipeline, rag.index.ray_pipeline): Ray's stages give the serial
path's chunks and vectors, fill the same caches, and turn a bad PDF into one failed row.

The fast test runs the Ray stages' functions in this process, without Ray; the slow one starts a
real two-node cluster (``ray start --head`` on 127.0.0.1 plus a second node) and submits the job
by address from a separate driver process, ``rag pipeline --engine ray --address``. Ray's job
server (``ray job submit``) needs the dashboard, which ``ray[data]`` does not install, so the
driver joins the cluster with ``ray.init(address=...)``: the way a job is submitted without it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from rag import paths
from rag.corpus import parse as parse_mod
from rag.corpus.parse import ParseSettings
from rag.index.build import index_corpus
from rag.index.pipeline import pdf_files, run_pipeline
from rag.index.ray_embed import RAY_LOCAL_ENV
from rag.index.ray_pipeline import ChunkStage, EmbedStage, collect, input_rows, parse_row
from rag.text.chunk import chunk_settings
from tests.fakeembed import BowEmbedder

#: the three smallest PDFs of the mirror (70-135 kB)
PDFS = ("1607.01759", "1310.4546", "1602.03483")
BAD = "9999.00001"


class NoCalls(BowEmbedder):
    """Fails if asked to embed: everything must come from the cache."""

    def encode_passages(self, texts):
        raise AssertionError(f"re-embedded {len(texts)} texts")


@pytest.fixture()
def folder(tmp_path, shared_dir):
    d = tmp_path / "pdfs"
    d.mkdir()
    for pid in PDFS:
        shutil.copy(shared_dir / "corpus" / "pdfs" / f"{pid}.pdf", d)
    (d / f"{BAD}.pdf").write_bytes(b"%PDF-1.4\nnot a pdf at all\n%%EOF\n")
    return d


def _serial(folder, cache, monkeypatch, embedder=BowEmbedder):
    monkeypatch.setenv(paths.CACHE_ENV, str(cache))
    return run_pipeline(folder, embedder=embedder)


def _inline_rows(folder, chunk: ChunkStage, embedder=BowEmbedder):
    """The Ray job's rows, each stage called in this process in order."""
    settings = ParseSettings().model_dump(mode="json")
    embed = EmbedStage(embedder, 1)
    for row in input_rows(pdf_files(folder)):
        yield embed(chunk(parse_row(row, settings)))


def _failed(rows):
    return [(r["paper_id"], r["stage"], r["status"]) for r in rows]


def _same_index(a, b):
    assert [c.to_dict() for c in a.chunks] == [c.to_dict() for c in b.chunks]
    assert a.chunk_fingerprint == b.chunk_fingerprint
    assert a.dense.ids == b.dense.ids
    np.testing.assert_array_equal(a.dense.vectors, b.dense.vectors)


def test_ray_stages_equal_serial_share_caches_and_resume(folder, tmp_path, monkeypatch):
    serial = _serial(folder, tmp_path / "serial", monkeypatch)
    assert _failed(serial.summary["failed"]) == [(BAD, "parse", "corrupt")]
    assert str(tmp_path) not in serial.summary["failed"][0]["error"], "paths are scrubbed"
    assert serial.summary["papers_indexed"] == len(PDFS) and serial.summary["chunks_indexed"] > 0

    # a killed job keeps the papers the driver received: here it dies after the first row
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "ray"))
    settings = chunk_settings({})
    chunk = ChunkStage(settings)
    first = []

    def killed():
        first.append(next(_inline_rows(folder, chunk)))
        yield first[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        collect(killed(), settings, BowEmbedder())
    parsed, rec = collect(_inline_rows(folder, chunk), settings, BowEmbedder())
    assert first[0]["embedded"] > 0 and rec["cached"] == first[0]["embedded"]
    assert rec["embedded"] == rec["passages"] - rec["cached"] > 0
    assert _failed(rec["failed"]) == [(BAD, "parse", "corrupt")]
    # the index build after the stream finds every chunk and vector cached: no model call
    _same_index(index_corpus(parsed, settings, embedder=NoCalls()), serial.indexed)

    # and the Ray stages resume the serial path's work: every vector from its cache
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "serial"))
    _, rec = collect(_inline_rows(folder, chunk, NoCalls), settings, BowEmbedder())
    assert rec["embedded"] == 0 and rec["cached"] == rec["passages"] > 0


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ray_start(args: list[str], log: Path, env: dict[str, str], attempts: int = 3):
    """``ray start --block`` in its own process group, returned once the node is up; retried,
    since on a busy machine a node's raylet can give up waiting for its agent process."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    for _ in range(attempts):
        with log.open("w") as out:
            proc = subprocess.Popen(
                [ray_bin, "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 "--disable-usage-stats", f"--object-store-memory={100 * 2**20}", *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        else:
            return proc
        _stop(proc)
    pytest.fail(f"ray start failed {attempts} times:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """End the node: its ``ray start`` and every process it started (one process group)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGKILL:
            return


@pytest.fixture()
def cluster(tmp_path):
    """A head on 127.0.0.1 plus a second node, one CPU each, token auth with a fresh token;
    yields ``(address, env)`` for a driver process."""
    gcs, dash, *agent = _free_ports(6)
    temp = Path(tempfile.mkdtemp(prefix="rt"))  # short: Ray's socket paths sit under it
    env = {
        **os.environ,
        **RAY_LOCAL_ENV,  # a busy machine's raylet can miss Ray's own 30 s start deadline
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }
    nodes = []
    try:
        nodes.append(_ray_start(
            ["--head", f"--port={gcs}", f"--dashboard-port={dash}", "--include-dashboard=false",
             f"--temp-dir={temp}"], tmp_path / "head.log", env,
        ))  # fmt: skip
        nodes.append(_ray_start(
            [f"--address=127.0.0.1:{gcs}", f"--dashboard-agent-listen-port={agent[0]}",
             f"--dashboard-agent-grpc-port={agent[1]}", f"--metrics-export-port={agent[2]}",
             f"--runtime-env-agent-port={agent[3]}"], tmp_path / "worker.log", env,
        ))  # fmt: skip
        yield f"127.0.0.1:{gcs}", env
    finally:
        for proc in reversed(nodes):
            _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_cluster_job_equals_serial(folder, tmp_path, monkeypatch, cluster):
    address, env = cluster
    summary_path = tmp_path / "ray.json"
    root = str(paths.project_root())
    job = subprocess.run(
        [sys.executable, "-m", "rag.cli", "pipeline", str(folder), "--engine", "ray",
         "--address", address, "--embedder", "tests.fakeembed:BowEmbedder",
         "--summary", str(summary_path)],
        env={**env, paths.CACHE_ENV: str(tmp_path / "ray"), "PYTHONPATH": root},
        cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert job.returncode == 0, job.stderr[-3000:]
    summary = json.loads(summary_path.read_text())
    assert summary["ray"]["nodes"] == 2 and summary["ray"]["cpus"] == 2
    assert _failed(summary["failed"]) == [(BAD, "parse", "corrupt")]
    assert summary["papers_indexed"] == len(PDFS)
    assert summary["ray"]["embedded"] == summary["stages"]["embed"]["items"] > 0

    serial = _serial(folder, tmp_path / "serial", monkeypatch)
    assert summary["chunk_fingerprint"] == serial.summary["chunk_fingerprint"]
    assert summary["chunks_indexed"] == serial.summary["chunks_indexed"]

    # the serial path resumes the job's work: its parses, chunk set and vectors, no model call
    parsed_again = []
    real_parse = parse_mod.parse_pdf
    monkeypatch.setattr(
        parse_mod, "parse_pdf", lambda p, s: parsed_again.append(p.stem) or real_parse(p, s)
    )
    resumed = _serial(folder, tmp_path / "ray", monkeypatch, embedder=NoCalls)
    assert parsed_again == [BAD], "only the failed PDF is parsed again (failures are not cached)"
    _same_index(resumed.indexed, serial.indexed)
