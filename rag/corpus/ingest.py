"""Ingest the pinned corpus: for each paper, cache → mirror → arXiv, then parse; report everything.

Order per paper: a PDF already in the cache folder (only complete, verified files ever get there,
see :mod:`rag.corpus.arxiv_client`) is reused without a request; else a PDF in the local mirror
(``$RAG_PDF_MIRROR``, default ``../shared/corpus/pdfs``) is used in place; else the versioned PDF
is downloaded politely. The sha256 is compared with the manifest: a mismatch (arXiv occasionally
regenerates PDFs) is reported as ``changed`` and the file is kept; it is used for parsing when
``use_changed`` is true (the default — the text is the same submission) and listed in the summary
either way, so no change is silently accepted. A changed PDF whose page count or size contradicts
the manifest beyond :data:`PAGES_TOLERANCE` / :data:`BYTES_TOLERANCE`, or whose page 1 does not
carry the manifest's title (:mod:`rag.corpus.titlecheck`), is not a regenerated copy of the pinned
paper but another file: it is refused by name, never parsed or indexed. A PDF that
will not download or parse is recorded with its own reason (mirror file truncated or not a PDF,
network unreachable, HTTP status, parse status) and skipped; every requested paper appears in the
summary exactly once.

Concurrent ingests into one PDF folder are safe: each paper's fetch + parse holds a per-paper lock
(:mod:`rag.corpus.lock`), since the temp name ``.<id>.pdf.part`` is per paper (which is what makes
a re-run after a kill overwrite, not accumulate, a half-written file), and a parse is cached only
from a file whose sha256 is checked right before and after parsing.

Why this module is long: one resumable loop (cache, mirror, network, verify, parse) and the summary
whose fields are that loop's states, plus its command line; the loop reads best whole.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm.auto import tqdm

from rag.corpus.arxiv_client import (
    ArxivClient,
    ArxivUnreachable,
    ClientSettings,
    pdf_problem,
    unreachable_hint,
)
from rag.corpus.lock import file_lock, lock_path
from rag.corpus.manifest import Paper, load_manifest, write_manifest
from rag.corpus.pdf_check import sha256_file_cached
from rag.corpus.titlecheck import check_title
from rag.errors import ConfigError, DownloadError, RagError, WrongPaperError
from rag.paths import cache_dir, default_mirror, display

if TYPE_CHECKING:
    import pandas as pd
    import requests

    from rag.corpus.parse import ParseSettings
    from rag.types import ParsedPaper

log = logging.getLogger(__name__)

#: Bumped when the summary's JSON layout changes.
SUMMARY_FORMAT = 2
#: A changed PDF may differ from the manifest by this many pages (a regenerated PDF reflows a
#: little) ...
PAGES_TOLERANCE = 1
#: ... and by this fraction of the manifest's byte size (other fonts and compression); beyond
#: either it is refused as another file.
BYTES_TOLERANCE = 0.25

Source = Literal["cache", "mirror", "network"]
Status = Literal["downloaded", "cached", "mirror", "changed", "failed", "parse_failed"]
ParseFn = Callable[[Path, str], "ParsedPaper"]


class IngestSettings(BaseModel):
    """Where PDFs come from and go, and what to do with a changed checksum."""

    model_config = ConfigDict(extra="forbid")

    pdf_dir: Path | None = Field(
        None, description="folder of fetched PDFs; None means cache_dir('pdfs')"
    )
    mirror: Path | None = Field(
        default_factory=default_mirror,
        description="folder of <arxiv_id>.pdf consulted before the network; None disables",
    )
    use_changed: bool = Field(
        True, description="parse a PDF whose sha256 differs from the manifest (it is flagged)"
    )
    parse: bool = Field(True, description="parse each fetched PDF (False: fetch only)")
    summary_path: Path | None = Field(None, description="write the run summary JSON here")
    client: ClientSettings = Field(default_factory=ClientSettings, description="arXiv access")

    def resolved_pdf_dir(self) -> Path:
        """The PDF folder, created on demand."""
        d = self.pdf_dir if self.pdf_dir is not None else cache_dir("pdfs")
        d.mkdir(parents=True, exist_ok=True)
        return d


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
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.part")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, p)
        return p


def _default_parse_fn(parse_settings: ParseSettings | None) -> ParseFn:
    """``rag.corpus.parse.load_parsed`` (verifying) with the given or default parse settings."""
    from rag.corpus.parse import ParseSettings, load_parsed

    ps = parse_settings if parse_settings is not None else ParseSettings()
    return lambda path, sha: load_parsed(path, sha, ps, verify=True)


def _page_count(path: Path) -> int | None:
    import pymupdf

    try:
        with pymupdf.open(path) as doc:
            return doc.page_count
    except Exception:  # noqa: BLE001 - a PDF MuPDF cannot open has no page count to compare
        return None


def manifest_mismatch(paper: Paper, path: Path, size: int) -> str | None:
    """Why a changed PDF is not the pinned paper (pages or size beyond tolerance), or None.

    A regenerated arXiv PDF keeps its pages (within :data:`PAGES_TOLERANCE`) and roughly its size
    (within :data:`BYTES_TOLERANCE`); another paper saved under this name does not.
    """
    problems = []
    if paper.bytes:
        rel = (size - paper.bytes) / paper.bytes
        if abs(rel) > BYTES_TOLERANCE:
            problems.append(
                f"{size:,} bytes vs the manifest's {paper.bytes:,} ({rel:+.0%}; tolerance "
                f"±{BYTES_TOLERANCE:.0%})"
            )
    if paper.pages:
        pages = _page_count(path)
        if pages is not None and abs(pages - paper.pages) > PAGES_TOLERANCE:
            problems.append(
                f"{pages} pages vs the manifest's {paper.pages} (tolerance ±{PAGES_TOLERANCE})"
            )
    if not problems:
        return None
    return (
        f"refused: sha256 differs and {'; '.join(problems)}: not a regenerated copy of "
        f"{paper.versioned_id}; replace {display(path)} with the pinned PDF"
    )


def _check_changed(paper: Paper, out: PaperOutcome, path: Path) -> None:
    """Flag a changed PDF; refuse it (status failed, not used) when it contradicts the manifest:
    pages or size beyond tolerance, or a page 1 without the manifest's title (another paper)."""
    if not out.changed:
        return
    why = manifest_mismatch(paper, path, out.bytes or path.stat().st_size)
    if why is None:
        try:
            check_title(paper, path)
        except WrongPaperError as e:
            why = f"refused: sha256 differs and the file is another paper: {e}"
    if why is None:
        out.reason = (
            "sha256 differs from the manifest (pages, size and page-1 title agree: regenerated "
            "PDF?)"
        )
        return
    log.error("%s: %s", paper.arxiv_id, why)
    out.status, out.refused, out.used, out.reason = "failed", True, False, why


