"""Helpers for the service tests: a tiny served index over hand-made chunks, a hashing embedder.

The hashing embedder (bag of hashed word unigrams, 64-d, L2-normalised) stands in for MiniLM so the
TestClient tests run in seconds; the end-to-end tests run the real ``rag serve`` and model.
"""

from __future__ import annotations

import hashlib

from rag.index.build import index_chunks
from rag.serve.config import LabSettings
from rag.serve.engine import Lab
from rag.serve.index import ServedIndex
from rag.text.chunk import chunk_settings
from rag.types import Chunk
from tests.fakeembed import BowEmbedder

#: Two real pinned papers, with a few sentences each (paraphrased from their abstracts).
TEXTS = {
    "1607.01759": [
        ("Introduction", 1, "fastText is a simple and efficient baseline for text classification. "
         "Our experiments show that fastText is often on par with deep learning classifiers in "
         "terms of accuracy, and many orders of magnitude faster for training and evaluation."),
        ("Model architecture", 2, "Sentences are represented as a bag of words and bag of n-grams. "
         "The word representations are averaged into a text representation which is in turn fed "
         "to a linear classifier with a hierarchical softmax."),
        ("Experiments", 3, "We can train fastText on more than one billion words in less than ten "
         "minutes using a standard multicore CPU, and classify half a million sentences among "
         "312K classes in less than a minute."),
    ],
    "1810.08699": [
        ("Introduction", 1, "pair2vec learns word pair embeddings from co-occurrence contexts. "
         "The pair embeddings encode background knowledge about the relation between two words."),
        ("Method", 2, "The word pair representations are trained with a multivariate negative "
         "sampling objective over the contexts that connect the two words in text."),
        ("Results", 4, "Adding pair2vec to a question answering model improves the SQuAD 2.0 "
         "score by 2.7 points and helps on the MultiNLI natural language inference task."),
    ],
}  # fmt: skip


HashEmbedder = BowEmbedder


def tiny_chunks() -> list[Chunk]:
    out = []
    for pid, rows in TEXTS.items():
        for i, (section, page, text) in enumerate(rows):
            cid = hashlib.sha256(f"{pid}:{i}".encode()).hexdigest()[:16]
            out.append(Chunk(cid, pid, "fixed", text, section, page, page, 0, len(text), 50))
    return out


TITLES = {
    "1607.01759": "Bag of Tricks for Efficient Text Classification",
    "1810.08699": "pair2vec: Compositional Word-Pair Embeddings for Cross-Sentence Inference",
}


def tiny_lab(root, **lab_kw) -> Lab:
    """A :class:`Lab` over :func:`tiny_chunks` (call with ``RAG_CACHE_DIR`` set to a tmp dir)."""
    chunks = tiny_chunks()
    base = index_chunks(chunks, "tiny-serve-test", embedder=HashEmbedder(), show_progress=False)
    settings = LabSettings(paper_ids=tuple(TEXTS))
    served = ServedIndex(root, base, dict(TITLES), chunk_settings(settings.chunking()))
    return Lab(settings, served, **lab_kw)
