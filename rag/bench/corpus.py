"""Corpus-stage benchmarks: fetch-and-verify from the mirror, parsing, and parse + chunk.

Speed, not correctness: each prints a small table and returns its numbers for ``rag bench``.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from rag import paths
from rag.corpus.ingest import IngestSettings, ingest
from rag.corpus.manifest import Paper, load_manifest
from rag.corpus.parse import ParseSettings, load_parsed, parse_pdf
from rag.errors import ConfigError, DownloadError, ParseError

logger = logging.getLogger(__name__)


def bench_fetch(
    papers: Sequence[Paper] | None = None, mirror: Path | None = None
) -> dict[str, float]:
    """Fetch-and-verify throughput from a local mirror (no parsing, no network).

    Measures what ingest costs before parsing: locating, checking the PDF trailer, hashing and
    comparing with the manifest for every paper. Returns the row and prints it.
    """
    papers = list(papers) if papers is not None else load_manifest()
    mirror = mirror if mirror is not None else paths.default_mirror()
    if mirror is None:
        raise DownloadError(
            "bench_fetch needs a mirror folder of <arxiv_id>.pdf: set RAG_PDF_MIRROR"
        )
    with tempfile.TemporaryDirectory() as tmp:
        s = IngestSettings(pdf_dir=Path(tmp), mirror=mirror, parse=False)
        summary = ingest(papers, s)
    mb = sum(o.bytes or 0 for o in summary.outcomes) / 1e6
    secs = summary.wall_seconds
    row = {
        "papers": float(len(papers)),
        "megabytes": round(mb, 1),
        "seconds": round(secs, 3),
        "papers_per_s": round(len(papers) / secs, 1) if secs else float("inf"),
        "mb_per_s": round(mb / secs, 1) if secs else float("inf"),
        "failed": float(summary.counts["failed"]),
        "changed": float(summary.counts["changed"]),
    }
    print("ingest fetch+verify from mirror")
    for k, v in row.items():
        print(f"  {k:>13}: {v:g}")
    return row


def _bench_one(args: tuple[Path, ParseSettings]) -> tuple[int, int, bool]:
    path, settings = args
    try:
        p = parse_pdf(path, settings)
    except ParseError as e:
        logger.warning("bench: %s failed: %s", path.name, e)
        return 0, 0, False
    return p.n_pages, len(p.blocks), True


def bench_parse(
    pdf_dir: Path, ids: list[str], settings: ParseSettings | None = None, workers: int = 1
) -> dict:
    """Time parsing of ``<pdf_dir>/<id>.pdf`` without the cache: pages, wall and CPU s, pages/s.

    ``workers`` > 1 parses papers in that many processes (PyMuPDF is single-threaded per
    document). Prints a one-row table and returns the numbers.
    """
    settings = settings or ParseSettings()
    jobs = [(Path(pdf_dir) / f"{pid}.pdf", settings) for pid in ids]
    t0, c0 = time.perf_counter(), time.process_time()
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_bench_one, jobs, chunksize=4))
    else:
        results = [_bench_one(j) for j in tqdm(jobs, desc="parse", unit="pdf", leave=False)]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    pages = sum(r[0] for r in results)
    res = {
        "papers": len(ids),
        "failed": sum(not r[2] for r in results),
        "pages": pages,
        "blocks": sum(r[1] for r in results),
        "workers": workers,
        "wall_s": round(wall, 3),
        "pages_per_s": round(pages / wall, 1) if wall > 0 else float("nan"),
        # CPU seconds of this process: the machine-independent cost when workers == 1.
        "cpu_s": round(cpu, 3) if workers == 1 else None,
    }
    print(f"{'stage':<8}{'papers':>8}{'pages':>8}{'workers':>9}{'wall s':>10}{'pages/s':>10}")
    print(
        f"{'parse':<8}{res['papers']:>8}{res['pages']:>8}{workers:>9}"
        f"{res['wall_s']:>10.2f}{res['pages_per_s']:>10.1f}"
    )
    return res


def bench_corpus(workers: int = 2) -> dict[str, Any]:
    """Parse (no cache) and chunk (three strategies, no cache) the pinned corpus from the mirror."""
    from rag.bench.chunk import bench_chunk

    mirror = paths.default_mirror()
    if mirror is None:
        raise ConfigError("no PDF mirror: set RAG_PDF_MIRROR to a folder of <arxiv_id>.pdf")
    papers = load_manifest()
    ids = [p.arxiv_id for p in papers]
    t0 = time.perf_counter()
    parsed_bench = bench_parse(mirror, ids, workers=workers)
    parsed = [load_parsed(mirror / p.filename, p.sha256, ParseSettings()) for p in papers]
    chunk_bench = bench_chunk(parsed, [{"strategy": "fixed"}])
    total = parsed_bench["wall_s"] + chunk_bench["rows"][0]["wall_s"]
    print(
        f"parse + chunk (fixed) of {len(ids)} papers: {total:.1f} s (target < 60 s); "
        f"wall incl. cache reads {time.perf_counter() - t0:.1f} s"
    )
    return {"parse": parsed_bench, "chunk": chunk_bench, "parse_plus_chunk_s": round(total, 2)}
