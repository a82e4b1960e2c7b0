"""The corpus stage: the pinned manifest, the polite arXiv client, ingest and PDF parsing."""
