"""Text tools shared by every later stage: normalisation, sentences, tokenizers and chunking.

Modules:

- ``chunk``: fixed, sentence, section chunkers
- ``chunk_cache``: chunks by fingerprint
- ``coverage``: question-term coverage
- ``hygiene``: TOC and reference chunks out of the index, TOC runs and hyphen splits repaired
- ``hyphens``: words split across blocks, joined
- ``normalize``: ligatures, hyphens, match keys
- ``sentences``: sentences
- ``tokenize``: token offsets
"""
