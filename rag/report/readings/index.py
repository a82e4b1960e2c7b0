"""Readings of notebook 03 (index): build, embedding throughput, and how search grows with size."""

from __future__ import annotations

from typing import Any

from rag.report.readings.common import md


def index_build(stats: dict[str, Any], n_chunks: int, n_papers: int) -> Any:
    """Chunks indexed, the dense vectors' memory, and whether the indexes came from the cache."""
    cached = stats.get("dense_from_cache")
    mem = stats.get("dense_memory_bytes", 0) / 2**20
    return md(
        f"**Reading.** {n_chunks:,} chunks from {n_papers} papers. The dense vectors take "
        f"{mem:.2f} MB ({n_chunks:,} × 384 float32); "
        + (
            "the indexes were **loaded from the cache** (nothing re-embedded), so these timings "
            "measure loading, not building."
            if cached
            else "the indexes were built in this run."
        )
    )


def embedding_throughput(tp: dict[str, Any], target: float = 0.8) -> Any:
    """The project's embedding throughput against raw sentence-transformers, and the target."""
    if not tp:
        return md("**Reading.** Throughput not measured (the embedder has no local model).")
    ratio = tp["ratio"]
    return md(
        f"**Reading.** The project's `embed_texts` embeds {tp['embed_texts_chunks_per_s']:.1f} "
        f"chunks/s against {tp['raw_chunks_per_s']:.1f} for raw sentence-transformers on the same "
        f"{tp['n_texts']} texts: a ratio of {ratio:.2f}, which "
        f"{'meets' if ratio >= target else 'misses'} the {target:.0%} target."
    )


def index_growth(growth: list[dict[str, Any]], query_backend: str | None, torch_p50: Any) -> Any:
    """Search latency, HNSW recall and memory from the smallest to the largest corpus size."""
    first, last = growth[0], growth[-1]
    k = last["n"] / first["n"] if first["n"] else 1
    sizes = len(growth)
    text = (
        f"**Reading.** From {first['n']:,} to {last['n']:,} chunks (×{k:g}): exact dense search "
        f"(search only) goes from {first['dense_search_only_p50_ms']:.2f} to "
        f"{last['dense_search_only_p50_ms']:.2f} ms p50 and a whole dense query (encoding "
        f"included) from {first['dense_p50_ms']:.1f} to {last['dense_p50_ms']:.1f} ms, so query "
        f"*encoding* dominates at these sizes; BM25 goes from {first['bm25_p50_ms']:.2f} to "
        f"{last['bm25_p50_ms']:.2f} ms. HNSW recall@10 against exact search is "
        f"{first['hnsw_recall@10']:.4f} → {last['hnsw_recall@10']:.4f}. Memory while serving "
        f"(one copy of the vectors, held by faiss): {first['dense_mem_mb']:.1f} → "
        f"{last['dense_mem_mb']:.1f} MB. "
        f"Queries are encoded with {query_backend or 'PyTorch'}"
        + (
            f" (PyTorch path: {float(torch_p50):.1f} ms p50)."
            if isinstance(torch_p50, int | float)
            else "."
        )
    )
    if sizes < 4:
        text += (
            f" Only {sizes} corpus sizes were measured in this profile (`scale_factors`), so the "
            "lines are drawn through too few points to read a growth rate from their shape."
        )
    return md(text)


def answer_index(n_chunks: int, tp: dict[str, Any], growth: list[dict[str, Any]]) -> str:
    """The index page's one sentence for notebook 03."""
    first, last = growth[0], growth[-1]
    return (
        f"{n_chunks:,} chunks embed at {tp.get('embed_texts_chunks_per_s', float('nan')):.1f} "
        f"chunks/s on 2 cores; a dense query takes {first['dense_p50_ms']:.1f} ms p50 (encoding "
        f"included) and BM25 {first['bm25_p50_ms']:.2f} ms, and at {last['n'] / first['n']:g}× the "
        f"corpus exact search still answers in {last['dense_p50_ms']:.1f} ms."
    )
