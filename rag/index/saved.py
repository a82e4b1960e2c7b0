"""Reusing a saved index: load it when its recorded build matches, else say why it is built.

The dense and BM25 indexes each save a ``meta.json`` with what they were built from, and their
``load`` raises :class:`~rag.errors.IndexBuildError` naming the first difference. A folder with no
index yet is the usual first build, logged as such (not as an error); a saved index built
differently is logged with the reason it is rebuilt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rag.errors import IndexBuildError
from rag.paths import display

logger = logging.getLogger(__name__)

T = TypeVar("T")


def load_saved(load: Callable[[], T], directory: str | Path, what: str) -> T | None:
    """``load()``'s index from ``directory``, or None when ``what`` (e.g. "dense index") must be
    built: there is none yet, or the saved one was built from something else."""
    if not (Path(directory) / "meta.json").exists():
        logger.info("%s: first build in %s", what, display(directory))
        return None
    try:
        return load()
    except IndexBuildError as e:
        logger.info("rebuilding the %s: %s", what, e)
        return None
