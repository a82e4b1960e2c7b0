"""Is a PDF the pinned paper? Its page 1 must carry the manifest's title.

A PDF whose sha256 differs from the manifest is accepted as a regenerated copy only when its pages
and size fit (:func:`rag.corpus.ingest.manifest_mismatch`) *and* the manifest's title is found at
the head of page 1: another paper of about the same length and size does not pass the second test.

The score is rapidfuzz's ``partial_ratio`` (0-100: the best-matching window of the page for the
title) between the normalised title and the first ``len(title) +`` :data:`HEAD_CHARS` characters
of page 1's normalised text (lower case, letters and digits, line-end hyphens joined). Restricting
the search to the head keeps a title cited in another paper's abstract from matching. The
threshold :data:`TITLE_THRESHOLD` lies between the lowest score of the corpus papers' own titles
and the highest score of any other corpus paper's title; ``python -m rag.corpus.titlecheck``
measures both over the pinned corpus and writes ``outputs/bench/title_check.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from rag.corpus.manifest import Paper, load_manifest
from rag.errors import WrongPaperError
from rag.paths import default_mirror, display, project_root

#: Characters of page 1 searched beyond the title's own length (the title comes first, after at
#: most a notice or an affiliation line).
HEAD_CHARS = 400
#: A page 1 scoring below this does not carry the title (see the module docstring).
TITLE_THRESHOLD = 95.0
#: Characters of page 1 quoted in a refusal.
QUOTE_CHARS = 120


def normalise(text: str) -> str:
    """Lower-case letters and digits separated by single spaces, line-end hyphens joined."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"-\s*\n\s*", "", text)
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text).split())


def first_page_text(path: Path) -> str:
    """The text of page 1 ('' for a PDF without pages or text)."""
    import pymupdf

    with pymupdf.open(path) as doc:
        return doc[0].get_text() if doc.page_count else ""


def title_score(title: str, page_text: str) -> float:
    """How well ``title`` is found at the head of ``page_text`` (0-100)."""
    t = normalise(title)
    return float(fuzz.partial_ratio(t, normalise(page_text)[: len(t) + HEAD_CHARS]))


def check_title(paper: Paper, path: Path, page_text: str | None = None) -> float:
    """The title score of ``path``'s page 1; raise when it is below :data:`TITLE_THRESHOLD`.

    Raises:
        WrongPaperError: naming the id, the manifest's title and how page 1 begins.
    """
    text = first_page_text(path) if page_text is None else page_text
    score = title_score(paper.title, text)
    if score >= TITLE_THRESHOLD:
        return score
    head = " ".join(text.split())[:QUOTE_CHARS] or "(no text)"
    raise WrongPaperError(
        f"{paper.versioned_id}: page 1 of {display(path)} does not carry the manifest's title "
        f"{paper.title!r} (match {score:.0f}/100, needs {TITLE_THRESHOLD:.0f}); page 1 reads "
        f"{head!r}; replace the file with the pinned PDF"
    )


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
    from rag.corpus.ingest import BYTES_TOLERANCE, PAGES_TOLERANCE

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


def main(argv: list[str] | None = None) -> int:
    """Measure the title scores over a manifest's PDFs and write them as JSON."""
    ap = argparse.ArgumentParser(prog="python -m rag.corpus.titlecheck", description=__doc__)
    ap.add_argument("--manifest", type=Path, default=None, help="default data/manifest.jsonl")
    ap.add_argument("--pdf-dir", type=Path, default=None, help="default: the PDF mirror")
    ap.add_argument(
        "--out", type=Path, default=project_root() / "outputs" / "bench" / "title_check.json"
    )
    args = ap.parse_args(argv)
    pdf_dir = args.pdf_dir or default_mirror()
    if pdf_dir is None:
        ap.error("no PDF mirror found; pass --pdf-dir")
    result = measure(load_manifest(args.manifest), pdf_dir)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("own_title", "swapped_pairs")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
