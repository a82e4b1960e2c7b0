"""Papers-level tools over the pinned corpus: reference lists, the citation graph, related work.

The corpus, index and retrieval stages supply parsed papers, chunk vectors and RRF; this stage
reads reference sections into a citation graph (``citations.jsonl``) and ranks related papers,
with :mod:`rag.papers.measure` measuring both.

Modules:

- ``graph``: the corpus citation graph (``citations.jsonl``)
- ``ids``: arXiv ids and DOIs in a reference
- ``measure``: measure the graph and related work
- ``references``: a paper's reference list
- ``related``: related work: text, co-citation, RRF
- ``resolve``: a reference → the work it cites
- ``summarize``: extractive summaries
- ``summary_eval``: measure the summaries (extractive, lead, an LLM with ``--llm``)
"""
