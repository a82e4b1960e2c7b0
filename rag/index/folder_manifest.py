"""The report over a folder: a pinned manifest and a mirror made from the folder's arXiv papers.

The report's notebooks read a corpus as a manifest of arXiv papers plus a mirror of
``<arxiv_id>.pdf`` files. ``python -m rag.index.folder_manifest DIR OUT.jsonl`` scans a folder as
:func:`rag.index.folder.build_folder` does, and for every paper whose margin stamp names it
(``arXiv:1706.03762v7 [cs.CL] 2 Aug 2023``) writes a manifest line: the id, version, category and
date of the stamp, the title read from page 1, pages, bytes and sha256. Beside the manifest it
makes ``OUT-pdfs/`` with one ``<arxiv_id>.pdf`` link per paper, and prints the profile lines that
point the report at both. A paper without a stamp is named and left out (the report keys its
papers on arXiv ids; ``rag ask --pdfs`` serves it), as is every file the folder route refuses.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag.corpus.manifest import Paper, write_manifest
from rag.index.folder import bad_row, identify, scan


def arxiv_manifest(folder: str | os.PathLike[str], out: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the manifest and the mirror of ``folder``'s stamped arXiv papers (module docstring).

    Returns:
        ``manifest``, ``mirror`` (paths), ``papers`` (ids written) and ``left_out`` (file, stage,
        reason rows).

    Raises:
        ConfigError: ``folder`` is not a folder.
    """
    root, dst = Path(folder), Path(out)
    files, left_out = scan(root)
    found, bad = identify(root, files, {})
    left_out += bad
    papers: list[Paper] = []
    links: dict[str, Path] = {}
    for p in found:
        if not (p.arxiv_id and p.arxiv_version):
            why = "no arXiv stamp on page 1: the report keys papers on arXiv ids (rag ask --pdfs)"
            left_out.append(bad_row(p.file, "manifest", why))
            continue
        try:
            paper = Paper(arxiv_id=p.arxiv_id, version=p.arxiv_version, title=p.title,
                          primary_category=p.arxiv_category, stamp_date=p.stamp_date or None,
                          pages=p.pages, bytes=p.bytes, sha256=p.sha256)  # fmt: skip
        except ValidationError as e:
            left_out.append(bad_row(p.file, "manifest", f"stamp or title not usable: {e}"))
            continue
        papers.append(paper)
        links[paper.filename] = (root / p.file).resolve()
    write_manifest(papers, dst)
    mirror = dst.with_name(f"{dst.stem}-pdfs")
    shutil.rmtree(mirror, ignore_errors=True)
    mirror.mkdir(parents=True)
    for name, target in links.items():
        os.symlink(target, mirror / name)
    return {
        "manifest": str(dst),
        "mirror": str(mirror),
        "papers": [p.arxiv_id for p in papers],
        "left_out": sorted(left_out, key=lambda r: r["file"]),
    }


def main(argv: list[str] | None = None) -> int:
    """Write the manifest and mirror, name what was left out, print the profile lines."""
    ap = argparse.ArgumentParser(prog="python -m rag.index.folder_manifest", description=__doc__)
    ap.add_argument("folder", help="a folder of PDFs")
    ap.add_argument("out", help="the manifest to write, e.g. data/my_manifest.jsonl")
    args = ap.parse_args(argv)
    r = arxiv_manifest(args.folder, args.out)
    for row in r["left_out"]:
        print(f"left out: {row['file']} ({row['stage']}): {row['reason']}", file=sys.stderr)
    print(f"{len(r['papers'])} papers in {r['manifest']}; their PDFs linked in {r['mirror']}")
    print("profile (params/<name>.yaml):")
    print(f'all:\n  manifest_path: "{r["manifest"]}"\n  pdf_mirror: "{r["mirror"]}"')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
