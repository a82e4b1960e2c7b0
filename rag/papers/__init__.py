"""Papers-level tools over the pinned corpus: reference lists, the citation graph, related work.

The corpus, index and retrieval stages supply parsed papers, chunk vectors and RRF; this stage
reads reference sections into a citation graph (``citations.jsonl``) and ranks related papers,
with :mod:`rag.papers.measure` measuring both.
"""
