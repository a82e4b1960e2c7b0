"""refextract against this package's splitter, on the same reference text of the same papers.

refextract (INSPIRE-HEP's reference extractor, https://github.com/inspirehep/refextract) is the
maintained parser on PyPI. It is not a dependency of the project: its dependency inspire-utils
requires ``python-dateutil<3`` and the project's environment has 4.x, and its PDF entry point
needs poppler's ``pdftotext`` binary. So this comparison runs in a separate environment and
reads the project's cached parses (same PyMuPDF, same parse cache key), e.g.::

    python -m venv .venv-refx && .venv-refx/bin/pip install refextract==1.1.7 pymupdf==<project's> \
        pydantic rapidfuzz
    PYTHONPATH=. .venv-refx/bin/python -m rag.bench.refextract_compare

Both splitters get each paper's ``references`` blocks, refextract as one line per block through
``extract_references_from_string(..., is_only_references=True)``. Compared: (1) entries found
against the largest ``[N]`` on numbered lists; (2) the (paper, arXiv id) pairs each recovers,
against their union; (3) entry counts on every paper, and time. Writes
``outputs/bench/citations_refextract.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import time
from pathlib import Path

from rag import paths
from rag.corpus.manifest import load_manifest
from rag.corpus.parse import ParseSettings, load_parsed
from rag.errors import ConfigError
from rag.papers.ids import arxiv_ids, normalise_arxiv_id
from rag.papers.references import numbered_count, reference_blocks, split_references

log = logging.getLogger(__name__)


def _refextract(text: str) -> list[dict]:
    """refextract's references for ``text``, cached by the text's sha256 and refextract's version
    (it takes seconds per paper, and its input does not change when this package's splitter
    does)."""
    key = hashlib.sha256(f"{_version()}|{text}".encode()).hexdigest()[:24]
    path = paths.cache_dir("refextract") / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text())
    try:
        from refextract import extract_references_from_string
    except ImportError as e:
        raise ConfigError(
            "refextract is not installed here; run this module in a separate environment "
            "(see the module docstring)"
        ) from e
    refs = extract_references_from_string(text, is_only_references=True)
    path.write_text(json.dumps(refs))
    return refs


def _rx_ids(ref: dict) -> list[str]:
    found = []
    for field in ("reportnumber", "arxiv"):
        for v in ref.get(field, []):
            aid = normalise_arxiv_id(re.sub(r"(?i)^arxiv:", "", v))
            if aid and aid not in found:
                found.append(aid)
    return found


def compare(manifest_path: str = "data/manifest.jsonl") -> dict:
    """Run both splitters on every paper of the manifest; see the module docstring."""
    mirror = paths.default_mirror()
    if mirror is None:
        raise ConfigError("no PDF mirror: set RAG_PDF_MIRROR to a folder of <arxiv_id>.pdf")
    rows = []
    t_own = t_rx = 0.0
    for paper in load_manifest(paths.resolve(manifest_path)):
        pp = load_parsed(Path(mirror) / paper.filename, paper.sha256 or "", ParseSettings())
        blocks = reference_blocks(pp)
        if not blocks:
            continue
        t = time.perf_counter()
        own = split_references(blocks)
        t_own += time.perf_counter() - t
        t = time.perf_counter()
        rx = [r for r in _refextract("\n".join(b.text for b in blocks)) if r.get("raw_ref")]
        t_rx += time.perf_counter() - t
        own_ids = {a for r in own for a in arxiv_ids(r.text) if a != paper.arxiv_id}
        rx_ids = {a for r in rx for a in _rx_ids(r) if a != paper.arxiv_id}
        log.info("%s: own %d entries, refextract %d", paper.arxiv_id, len(own), len(rx))
        rows.append(
            {
                "paper": paper.arxiv_id,
                "true": numbered_count(blocks),
                "own": len(own),
                "refextract": len(rx),
                "own_ids": sorted(own_ids),
                "refextract_ids": sorted(rx_ids),
            }
        )
    numbered = [r for r in rows if r["true"]]
    union = sum(len(set(r["own_ids"]) | set(r["refextract_ids"])) for r in rows)

    def split_stats(key: str) -> dict:
        found = sum(r[key] for r in numbered)
        true = sum(r["true"] for r in numbered)
        return {
            "found": found,
            "true": true,
            "ratio": found / true if true else None,
            "exact_papers": sum(r[key] == r["true"] for r in numbered),
            "mean_abs_error": sum(abs(r[key] - r["true"]) for r in numbered) / len(numbered)
            if numbered
            else None,
        }

    return {
        "papers": len(rows),
        "numbered_papers": len(numbered),
        "splitting_numbered": {"own": split_stats("own"), "refextract": split_stats("refextract")},
        "arxiv_ids": {
            "union": union,
            "own": sum(len(r["own_ids"]) for r in rows),
            "refextract": sum(len(r["refextract_ids"]) for r in rows),
            "only_own": sum(len(set(r["own_ids"]) - set(r["refextract_ids"])) for r in rows),
            "only_refextract": sum(len(set(r["refextract_ids"]) - set(r["own_ids"])) for r in rows),
        },
        "entries_all_papers": {
            "own": sum(r["own"] for r in rows),
            "refextract": sum(r["refextract"] for r in rows),
        },
        "seconds": {"own": round(t_own, 2), "refextract": round(t_rx, 2)},
        "per_paper": [{k: v for k, v in r.items() if not k.endswith("_ids")} for r in rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", default="data/manifest.jsonl")
    ap.add_argument("--out", default="outputs/bench/citations_refextract.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    result = {"refextract_version": _version(), **compare(args.manifest)}
    out = paths.resolve(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {paths.display(out)}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("refextract")
    except PackageNotFoundError as e:
        raise ConfigError(
            "refextract is not installed here; run this module in a separate environment "
            "(see the module docstring)"
        ) from e


if __name__ == "__main__":
    main()
