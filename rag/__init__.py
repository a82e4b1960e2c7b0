"""arXiv RAG Lab: question answering over a pinned arXiv corpus, measured honestly.

The package does the work; the numbered notebooks in ``notebooks/`` only orchestrate, plot and
explain. One module per idea; each subpackage's docstring names its modules, one line each
(``tests/test_layout.py`` checks it), and the floors they stand on are in the README's map. From a
notebook, ``from rag import Lab`` opens the lab (:class:`rag.lab.Lab`; docs/lab.md).

The shared core, below every stage:

Modules:

- ``atomic``: writes that never leave a half-written file
- ``filehash``: a file's sha256, memoised by its stat signature
- ``cli``: the ``rag`` command
- ``errors``: the error hierarchy
- ``ir``: IR dict contracts, per-paper cap, paper-level MaxP
- ``jsonl``: the one JSONL record reader
- ``paths``: folders and the path convention
- ``scrub``: secrets and absolute paths out of text
- ``shard``: pinned shards for small models
- ``types``: Block, Chunk, Hit records
- ``verdicts``: ``Verdict``, ``ClaimJudge``

The stages, floor by floor, low to high (a module imports only its own floor or lower ones):

- ``llm``: one chat interface over API, self-hosted and local models
- ``text``: normalisation, sentences, tokens, chunkers
- ``corpus``: the pinned manifest, polite arXiv fetch, PDF parsing
- ``index``: embedders, dense and BM25 indexes, the chunk store
- ``retrieval``: six retrievers behind ``retrieve(query, k)``, RRF, rerankers, rewriting
- ``answer``: context assembly, answerers, answers into claims
- ``judge``: faithfulness judges, offline and LLM
- ``evaluation``: gold sets, IR metrics with CIs, paired tests, answer grades
- ``papers``: reference lists, the citation graph, related work, summaries
- ``report``: profiles, the papermill runner, pages, sweeps, readings
- ``serve``: the desk and engine behind ``rag ask``, HTTP and MCP
- ``lab``: ``rag.Lab``, the desk in a notebook
- ``bench``: speed and quality measurements (not tests)
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
