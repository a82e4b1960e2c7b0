"""Run ``rag`` with an ingest's commit held at one point, so a test's SIGKILL lands exactly there.

``python -m tests.serve_pause <point> <marker> <rag arguments...>``. When a paper is being added
(the manifest about to list one paper more than the served snapshot):

- ``before-manifest``: the segment is renamed into place, the manifest is not yet written;
- ``after-manifest``: the manifest is replaced (the commit point), the snapshot not yet swapped.

There the marker file is written (its text: the point) and the ingest thread blocks for good.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from rag.serve.index import ServedIndex

POINTS = ("before-manifest", "after-manifest")


def main(argv: list[str]) -> int:
    point, marker, *rest = argv
    if point not in POINTS:
        raise SystemExit(f"point must be one of {POINTS}, got {point!r}")
    write_manifest = ServedIndex._write_manifest

    def held(self: ServedIndex, papers) -> None:
        snapshot = getattr(self, "snapshot", None)
        if snapshot is None or len(papers) <= len(snapshot.papers):  # startup, not an add
            write_manifest(self, papers)
            return
        if point == "after-manifest":
            write_manifest(self, papers)
        Path(marker).write_text(point)
        threading.Event().wait()

    ServedIndex._write_manifest = held  # type: ignore[method-assign]
    from rag.cli import main as rag_main

    return rag_main(rest)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
