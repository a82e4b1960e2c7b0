"""The corpus a run works on: a selection of the pinned manifest, fetched and parsed.

Every notebook selects papers the same way (``paper_ids`` or the first ``max_papers`` of the
manifest), so a profile's corpus is one definition shared by all stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rag import paths
from rag.corpus.ingest import IngestSettings, IngestSummary, ingest
from rag.corpus.manifest import Paper, load_manifest
from rag.corpus.parse import ParseSettings
from rag.errors import ConfigError
from rag.types import ParsedPaper


def select_papers(
    manifest_path: str = "data/manifest.jsonl",
    paper_ids: Sequence[str] = (),
    max_papers: int = 0,
) -> list[Paper]:
    """Papers of the manifest to use, in manifest order.

    Args:
        manifest_path: the pinned manifest, relative to the project root.
        paper_ids: explicit arXiv ids (without version); empty selects by ``max_papers``.
        max_papers: the first N papers of the manifest; 0 means all.

    Raises:
        ConfigError: an id that the manifest does not pin, or a negative ``max_papers``.
    """
    if max_papers < 0:
        raise ConfigError(f"max_papers must be >= 0 (0 = all), got {max_papers}")
    papers = load_manifest(paths.resolve(manifest_path))
    if paper_ids:
        known = {p.arxiv_id for p in papers}
        unknown = [i for i in paper_ids if i not in known]
        if unknown:
            raise ConfigError(
                f"paper_ids {unknown} are not pinned in {manifest_path}; add them to the manifest "
                "(python -m rag.corpus.ingest --bootstrap ...) or fix the ids"
            )
        wanted = set(paper_ids)
        papers = [p for p in papers if p.arxiv_id in wanted]
    if max_papers:
        papers = papers[:max_papers]
    return papers


def load_corpus(
    papers: Sequence[Paper],
    *,
    pdf_mirror: str = "",
    parse_settings: ParseSettings | None = None,
    summary_path: str | Path | None = None,
) -> IngestSummary:
    """Fetch (cache → mirror → arXiv) and parse ``papers``; parsed papers are cached on disk.

    Args:
        papers: from :func:`select_papers`.
        pdf_mirror: a folder of ``<arxiv_id>.pdf``; "" uses ``$RAG_PDF_MIRROR`` or ``../shared``.
        parse_settings: a :class:`rag.corpus.parse.ParseSettings` (default settings when None).
        summary_path: where to write the ingest summary JSON (optional).
    """
    settings = IngestSettings(
        summary_path=Path(summary_path) if summary_path else None,
        **({"mirror": paths.resolve(pdf_mirror)} if pdf_mirror else {}),
    )
    return ingest(list(papers), settings, parse_settings=parse_settings)


def parsed_papers(summary: IngestSummary, papers: Sequence[Paper]) -> list[ParsedPaper]:
    """The parsed papers of ``papers`` in manifest order (papers that failed to fetch are absent:
    the ingest summary lists them)."""
    return [summary.parsed[p.arxiv_id] for p in papers if p.arxiv_id in summary.parsed]


def corpus_papers(
    manifest_path: str = "data/manifest.jsonl",
    paper_ids: Sequence[str] = (),
    max_papers: int = 0,
    *,
    pdf_mirror: str = "",
) -> tuple[list[Paper], list[ParsedPaper]]:
    """Select, fetch and parse a profile's corpus: ``(papers, parsed papers)``, as 02-05 need it."""
    papers = select_papers(manifest_path, paper_ids, max_papers)
    return papers, parsed_papers(load_corpus(papers, pdf_mirror=pdf_mirror), papers)
