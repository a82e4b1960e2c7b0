"""Related work for a corpus paper: text similarity, co-citation, and their fusion by RRF.

* **text**: cosine between paper vectors, each the mean of the paper's chunk embeddings from the
  index stage (the same chunks and cached vectors retrieval uses; references are not chunked),
  re-normalised.
* **cocitation**: how many corpus papers cite both (Small 1973), read from the citation graph.
* **coupling**: how many works both cite (Kessler 1963); it reads the paper's own reference list.
* **popularity**: how many corpus papers cite the candidate, a baseline that ignores the paper.
* **fusion**: :func:`rag.retrieval.fuse.rrf` of text and co-citation, the project's one RRF.

:func:`related` ranks with all signals (a tool for a reader); :func:`leave_one_out_runs` builds
the runs that measure them as citation prediction, where the paper's own reference list is hidden
from every signal, so coupling is left out there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag.errors import ConfigError
from rag.papers.graph import cocitation, coupling
from rag.retrieval.fuse import rrf
from rag.types import Chunk, ParsedPaper

if TYPE_CHECKING:
    from rag.index.embed import Embedder
    from rag.text.chunk import ChunkSettings

#: The index stage's default chunking (notebook 03's parameters): paper vectors are built from the
#: same chunks, so their embeddings are already cached.
INDEX_CHUNKING = {"strategy": "fixed", "max_tokens": 254, "overlap_tokens": 32}
#: The signals :func:`related` can rank by.
METHODS = ("text", "cocitation", "coupling", "popularity", "fusion")


def paper_vectors(chunks: Sequence[Chunk], vectors: np.ndarray) -> dict[str, np.ndarray]:
    """``{paper_id: unit vector}``: the mean of each paper's chunk vectors, re-normalised.

    Raises:
        ConfigError: ``vectors`` does not hold one row per chunk.
    """
    if len(chunks) != len(vectors):
        raise ConfigError(f"{len(chunks)} chunks but {len(vectors)} vectors; pass them aligned")
    rows: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        rows.setdefault(c.paper_id, []).append(i)
    out = {}
    for pid, idx in rows.items():
        v = np.asarray(vectors[idx], dtype=np.float64).mean(axis=0)
        norm = np.linalg.norm(v)
        out[pid] = v / norm if norm > 0 else v
    return out


def corpus_vectors(
    parsed: Sequence[ParsedPaper],
    chunking: ChunkSettings | None = None,
    embedder: Embedder | str = "minilm",
) -> dict[str, np.ndarray]:
    """Paper vectors of parsed papers: the index stage's chunks (same settings, same chunk cache)
    and their cached embeddings (only chunks missing from the cache are embedded); ``embedder``
    is an :class:`~rag.index.embed.Embedder` or a name for :func:`~rag.index.embed.load_embedder`.
    """
    from rag.index.embed import load_embedder
    from rag.index.embed_cache import embed_texts
    from rag.text.chunk import chunk_settings, require_settings
    from rag.text.chunk_cache import chunk_corpus

    settings = chunk_settings(INDEX_CHUNKING) if chunking is None else chunking
    chunks = chunk_corpus(parsed, require_settings(settings, "corpus_vectors"))
    vecs = embed_texts(
        [c.chunk_id for c in chunks], [c.text for c in chunks],
        load_embedder(embedder) if isinstance(embedder, str) else embedder, show_progress=False,
    )  # fmt: skip
    return paper_vectors(chunks, vecs)


def text_scores(vectors: Mapping[str, np.ndarray], paper: str) -> dict[str, float]:
    """Cosine of ``paper``'s vector with every other paper's.

    Raises:
        ConfigError: ``paper`` has no vector.
    """
    if paper not in vectors:
        raise ConfigError(f"no paper vector for {paper!r}; is it in the indexed corpus?")
    me = vectors[paper]
    return {p: float(np.dot(me, v)) for p, v in vectors.items() if p != paper}


def popularity(refs: Mapping[str, set[str]], candidates: Sequence[str], *, hide: str = "") -> dict:
    """How many citing papers (but ``hide``) cite each candidate; zero counts are left out."""
    counts = {c: 0 for c in candidates}
    for citing, cited in refs.items():
        if citing == hide:
            continue
        for c in cited:
            if c in counts:
                counts[c] += 1
    return {c: float(n) for c, n in counts.items() if n > 0}


def signal_runs(
    paper: str,
    corpus: Sequence[str],
    vectors: Mapping[str, np.ndarray],
    refs: Mapping[str, set[str]],
    *,
    hide_own_references: bool,
) -> dict[str, dict[str, float]]:
    """``{method: {candidate: score}}`` for one paper over the other corpus papers.

    With ``hide_own_references`` the paper's reference list is read by no signal: co-citation and
    popularity skip it, and coupling (which is built from it) is absent.
    """
    cands = [p for p in corpus if p != paper]
    cset = set(cands)
    hide = paper if hide_own_references else ""
    text = {d: s for d, s in text_scores(vectors, paper).items() if d in cset}
    cocite = {d: float(n) for d, n in cocitation(refs, paper, hide=hide).items() if d in cset}
    runs = {
        "text": text,
        "cocitation": cocite,
        "popularity": popularity(refs, cands, hide=hide),
    }
    if not hide_own_references:
        runs["coupling"] = {d: float(n) for d, n in coupling(refs, paper).items() if d in cset}
    runs["fusion"] = rrf([runs["text"], runs["cocitation"]])
    return runs


def related(
    paper: str,
    corpus: Sequence[str],
    vectors: Mapping[str, np.ndarray],
    refs: Mapping[str, set[str]],
    *,
    method: str = "fusion",
    k: int = 10,
) -> list[dict]:
    """The ``k`` corpus papers most related to ``paper`` by ``method``: ``[{"arxiv_id", "score",
    "rank"}]``, JSON-ready.

    Raises:
        ConfigError: unknown ``paper`` or ``method``, or ``k`` below 1.
    """
    if method not in METHODS:
        raise ConfigError(f"unknown related-work method {method!r}; use one of {list(METHODS)}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    if paper not in corpus:
        raise ConfigError(f"paper {paper!r} is not in the corpus; list_papers shows the ids")
    run = signal_runs(paper, corpus, vectors, refs, hide_own_references=False)[method]
    ranked = sorted(run.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return [
        {"arxiv_id": d, "score": round(s, 6), "rank": i} for i, (d, s) in enumerate(ranked, start=1)
    ]


def leave_one_out_runs(
    corpus: Sequence[str],
    vectors: Mapping[str, np.ndarray],
    refs: Mapping[str, set[str]],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, float]]]]:
    """Citation prediction, one query per paper with in-corpus references.

    Returns:
        ``(qrels, runs)``: qrels ``{paper: {cited corpus paper: 1}}`` and one run per method
        (text, cocitation, popularity, fusion) ``{paper: {candidate: score}}``, every signal
        computed with the paper's own reference list hidden.
    """
    cset = set(corpus)
    qrels: dict[str, dict[str, int]] = {}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for p in corpus:
        cited = sorted(c for c in refs.get(p, set()) if c in cset and c != p)
        if not cited or p not in vectors:
            continue
        qrels[p] = {c: 1 for c in cited}
        for name, run in signal_runs(p, corpus, vectors, refs, hide_own_references=True).items():
            runs.setdefault(name, {})[p] = run
    return qrels, runs
