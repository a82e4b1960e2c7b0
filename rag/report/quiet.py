"""Quiet execution under the report runner: progress bars and warnings go to a log, not the page.

The runner sets :data:`LOG_ENV` to ``outputs/<profile>/logs/<notebook>.log`` for each kernel it
starts; every notebook calls :func:`quiet_under_runner` first thing in its import cell. Under the
runner that sends everything written to stderr — tqdm bars, library warnings, log records, and the
C-level output of native libraries (llama.cpp) — to that file, so cell outputs hold only what the
notebook shows on purpose. Without the variable (JupyterLab, a plain papermill call) it does
nothing and progress bars stay where an interactive user wants them.

The log is scrubbed as it is written (:func:`rag.scrub.scrub`, line by line): stderr is a pipe
whose reader thread writes each line scrubbed to the file, so a kernel killed at any moment
(``kill -9``) leaves no absolute path or key under ``outputs/``, only the lines it had finished.

Kept free of heavy imports: it must run before any module that imports tqdm, whose notebook
detection warns at import time.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import warnings
from typing import TextIO

#: Environment variable naming the log file of the notebook being executed.
LOG_ENV = "RAG_REPORT_LOG"


def _copy_scrubbed(read_fd: int, log: TextIO) -> None:
    """Write each line read from ``read_fd`` to ``log``, scrubbed, until the pipe closes."""
    from rag.scrub import scrub

    with open(read_fd, encoding="utf-8", errors="replace", newline="") as src:
        for line in src:
            log.write(scrub(line)[0])
            log.flush()


def _scrubbed_pipe(log: TextIO) -> TextIO:
    """Point file descriptor 2 (native libraries write there directly) at a pipe whose reader
    thread copies it, scrubbed, to ``log``; returns a line-buffered text stream on the pipe."""
    read_fd, write_fd = os.pipe()
    reader = threading.Thread(target=_copy_scrubbed, args=(read_fd, log), name="log-scrub",
                              daemon=True)  # fmt: skip
    reader.start()
    try:
        sys.stderr.flush()
        os.dup2(write_fd, 2)
        os.close(write_fd)
        fd = 2
    except (OSError, ValueError):
        fd = write_fd
    stream = open(fd, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115

    def drain() -> None:  # at exit, close the pipe so the reader writes the last lines
        stream.flush()
        os.close(fd)
        reader.join(timeout=5)

    atexit.register(drain)
    return stream


def quiet_under_runner() -> None:
    """Under the runner, route stderr, warnings and logging to the notebook's log file.

    Returns ``None`` so that a cell ending with this call echoes nothing.
    """
    target = os.environ.get(LOG_ENV)
    if not target:
        return None
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    stream = _scrubbed_pipe(open(target, "a", encoding="utf-8", buffering=1))  # noqa: SIM115
    sys.stderr = stream
    # tqdm's notebook detection would warn that ipywidgets is missing; plain text bars in the log
    os.environ.setdefault("TQDM_MININTERVAL", "5")
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
            root.removeHandler(h)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    return None