def _from_disk(
    paper: Paper, path: Path, source: Source, settings: IngestSettings, notes: list[str]
) -> PaperOutcome | None:
    """An outcome for a usable local PDF, or None when there is none at ``path``.

    A file that is there but unusable adds its problem to ``notes`` (for the paper's reason).
    """
    if not path.is_file():
        return None
    problem = pdf_problem(path)
    if problem is not None:
        log.warning("%s: %s is %s; ignoring it", paper.arxiv_id, display(path), problem)
        notes.append(f"{source} file {display(path)} is {problem}")
        if source == "cache":
            # Only verified files are moved into the cache, so this one was put there by hand.
            path.unlink()
        return None
    sha = sha256_file_cached(path)
    changed = paper.sha256 is not None and sha != paper.sha256
    out = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="changed" if changed else ("cached" if source == "cache" else "mirror"),
        source=source,
        path=display(path),
        expected_sha256=paper.sha256,
        sha256=sha,
        bytes=path.stat().st_size,
        changed=changed,
        used=settings.use_changed or not changed,
    )
    _check_changed(paper, out, path)
    return out


def _fetch(
    paper: Paper,
    settings: IngestSettings,
    client: ArxivClient,
    pdf_dir: Path,
    unreachable: list[tuple[str, ArxivUnreachable]],
) -> tuple[PaperOutcome, Path | None]:
    """Cache → mirror → network for one paper."""
    notes: list[str] = []
    cached = pdf_dir / paper.filename
    out = _from_disk(paper, cached, "cache", settings, notes)
    if out is not None:
        return out, (None if out.refused else cached)
    if settings.mirror is not None:
        mirrored = settings.mirror / paper.filename
        out = _from_disk(paper, mirrored, "mirror", settings, notes)
        if out is not None:
            return (out, mirrored) if not out.refused else (out, None)
    base = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="failed",
        expected_sha256=paper.sha256,
    )

    def because(reason: str) -> str:
        return "; ".join([*notes, reason])

    if unreachable:
        # One unreachable arXiv is enough: do not spend every paper's attempts on it. The reason
        # names this paper's own URL and says it was not tried, and why.
        first_id, _ = unreachable[0]
        base.reason = because(
            f"not tried (arXiv was unreachable for {first_id}): "
            + unreachable_hint(client.pdf_url(paper))
        )
        return base, None
    before = client.requests_sent
    try:
        got = client.download(paper, cached)
    except ArxivUnreachable as e:
        unreachable.append((paper.arxiv_id, e))
        base.reason = because(f"network unreachable: {e}")
        base.attempts = client.requests_sent - before
        return base, None
    except DownloadError as e:
        log.error("%s: download failed: %s", paper.arxiv_id, e)
        base.reason = because(str(e))
        base.attempts = client.requests_sent - before
        return base, None
    changed = paper.sha256 is not None and got.sha256 != paper.sha256
    if changed:
        log.warning(
            "%s: sha256 %s differs from the manifest's %s (arXiv regenerated the PDF?)",
            paper.arxiv_id,
            got.sha256[:12],
            (paper.sha256 or "")[:12],
        )
    out = PaperOutcome(
        arxiv_id=paper.arxiv_id,
        version=paper.version,
        status="changed" if changed else "downloaded",
        source="network",
        path=display(got.path),
        expected_sha256=paper.sha256,
        sha256=got.sha256,
        bytes=got.bytes,
        changed=changed,
        used=settings.use_changed or not changed,
        attempts=got.attempts,
    )
    _check_changed(paper, out, got.path)
    return out, (None if out.refused else got.path)


