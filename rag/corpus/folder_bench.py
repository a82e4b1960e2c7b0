"""Title extraction measured on the pinned corpus, with the arXiv stamp and the manifest ignored.

``python -m rag.corpus.folder_bench`` reads every manifest paper's PDF with
:func:`rag.corpus.pdf_meta.read_meta` (``use_stamp=False``: the id the stamp would give is not
used) twice, from the page-1 layout alone and with the PDF's own ``/Title`` preferred when page 1
carries it, and compares each extracted title with the manifest's title after
:func:`rag.corpus.titlecheck.normalise` (lower case, letters and digits). It writes the exact-match
accuracy of both, the misses, and the seconds per PDF to ``outputs/bench/folder_titles.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rag.corpus.manifest import load_manifest
from rag.corpus.pdf_meta import read_meta
from rag.corpus.titlecheck import normalise
from rag.paths import default_mirror, display, project_root


def measure(manifest: Path | None, pdf_dir: Path) -> dict[str, Any]:
    """Title exact-match accuracy (normalised) of layout-only and layout+metadata extraction."""
    papers = load_manifest(manifest)
    out: dict[str, Any] = {
        "what": "normalised exact match of the extracted title with the manifest title; the "
        "arXiv stamp and the manifest are not read",
        "pdfs": display(pdf_dir),
        "n": len(papers),
    }
    for mode, use_meta in (("layout", False), ("layout+pdf_metadata", True)):
        t0 = time.perf_counter()
        misses, sources = [], {"metadata": 0, "layout": 0, "": 0}
        for p in papers:
            m = read_meta(pdf_dir / p.filename, use_stamp=False, use_metadata=use_meta)
            sources[m.title_source] += 1
            if normalise(m.title) != normalise(p.title):
                misses.append({"arxiv_id": p.arxiv_id, "manifest": p.title, "extracted": m.title})
        secs = time.perf_counter() - t0
        out[mode] = {
            "accuracy": round(1 - len(misses) / len(papers), 4),
            "correct": len(papers) - len(misses),
            "title_source": sources,
            "seconds_per_pdf": round(secs / len(papers), 4),
            "misses": misses,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure and write ``outputs/bench/folder_titles.json``."""
    ap = argparse.ArgumentParser(prog="python -m rag.corpus.folder_bench", description=__doc__)
    ap.add_argument("--manifest", type=Path, default=None, help="default data/manifest.jsonl")
    ap.add_argument("--pdf-dir", type=Path, default=None, help="default: the PDF mirror")
    ap.add_argument(
        "--out", type=Path, default=project_root() / "outputs" / "bench" / "folder_titles.json"
    )
    args = ap.parse_args(argv)
    pdf_dir = args.pdf_dir or default_mirror()
    if pdf_dir is None:
        ap.error("no PDF mirror found; pass --pdf-dir")
    result = measure(args.manifest, pdf_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for mode in ("layout", "layout+pdf_metadata"):
        r = result[mode]
        print(f"{mode}: {r['correct']}/{result['n']} = {r['accuracy']:.2f}, misses "
              f"{[m['arxiv_id'] for m in r['misses']]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
