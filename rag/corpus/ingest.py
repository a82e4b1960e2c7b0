"""Ingest the pinned corpus: for each paper, cache → mirror → arXiv, then parse; report everything.

Each paper is fetched and verified by :func:`rag.corpus.fetch.fetch_paper` (cache, then the local
mirror ``$RAG_PDF_MIRROR``, default ``../shared/corpus/pdfs``, then a polite download; sha256
against the manifest, a changed PDF flagged and kept, another paper's file refused by name), then
parsed. A changed PDF is used for parsing when ``use_changed`` is true (the default: the text is
the same submission) and listed in the summary either way, so no change is silently accepted. A
PDF that will not download or parse is recorded with its own reason (mirror file truncated or not
a PDF, network unreachable, HTTP status, parse status) and skipped; every requested paper appears
in the summary (:mod:`rag.corpus.ingest_summary`) exactly once.

Concurrent ingests into one PDF folder are safe: each paper's fetch + parse holds a per-paper lock
(:mod:`rag.corpus.lock`), since the temp name ``.<id>.pdf.part`` is per paper (which is what makes
a re-run after a kill overwrite, not accumulate, a half-written file), and a parse is cached only
from a file whose sha256 is checked right before and after parsing.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm.auto import tqdm

from rag.corpus.arxiv_client import ArxivClient, ArxivUnreachable, ClientSettings
from rag.corpus.fetch import fetch_paper
from rag.corpus.ingest_summary import IngestSummary, PaperOutcome
from rag.corpus.lock import file_lock, lock_path
from rag.corpus.manifest import Paper, load_manifest, write_manifest
from rag.errors import ConfigError, DownloadError, RagError
from rag.paths import cache_dir, default_mirror, display

if TYPE_CHECKING:
    import requests

    from rag.corpus.parse import ParseSettings
    from rag.types import ParsedPaper

log = logging.getLogger(__name__)

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


def _default_parse_fn(parse_settings: ParseSettings | None) -> ParseFn:
    """``rag.corpus.parse.load_parsed`` (verifying) with the given or default parse settings."""
    from rag.corpus.parse import ParseSettings, load_parsed

    ps = parse_settings if parse_settings is not None else ParseSettings()
    return lambda path, sha: load_parsed(path, sha, ps, verify=True)


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
                out, path = fetch_paper(
                    paper, client, pdf_dir, settings.mirror, unreachable,
                    use_changed=settings.use_changed,
                )  # fmt: skip
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
