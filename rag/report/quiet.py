"""Quiet execution under the report runner: progress bars and warnings go to a log, not the page.

The runner sets :data:`LOG_ENV` to ``outputs/<profile>/logs/<notebook>.log`` for each kernel it
starts; every notebook calls :func:`quiet_under_runner` first thing in its import cell. Under the
runner that sends everything written to stderr — tqdm bars, library warnings, log records, and the
C-level output of native libraries (llama.cpp) — to that file, so cell outputs hold only what the
notebook shows on purpose. Without the variable (JupyterLab, a plain papermill call) it does
nothing and progress bars stay where an interactive user wants them.

Kept free of heavy imports: it must run before any module that imports tqdm, whose notebook
detection warns at import time.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

#: Environment variable naming the log file of the notebook being executed.
LOG_ENV = "RAG_REPORT_LOG"


def quiet_under_runner() -> None:
    """Under the runner, route stderr, warnings and logging to the notebook's log file.

    Returns ``None`` so that a cell ending with this call echoes nothing.
    """
    target = os.environ.get(LOG_ENV)
    if not target:
        return None
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    stream = open(target, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with the kernel
    try:  # native libraries write to file descriptor 2 directly
        sys.stderr.flush()
        os.dup2(stream.fileno(), 2)
    except (OSError, ValueError):
        pass
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