def _parse(out: PaperOutcome, path: Path, parse_fn: ParseFn) -> ParsedPaper | None:
    """Parse one PDF; a failure is recorded on ``out`` and never raised."""
    t0 = time.perf_counter()
    try:
        parsed = parse_fn(path, out.sha256 or "")
    except Exception as e:  # a hostile PDF must not stop the batch; the reason is kept
        log.error("%s: parse raised %s: %s", out.arxiv_id, type(e).__name__, e)
        out.parse_status = "error"
        out.parse_error = f"{type(e).__name__}: {e}"
        out.status = "parse_failed"
        out.parse_seconds = round(time.perf_counter() - t0, 3)
        return None
    out.parse_status = parsed.status
    out.parse_error = parsed.error
    out.pages = parsed.n_pages
    out.parse_seconds = round(parsed.parse_seconds or (time.perf_counter() - t0), 3)
    if not parsed.ok:
        log.error("%s: not parsed (%s): %s", out.arxiv_id, parsed.status, parsed.error)
        out.status = "parse_failed"
        return None
    return parsed


def ingest(
    manifest_papers: Sequence[Paper],
    settings: IngestSettings,
    *,
    session: requests.Session | None = None,
    parse_fn: ParseFn | None = None,
    parse_settings: ParseSettings | None = None,
) -> IngestSummary:
    """Fetch (cache → mirror → arXiv) and parse every paper; never stops on one bad paper.

    Args:
        manifest_papers: the pinned papers, e.g. :func:`rag.corpus.manifest.load_manifest`.
        settings: folders, mirror, arXiv client policy, whether to parse.
        session: HTTP session for arXiv (injected; tests pass one for their local server).
        parse_fn: ``(pdf_path, sha256) -> ParsedPaper``; default ``rag.corpus.parse.load_parsed``.
        parse_settings: ``rag.corpus.parse.ParseSettings`` for the default parse function.

    Raises:
        DownloadError: arXiv is unreachable and not a single paper was available locally
            (the message says how to fix it); the summary is written first.
    """
    t0 = time.perf_counter()
    if settings.mirror is not None and not settings.mirror.is_dir():
        raise ConfigError(
            f"PDF mirror folder {display(settings.mirror)} does not exist; point --mirror / "
            "$RAG_PDF_MIRROR / pdf_mirror at a folder of <arxiv_id>.pdf files, or use no mirror"
        )
    pdf_dir = settings.resolved_pdf_dir()
    if settings.parse and parse_fn is None:
        parse_fn = _default_parse_fn(parse_settings)
    unreachable: list[tuple[str, ArxivUnreachable]] = []
    outcomes: list[PaperOutcome] = []
    parsed: dict[str, ParsedPaper] = {}
    paths: dict[str, Path] = {}
    # The stamp keeps >= min_interval between the last request of a killed run and the next.
    stamp = pdf_dir / ".last-request"
    with ArxivClient(settings.client, session=session, stamp=stamp) as client:
        bar = tqdm(manifest_papers, desc="ingest", unit="paper", disable=None)
        for paper in bar:
            # Another ingest fetching or parsing this paper into this folder finishes first; this
            # one then finds its verified PDF in the cache.
            with file_lock(lock_path(pdf_dir, paper.filename)):
                out, path = _fetch(paper, settings, client, pdf_dir, unreachable)
                if path is not None:
                    paths[paper.arxiv_id] = path
                    if settings.parse and out.used and parse_fn is not None:
                        doc = _parse(out, path, parse_fn)
                        if doc is not None:
                            parsed[paper.arxiv_id] = doc
            outcomes.append(out)
            bar.set_postfix_str(f"{paper.arxiv_id}: {out.status}")
        summary = IngestSummary(
            outcomes=outcomes,
            parsed=parsed,
            pdf_paths=paths,
            requests_sent=client.requests_sent,
            wall_seconds=time.perf_counter() - t0,
        )
    c = summary.counts
    log.info(
        "ingest: %d requested, %d downloaded, %d cached, %d mirror, %d failed, %d changed, "
        "%d parse failures",
        c["requested"],
        c["downloaded"],
        c["from_cache"],
        c["from_mirror"],
        c["failed"],
        c["changed"],
        c["parse_failed"],
    )
    if settings.summary_path is not None:
        summary.write_json(settings.summary_path)
    if unreachable and not paths:
        raise DownloadError(
            f"no paper could be fetched: {unreachable[0][1]}"
            + ("" if settings.mirror else " (no mirror folder is configured)")
        )
    return summary


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m rag.corpus.ingest",
        description="Fetch (cache → mirror → arXiv) and parse the pinned corpus; or bootstrap a "
        "new manifest from an arXiv query (drifts daily: the manifest is what pins a corpus).",
    )
    ap.add_argument("--manifest", type=Path, default=None, help="default data/manifest.jsonl")
    ap.add_argument(
        "--limit", type=int, default=0, help="first N papers only (0: all, as in the notebooks)"
    )
    ap.add_argument("--mirror", type=Path, default=None, help="folder of <arxiv_id>.pdf")
    ap.add_argument("--no-mirror", action="store_true", help="never read a mirror folder")
    ap.add_argument("--no-parse", action="store_true", help="fetch only")
    ap.add_argument("--pdf-dir", type=Path, default=None, help="default .cache/pdfs")
    ap.add_argument("--summary", type=Path, default=None, help="default .cache/ingest/summary")
    ap.add_argument("--api-url", default=None, help="arXiv export API endpoint")
    ap.add_argument("--pdf-base-url", default=None, help="PDF URL prefix (<prefix>/<id><ver>)")
    ap.add_argument("--min-interval", type=float, default=None, help="seconds between requests")
    ap.add_argument("--max-attempts", type=int, default=None, help="attempts per request")
    ap.add_argument("--backoff", type=float, default=None, help="first backoff wait, seconds")
    ap.add_argument("--bootstrap", metavar="QUERY", default=None, help="e.g. 'cat:cs.IR'")
    ap.add_argument("--out", type=Path, default=None, help="bootstrap: manifest to write")
    ap.add_argument("-v", "--verbose", action="store_true")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ingest the manifest (exit 1 when a paper failed) or bootstrap a manifest."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    overrides = {
        k: v
        for k, v in {
            "api_url": args.api_url,
            "pdf_base_url": args.pdf_base_url,
            "min_interval_s": args.min_interval,
            "max_attempts": args.max_attempts,
            "backoff_initial_s": args.backoff,
        }.items()
        if v is not None
    }
    try:
        try:
            client = ClientSettings(**overrides)
        except ValidationError as e:
            raise ConfigError(f"bad arXiv client option: {e}") from e
        if args.bootstrap is not None:
            from rag.corpus.arxiv_client import bootstrap_manifest

            if args.out is None:
                raise DownloadError("--bootstrap needs --out <manifest.jsonl> to write")
            if args.limit < 0:
                raise ConfigError(f"--limit must be >= 0 (0 = 100 for bootstrap), got {args.limit}")
            papers = bootstrap_manifest(args.bootstrap, args.limit or 100, client)
            write_manifest(papers, args.out)
            print(
                f"wrote {len(papers)} papers to {args.out} (sha256 not yet observed; run ingest "
                "with this manifest, then commit it: arXiv queries drift daily)"
            )
            return 0
        if args.limit < 0:
            raise ConfigError(f"--limit must be >= 0 (0 = all papers), got {args.limit}")
        if args.mirror is not None and not args.no_mirror and not args.mirror.is_dir():
            raise ConfigError(f"--mirror {args.mirror}: no such folder")
        papers = load_manifest(args.manifest)[: args.limit or None]
        settings = IngestSettings(
            pdf_dir=args.pdf_dir,
            mirror=None if args.no_mirror else (args.mirror or default_mirror()),
            parse=not args.no_parse,
            summary_path=args.summary or cache_dir("ingest") / "summary.json",
            client=client,
        )
        summary = ingest(papers, settings)
    except RagError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for k, v in summary.counts.items():
        print(f"{k:>13}: {v}")
    for pid, reason in summary.failures.items():
        print(f"failed {pid}: {reason}")
    for pid in summary.changed:
        if pid not in summary.refused:
            print(f"changed sha256 {pid}")
    for pid, reason in summary.parse_failures.items():
        print(f"parse failure {pid}: {reason}")
    print(f"summary: {settings.summary_path}")
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
