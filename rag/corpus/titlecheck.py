"""Is a PDF the pinned paper? Its page 1 must carry the manifest's title.

A PDF whose sha256 differs from the manifest is accepted as a regenerated copy only when its pages
and size fit (:func:`rag.corpus.fetch.manifest_mismatch`) *and* the manifest's title is found at
the head of page 1: another paper of about the same length and size does not pass the second test.

The score is rapidfuzz's ``partial_ratio`` (0-100: the best-matching window of the page for the
title) between the normalised title and the first ``len(title) +`` :data:`HEAD_CHARS` characters
of page 1's normalised text (lower case, letters and digits, line-end hyphens joined). Restricting
the search to the head keeps a title cited in another paper's abstract from matching. The
threshold :data:`TITLE_THRESHOLD` lies between the lowest score of the corpus papers' own titles
and the highest score of any other corpus paper's title; ``python -m rag.corpus.title_scores``
measures both over the pinned corpus and writes ``outputs/bench/title_check.json``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from rapidfuzz import fuzz

from rag.corpus.manifest import Paper
from rag.errors import WrongPaperError
from rag.paths import display

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
