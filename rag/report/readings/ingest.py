"""Readings of notebook 01 (ingest): what arrived, what the parser kept, what evidence it found."""

from __future__ import annotations

from typing import Any

from rag.evaluation.stats import CI
from rag.report.readings.common import interval, join, md


def ingest_counts(papers: dict[str, int], pages: int) -> Any:
    """How many requested papers were parsed, failed, or changed against the pin."""
    complete = papers["parsed"] == papers["requested"]
    text = (
        f"**Reading.** {papers['parsed']} of {papers['requested']} requested papers were parsed "
        f"({pages:,} pages): {papers['failed']} failed to download, "
        f"{papers['parse_failed']} failed "
        f"to parse and {papers['changed']} arrived with a sha256 different from the pin. "
    )
    text += (
        "The corpus is complete and byte-identical to the pin."
        if complete and not papers["changed"]
        else "The corpus is **not** complete or not identical to the pin: the rows above say why."
    )
    return md(text)


def block_kinds(by_kind: Any) -> Any:
    """Which block kind carries most parsed characters, and which kinds stay out of chunks."""
    share = by_kind["share_of_chars"].to_dict()
    top = max(share, key=share.get)
    excluded = [k for k in ("references", "header_footer") if k in share]
    text = (
        f"**Reading.** `{top}` blocks carry {share[top]:.0%} of the parsed characters"
        + (
            "; " + join([f"`{k}` {share[k]:.1%}" for k in excluded]) + " are kept out of chunks"
            if excluded
            else ""
        )
        + f". {len(by_kind)} block kinds in all; a paper with few body characters per page would "
        "point to an image-only or badly parsed PDF."
    )
    return md(text)


def parse_quality(evidence_found: dict[str, Any], found_all: dict[str, Any], target: float) -> Any:
    """The share of evidence passages found in the parsed text, overall and by source."""
    parts = [
        f"{src} {v['found']}/{v['n']} = " + interval(CI.from_dict(v, "found_rate"))
        for src, v in evidence_found.items()
    ]
    if not found_all:
        return md("**Reading.** No evidence passage falls on the selected papers.")
    rate, n = found_all["found_rate"], found_all["n"]
    verdict = "meets" if rate >= target else "misses"
    text = (
        f"**Reading.** Of {n} evidence passages on these papers, {found_all['found']} were "
        "found in "
        f"the parsed text: **{rate:.3f}** overall, which {verdict} the {target:g} target. By "
        f"source: {join(parts)}. {n - found_all['found']} miss(es) are listed below with their "
        "best similarity. The found rate is the ceiling for everything downstream."
    )
    if found_all.get("on_page_rate") is not None:
        text += f" Gold quotes found on their annotated page: {found_all['on_page_rate']:.3f}."
    return md(text)


def answer_ingest(papers: dict[str, int], pages: int, found_all: dict[str, Any]) -> str:
    """The index page's one sentence for notebook 01."""
    rate = found_all.get("found_rate")
    return (
        f"{papers['parsed']}/{papers['requested']} pinned papers arrived and parsed ({pages:,} "
        f"pages, {papers['changed']} changed); the parser recovers "
        + (
            f"{rate:.3f} of {found_all['n']} human and gold evidence passages."
            if rate is not None
            else "no evidence passages (none on these papers)."
        )
    )
