"""Retrieval: retrievers over the index, RRF fusion, rerankers, query variants, the ICT reranker."""
