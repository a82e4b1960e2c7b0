"""Chunking benchmark: each strategy over parsed papers, without the cache (speed, not a test)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from rag.text.chunk import ChunkSettings, chunk_settings
from rag.text.chunk_cache import chunk_corpus
from rag.text.tokenize import Tokenizer, default_tokenizer
from rag.types import ParsedPaper


def bench_chunk(
    parsed_papers: Sequence[ParsedPaper],
    settings_list: Sequence[ChunkSettings | Mapping[str, Any]] | None = None,
    *,
    tokenizer: Tokenizer | None = None,
) -> dict[str, Any]:
    """Time each chunking strategy over the papers (no cache); prints a table, returns a dict.

    ``settings_list`` defaults to the three strategies with their default settings.

    Returns ``{"tokenizer_load_s", "papers", "rows": [{strategy, params, chunks, wall_s, cpu_s,
    chunks_per_s, papers_per_s, mean_tokens}]}``; ``cpu_s`` (process time) is what to compare on
    a busy machine, where wall time also measures the neighbours.
    """
    t0 = time.perf_counter()
    tok = tokenizer if tokenizer is not None else default_tokenizer()
    load_s = time.perf_counter() - t0
    rows = []
    for raw in settings_list or [{"strategy": st} for st in ("fixed", "sentence", "section")]:
        s = chunk_settings(raw)
        t, c = time.perf_counter(), time.process_time()
        chunks = chunk_corpus(parsed_papers, s, tokenizer=tok, use_cache=False)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        rows.append(
            {
                "strategy": s.strategy,
                "params": s.params(),
                "chunks": len(chunks),
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "chunks_per_s": round(len(chunks) / wall, 1) if wall > 0 else None,
                "papers_per_s": round(len(parsed_papers) / wall, 1) if wall > 0 else None,
                "mean_tokens": round(sum(c.n_tokens for c in chunks) / len(chunks), 1)
                if chunks
                else None,
            }
        )
    print(f"tokenizer load: {load_s:.2f} s; papers: {len(parsed_papers)}")
    cols = ("strategy", "chunks", "wall s", "cpu s", "chunks/s", "papers/s", "tok")
    print("{:<10} {:>7} {:>8} {:>8} {:>9} {:>9} {:>6}".format(*cols))
    for r in rows:
        print(
            f"{r['strategy']:<10} {r['chunks']:>7} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
            f"{r['chunks_per_s'] or 0:>9.1f} {r['papers_per_s'] or 0:>9.1f} "
            f"{r['mean_tokens'] or 0:>6.1f}"
        )
    return {"tokenizer_load_s": round(load_s, 3), "papers": len(parsed_papers), "rows": rows}
