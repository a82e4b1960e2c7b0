"""Title, authors, year, arXiv id and DOI of a PDF, read from the PDF itself.

A researcher's folder has no manifest, so a paper's metadata comes from its file:

* **Title**: the run of largest type on the upper part of page 1 (the title is set larger than
  anything else there), its lines joined; the PDF's own ``/Title`` replaces it only when the
  layout finds none or a part of it, and only when page 1 carries it (a LaTeX ``hyperref`` title
  is exact, a "Microsoft Word - draft3.docx" is not on the page and is ignored). Rotated text
  (the arXiv margin stamp) is never the title.
* **Authors**: the PDF's ``/Author`` when set, else the lines right below the title up to the
  first line that looks like an affiliation, an e-mail or the abstract.
* **arXiv id**: the margin stamp (``arXiv:1706.03762v7 [cs.CL] 2 Aug 2023``: id, version,
  category, date); **DOI**: the first
  DOI on page 1 or in the PDF's metadata; **year**: the stamp's year, else the metadata date.

:func:`read_meta` takes ``use_stamp=False`` and ``use_metadata=False`` so the title can be
measured from the layout alone (``python -m rag.bench.folder``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.corpus.manifest import ARXIV_ID_RE
from rag.corpus.pdf_lines import clean_text
from rag.types import AsDict

#: Bump when what :func:`read_meta` extracts changes: a folder's manifest re-reads its PDFs.
META_VERSION = 3
#: Fraction of page 1's height searched for the title (titles sit in the top part).
TITLE_BAND = 0.6
#: Lines within this many points of each other's size are one line when on one baseline.
SIZE_TOL = 0.6
#: Consecutive lines whose sizes differ by less than this ratio belong to one title.
SIZE_RATIO = 0.95
#: A run of large type with fewer words is a figure label or a logo unless nothing else is.
MIN_TITLE_WORDS = 3
#: Largest vertical gap between title lines, in multiples of the title's font size.
LINE_GAP = 1.6
#: Lines of type no larger than this fraction of the page's median are never a title.
MIN_TITLE_RATIO = 1.05
#: A stamp line: ``arXiv:1706.03762v7 [cs.CL] 2 Aug 2023``.
_STAMP = re.compile(
    r"arXiv:\s*(?P<id>\S+?)(?P<v>v\d+)?\s+\[(?P<cat>[^\]]+)\]\s+(?P<date>\d{1,2}\s+\w+\s+(?P<y>\d{4}))",
    re.I,
)
_NOT_AUTHOR = re.compile(
    r"@|\buniversity\b|\binstitute\b|\bdepartment\b|\blab(oratory)?\b|\babstract\b|\bgoogle\b|"
    r"\bresearch\b|\binc\b|\bcorp|\bschool\b|\bcollege\b|\bcenter\b|\bcentre\b|https?://|"
    r"technolog|\bcompany\b|\bltd\b|\bgmbh\b",
    re.I,
)
#: A DOI (Crossref's recommended pattern, as :mod:`rag.papers.ids` finds them in references).
_DOI = re.compile(r"\b(10\.\d{4,9}/[-._;()/:A-Za-z0-9]+)")
_NAME_SEP = re.compile(r",\s*|\s+and\s+|\s*&\s*|\s{2,}")
_BAD_META_TITLE = re.compile(
    r"^(untitled|microsoft word|document\d*|paper|title)\b|\.(docx?|tex|dvi|pdf)$", re.I
)


@dataclass
class PdfMeta(AsDict):
    """What a PDF says about itself; empty strings when it does not say."""

    title: str = ""
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    arxiv_id: str = ""
    arxiv_version: str = ""
    arxiv_category: str = ""
    stamp_date: str = ""
    doi: str = ""
    pages: int = 0
    title_source: str = ""  # "metadata", "layout" or ""


@dataclass(slots=True)
class _Line:
    text: str
    y0: float
    y1: float
    x0: float
    size: float
    x1: float = 0.0


#: Fragments on one baseline further apart than this many type sizes are columns (authors side
#: by side), joined with a comma.
COLUMN_GAP = 2.0


def _lines(page: Any) -> tuple[list[_Line], list[str]]:
    """Horizontal lines of a page (spans merged) and the text of its rotated lines."""
    lines: list[_Line] = []
    rotated: list[str] = []
    for b in page.get_text("dict", flags=0)["blocks"]:
        for ln in b.get("lines", ()):
            spans = [s for s in ln["spans"] if s["text"].strip()]
            if not spans:
                continue
            text = clean_text("".join(s["text"] for s in ln["spans"]), True).strip()
            if abs(ln["dir"][1]) > 0.5:
                rotated.append(text)
                continue
            # the largest span: small caps set a title's initials larger than its other letters
            lettered = [s["size"] for s in spans if any(c.isalpha() for c in s["text"])]
            size = max(lettered or [s["size"] for s in spans])
            x0, y0, x1, y1 = ln["bbox"]
            lines.append(_Line(text, y0, y1, x0, size, x1))
    lines.sort(key=lambda ln: (round(ln.y0, 1), ln.x0))
    merged: list[_Line] = []
    for ln in lines:  # fragments on one baseline (a title split into spans) are one line
        prev = merged[-1] if merged else None
        if prev and abs(prev.y0 - ln.y0) < 2 and abs(prev.size - ln.size) < SIZE_TOL:
            sep = ", " if ln.x0 - prev.x1 > COLUMN_GAP * ln.size else " "
            prev.text = f"{prev.text}{sep}{ln.text}"
            prev.x0, prev.x1 = min(prev.x0, ln.x0), max(prev.x1, ln.x1)
        else:
            merged.append(_Line(ln.text, ln.y0, ln.y1, ln.x0, ln.size, ln.x1))
    return merged, rotated


def _letters(text: str) -> int:
    return sum(c.isalpha() for c in text)


def _join(parts: list[str], vocab: str) -> str:
    """Title lines joined; a line-end hyphen is dropped when the joined word occurs in ``vocab``
    (the text of the first pages, lower case) and kept (``NON-FACTOID``) otherwise."""
    out = ""
    for p in parts:
        if out.endswith("-") and p[:1].isalpha():
            head = re.search(r"(\w+)-$", out)
            tail = re.match(r"\w+", p)
            word = f"{head.group(1) if head else ''}{tail.group(0) if tail else ''}".lower()
            out = out[:-1] + p if re.search(rf"\b{re.escape(word)}\b", vocab) else out + p
        else:
            out = f"{out} {p}" if out else p
    return re.sub(r"\s+", " ", out).strip()


def _groups(band: list[tuple[int, _Line]]) -> list[list[tuple[int, _Line]]]:
    """Runs of consecutive lines of about one type size (small caps mix sizes within
    :data:`SIZE_RATIO`) with no gap wider than :data:`LINE_GAP` lines between them."""
    runs: list[list[tuple[int, _Line]]] = []
    for i, ln in band:
        run = runs[-1] if runs else None
        if run is not None:
            prev = run[-1][1]
            top = max(x.size for _, x in run)
            ratio = min(top, ln.size) / max(top, ln.size)
            # a line-end hyphen says the word goes on, whatever small caps do to the sizes
            same = ratio >= SIZE_RATIO or (prev.text.endswith("-") and ratio >= 0.75)
            if same and ln.y0 - prev.y1 <= LINE_GAP * top and i == run[-1][0] + 1:
                run.append((i, ln))
                continue
        runs.append([(i, ln)])
    return runs


def layout_title(lines: list[_Line], height: float, vocab: str = "") -> tuple[str, int]:
    """The title by type size: the run of large lines in the top band of page 1 (the largest of
    those with at least :data:`MIN_TITLE_WORDS` words, else the largest), joined, and the index
    of its last line ('' and -1 when nothing stands out)."""
    sizes = sorted(ln.size for ln in lines if _letters(ln.text) >= 2)
    if not sizes:
        return "", -1
    median = sizes[len(sizes) // 2]
    band = [
        (i, ln) for i, ln in enumerate(lines)
        if ln.y0 < height * TITLE_BAND and _letters(ln.text) >= 2
    ]  # fmt: skip
    runs = [r for r in _groups(band) if max(x.size for _, x in r) >= median * MIN_TITLE_RATIO]
    if not runs:
        return "", -1
    wordy = [r for r in runs if sum(len(x.text.split()) for _, x in r) >= MIN_TITLE_WORDS]
    best = max(wordy or runs, key=lambda r: max(x.size for _, x in r))
    return _join([ln.text for _, ln in best], vocab), best[-1][0]


def _authors_below(lines: list[_Line], last: int) -> list[str]:
    """Author names from the lines right after the title, up to an affiliation or the abstract."""
    out: list[str] = []
    for ln in lines[last + 1 : last + 6]:
        if _NOT_AUTHOR.search(ln.text) or len(ln.text) > 160:
            break
        text = re.sub(r"[\d*†‡§¶∗]+", " ", ln.text)
        names = [re.sub(r"^and\s+", "", n.strip()) for n in re.split(_NAME_SEP, text)]
        out.extend(n for n in names if 2 <= len(n.split()) <= 4 and _letters(n) >= 4)
    return out[:20]


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text).split())


def _meta_title(meta: dict[str, Any], page_text: str) -> str:
    """The PDF's ``/Title`` when it is plausible and page 1 carries it, else ''."""
    t = " ".join(str(meta.get("title") or "").split())
    if len(_norm(t).split()) < 2 or _BAD_META_TITLE.search(t):
        return ""
    return t if _norm(t) in _norm(page_text) else ""


