"""Retrieval: retrievers over the index, RRF fusion, rerankers, query variants, the ICT reranker.

Modules:

- ``fuse``: RRF, once
- ``ict``: the label-free ICT reranker
- ``registry``: rerankers by name
- ``rerank``: cross- and bi-encoder rerankers
- ``retrievers``: six retrievers behind ``retrieve(query, k)``
- ``rewrite``: follow-up → standalone query
- ``variants``: multi-query, HyDE
"""
