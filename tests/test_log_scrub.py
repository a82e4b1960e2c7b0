"""A notebook's log is scrubbed as it is written: a kernel killed with ``kill -9`` mid-notebook
leaves no absolute path or key in ``outputs/`` (the runner scrubbed logs only at the end)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rag import paths
from rag.report import quiet
from rag.scrub import scrub

#: What the "kernel" writes: through logging, through sys.stderr, and to fd 2 as native code does.
KERNEL = r"""
import logging, os, sys, time
from rag.report.quiet import quiet_under_runner
quiet_under_runner()
root = sys.argv[1]
logging.getLogger("x").warning("loaded %s/rag/index/embed.py", root)
print("reading /work/shared/corpus/pdfs/1607.01759.pdf", file=sys.stderr)
os.write(2, ("model at " + sys.prefix + "/lib/site-packages/llama_cpp/lib.so\n").encode())
print("key sk-ant-" + "A" * 30, file=sys.stderr)
sys.stderr.flush()
time.sleep(1.0)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_kernel_killed_mid_notebook_leaves_only_scrubbed_lines(tmp_path):
    log = tmp_path / "outputs" / "smoke" / "logs" / "03_retrieval.log"
    env = {**os.environ, quiet.LOG_ENV: str(log)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(paths.project_root())],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    text = log.read_text()
    assert len(text.splitlines()) == 4, text  # every finished line is there
    assert scrub(text)[1].to_dict() == {}, text  # nothing left to scrub
    for raw in (str(paths.project_root()), "/work/shared", sys.prefix, "sk-ant-"):
        assert raw not in text, raw
    assert "rag/index/embed.py" in text and "<venv>" in text
    assert not any(p.is_file() and p != log for p in Path(tmp_path / "outputs").rglob("*"))
