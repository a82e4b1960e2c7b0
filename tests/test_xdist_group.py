"""``make test`` runs pytest on two xdist workers and relies on every reader of the smoke report
landing on one worker (tests/conftest.py marks them ``xdist_group("smoke")``), or the report is
executed once per worker. pytest-xdist 3.8 silently stops grouping under pytest 9 (it renames the
node id xdist suffixes), so this runs a real two-worker session and checks where tests ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import os

import pytest


@pytest.fixture
def smoke_run():
    return os.environ["PYTEST_XDIST_WORKER"]


@pytest.mark.parametrize("i", range(6))
def test_reads_the_report(smoke_run, i, record_property):
    print("WORKER", smoke_run)


@pytest.mark.parametrize("i", range(6))
def test_other(i):
    pass
"""


def test_smoke_report_readers_share_one_worker(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "tests.conftest",
            "-rA",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(probe),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    workers = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("WORKER ")}
    assert len(workers) == 1, f"smoke readers ran on {sorted(workers)}:\n{out.stdout[-1500:]}"
    assert "12 passed" in out.stdout
