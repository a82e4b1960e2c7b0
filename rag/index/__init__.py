"""Indexing: embedders (and the ONNX query encoder), the dense and BM25 indexes, the chunk store."""