def read_meta(path: str | Path, *, use_stamp: bool = True, use_metadata: bool = True) -> PdfMeta:
    """Metadata of one PDF from its page 1 and document info (module docstring).

    Raises:
        pymupdf.FileDataError, RuntimeError, ValueError: the file is not a readable PDF (the
            caller names it: :mod:`rag.index.folder` makes it a row of the run's summary).
    """
    import pymupdf

    with pymupdf.open(path, filetype="pdf") as doc:
        if doc.needs_pass and not doc.authenticate(""):
            raise ValueError("password-protected PDF")
        out = PdfMeta(pages=doc.page_count)
        if not doc.page_count:
            return out
        page = doc[0]
        lines, rotated = _lines(page)
        info = (doc.metadata or {}) if use_metadata else {}
        height = page.rect.height
        page_text = " ".join(ln.text for ln in lines)
        vocab = " ".join(doc[i].get_text() for i in range(min(2, doc.page_count))).lower()
    if use_stamp:
        for text in rotated + [ln.text for ln in lines[:3]]:
            m = _STAMP.search(text)
            # old-style ids lose their subject class (math.GT/0309136 -> math/0309136)
            aid = re.sub(r"^([a-z-]+)\.[A-Z]{2}/", r"\1/", m.group("id")) if m else ""
            if m and re.match(ARXIV_ID_RE, aid):
                out.arxiv_id = aid
                out.arxiv_version = m.group("v") or ""
                out.arxiv_category = m.group("cat").strip()
                out.stamp_date = " ".join(m.group("date").split())
                out.year = int(m.group("y"))
                break
    title, last = layout_title(lines, height, vocab)
    meta_title = _meta_title(info, page_text) if use_metadata else ""
    # the layout's title, unless it is missing or only a part of a /Title page 1 also carries
    partial = (
        bool(title) and _norm(title) != _norm(meta_title) and _norm(title) in _norm(meta_title)
    )
    if meta_title and (not title or partial):
        out.title, out.title_source = meta_title, "metadata"
    elif title:
        out.title, out.title_source = title, "layout"
    author = str(info.get("author") or "").strip()
    if author and _letters(author) >= 4:
        out.authors = [a.strip() for a in re.split(r";|,\s*|\s+and\s+", author) if a.strip()]
    elif last >= 0:
        out.authors = _authors_below(lines, last)
    found = _DOI.findall(f"{info.get('subject', '')} {info.get('keywords', '')} {page_text}")
    doi = (d.rstrip(".,;:)").lower() for d in found)
    out.doi = next((d for d in doi if not d.startswith("10.48550/")), "")
    if out.year is None:
        m = re.match(r"D:(\d{4})", str(info.get("creationDate") or ""))
        out.year = int(m.group(1)) if m else None
    return out
