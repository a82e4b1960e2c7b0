"""arXiv RAG Lab: question answering over a pinned arXiv corpus, measured honestly.

The package does the work; the numbered notebooks in ``notebooks/`` only orchestrate, plot and
explain. One module per idea: see the README's "Package map".
"""

from __future__ import annotations

__version__ = "0.1.0"

