"""arXiv RAG Lab: question answering over a pinned arXiv corpus, measured honestly.

The package does the work; the numbered notebooks in ``notebooks/`` only orchestrate, plot and
explain. One module per idea: see the README's "Package map". From a notebook,
``from rag import Lab`` opens the lab (:class:`rag.lab.Lab`; docs/lab.md).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Lab", "__version__"]


def __getattr__(name: str) -> Any:
    # ``rag.Lab`` is imported on first use, so ``import rag`` (every CLI call) stays cheap
    if name == "Lab":
        from rag.lab import Lab

        return Lab
    raise AttributeError(f"module 'rag' has no attribute {name!r}")
