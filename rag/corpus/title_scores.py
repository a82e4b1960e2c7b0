"""Title scores over a corpus: how far the page-1 title check separates a paper from the others.

``python -m rag.corpus.title_scores`` scores every pinned paper's title against its own page 1 and
against every other paper's page 1 (all ordered pairs, and the look-alike pairs whose pages and
size pass the ingest's tolerances), and writes the distributions to
``outputs/bench/title_check.json``; :data:`rag.corpus.titlecheck.TITLE_THRESHOLD` is chosen
between them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rag.corpus.fetch import BYTES_TOLERANCE, PAGES_TOLERANCE
from rag.corpus.manifest import Paper, load_manifest
from rag.corpus.titlecheck import HEAD_CHARS, TITLE_THRESHOLD, first_page_text, title_score
from rag.paths import default_mirror, display, project_root


def _summary(scores: list[float]) -> dict[str, float]:
    s = sorted(scores)
    return {
        "n": len(s),
        "min": round(s[0], 1),
        "p01": round(s[len(s) // 100], 1),
        "median": round(s[len(s) // 2], 1),
        "p99": round(s[min(len(s) - 1, len(s) * 99 // 100)], 1),
        "max": round(s[-1], 1),
    }


def measure(papers: list[Paper], pdf_dir: Path) -> dict[str, Any]:
    """Title scores of every paper's own page 1 and of every other paper's page 1 (swapped), and
    of the look-alike swaps whose pages (±1) and size (±25 %) fit, as the ingest check sees them.
    """
    pages = {p.arxiv_id: first_page_text(pdf_dir / p.filename) for p in papers}
    own = {p.arxiv_id: title_score(p.title, pages[p.arxiv_id]) for p in papers}
    swapped, lookalike = [], []
    for claimed in papers:  # the manifest's paper ...
        for actual in papers:  # ... whose file is another paper's
            if actual is claimed:
                continue
            row = (title_score(claimed.title, pages[actual.arxiv_id]), claimed, actual)
            swapped.append(row)
            fits = (
                claimed.pages and actual.pages and claimed.bytes and actual.bytes
                and abs(actual.pages - claimed.pages) <= PAGES_TOLERANCE
                and abs(actual.bytes - claimed.bytes) / claimed.bytes <= BYTES_TOLERANCE
            )  # fmt: skip
            if fits:
                lookalike.append(row)

    def top(rows: list, n: int = 5) -> list[dict[str, Any]]:
        rows = sorted(rows, key=lambda r: r[0], reverse=True)[:n]
        return [{"score": round(s, 1), "title": c.title, "file_of": a.arxiv_id} for s, c, a in rows]

    lowest_own = sorted(own.items(), key=lambda kv: kv[1])[:5]
    return {
        "what": "rapidfuzz partial_ratio of the manifest title in the head of page 1 (0-100)",
        "pdfs": display(pdf_dir),
        "head_chars": HEAD_CHARS,
        "threshold": TITLE_THRESHOLD,
        "own_title": {
            **_summary(list(own.values())),
            "lowest": [{"arxiv_id": k, "score": round(v, 1)} for k, v in lowest_own],
        },
        "swapped_pairs": {**_summary([r[0] for r in swapped]), "highest": top(swapped)},
        "lookalike_pairs": {**_summary([r[0] for r in lookalike]), "highest": top(lookalike)},
        "own_below_threshold": sum(v < TITLE_THRESHOLD for v in own.values()),
        "swapped_at_or_above_threshold": sum(r[0] >= TITLE_THRESHOLD for r in swapped),
    }


def parse_pdf_args(
    ap: argparse.ArgumentParser, argv: list[str] | None, out: str
) -> tuple[argparse.Namespace, Path]:
    """Add ``--manifest``, ``--pdf-dir`` and ``--out`` (default ``outputs/bench/<out>``) to a
    measurement's parser, parse ``argv``, and find the PDFs (``--pdf-dir``, else the mirror;
    neither: a usage error)."""
    ap.add_argument("--manifest", type=Path, default=None, help="default data/manifest.jsonl")
    ap.add_argument("--pdf-dir", type=Path, default=None, help="default: the PDF mirror")
    ap.add_argument("--out", type=Path, default=project_root() / "outputs" / "bench" / out)
    args = ap.parse_args(argv)
    pdf_dir = args.pdf_dir or default_mirror()
    if pdf_dir is None:
        ap.error("no PDF mirror found; pass --pdf-dir")
    return args, pdf_dir


def main(argv: list[str] | None = None) -> int:
    """Measure the title scores over a manifest's PDFs and write them as JSON."""
    ap = argparse.ArgumentParser(prog="python -m rag.corpus.title_scores", description=__doc__)
    args, pdf_dir = parse_pdf_args(ap, argv, "title_check.json")
    result = measure(load_manifest(args.manifest), pdf_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("own_title", "swapped_pairs")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
