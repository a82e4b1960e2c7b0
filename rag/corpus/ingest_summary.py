"""One ingest run's record: what happened to each requested paper, and the run's JSON summary.

Every requested paper gets exactly one :class:`PaperOutcome`, whose ``status`` and ``source`` are
the states of the fetch loop (:mod:`rag.corpus.fetch`) and the parse that follows it
(:mod:`rag.corpus.ingest`); :class:`IngestSummary` counts them, lists failures, changed and refused
PDFs by paper, and writes itself as JSON (``SUMMARY_FORMAT`` names the layout).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rag.atomic import write_atomic

if TYPE_CHECKING:
    import pandas as pd

    from rag.types import ParsedPaper

#: Bumped when the summary's JSON layout changes.
SUMMARY_FORMAT = 2

Source = Literal["cache", "mirror", "network"]
Status = Literal["downloaded", "cached", "mirror", "changed", "failed", "parse_failed"]


@dataclass(slots=True)
class PaperOutcome:
    """What happened to one requested paper."""

    arxiv_id: str
    version: str
    status: Status
    source: Source | None = None
    path: str | None = None
    expected_sha256: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    changed: bool = False
    refused: bool = False
    used: bool = False
    attempts: int = 0
    reason: str | None = None
    parse_status: str | None = None
    parse_error: str | None = None
    pages: int | None = None
    parse_seconds: float | None = None


@dataclass
class IngestSummary:
    """The run summary: one outcome per requested paper, in manifest order."""

    outcomes: list[PaperOutcome]
    parsed: dict[str, ParsedPaper] = field(default_factory=dict, repr=False)
    pdf_paths: dict[str, Path] = field(default_factory=dict, repr=False)
    requests_sent: int = 0
    wall_seconds: float = 0.0

    @property
    def counts(self) -> dict[str, int]:
        """Requested / per-source / failed / changed / parse failures / parsed, plus pages."""
        by_source = Counter(o.source for o in self.outcomes if o.source)
        return {
            "requested": len(self.outcomes),
            "downloaded": by_source["network"],
            "from_cache": by_source["cache"],
            "from_mirror": by_source["mirror"],
            "failed": sum(o.status == "failed" for o in self.outcomes),
            "changed": sum(o.changed for o in self.outcomes),
            "parse_failed": sum(o.parse_status not in (None, "ok") for o in self.outcomes),
            "parsed": sum(o.parse_status == "ok" for o in self.outcomes),
            "pages": sum(o.pages or 0 for o in self.outcomes if o.parse_status == "ok"),
        }

    @property
    def failures(self) -> dict[str, str]:
        """Papers that could not be fetched, with the reason."""
        return {o.arxiv_id: o.reason or "" for o in self.outcomes if o.status == "failed"}

    @property
    def changed(self) -> list[str]:
        """Papers whose sha256 differs from the manifest."""
        return [o.arxiv_id for o in self.outcomes if o.changed]

    @property
    def refused(self) -> dict[str, str]:
        """Changed PDFs refused because their pages or size contradict the manifest, with why."""
        return {o.arxiv_id: o.reason or "" for o in self.outcomes if o.refused}

    @property
    def parse_failures(self) -> dict[str, str]:
        """Papers fetched but not parsed, with the parser's status and error."""
        return {
            o.arxiv_id: f"{o.parse_status}: {o.parse_error}"
            for o in self.outcomes
            if o.parse_status not in (None, "ok")
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (parsed blocks excluded)."""
        return {
            "format": SUMMARY_FORMAT,
            "counts": self.counts,
            "failures": self.failures,
            "changed": self.changed,
            "refused": self.refused,
            "parse_failures": self.parse_failures,
            "requests_sent": self.requests_sent,
            "wall_seconds": round(self.wall_seconds, 3),
            "papers": [asdict(o) for o in self.outcomes],
        }

    def table(self) -> pd.DataFrame:
        """One row per paper."""
        import pandas as pd

        return pd.DataFrame([asdict(o) for o in self.outcomes])

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_dict` atomically."""
        return write_atomic(path, json.dumps(self.to_dict(), indent=2) + "\n")
