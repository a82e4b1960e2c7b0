"""arXiv identifiers and DOIs written in a reference, found and normalised.

An identifier is taken only in an arXiv context (``arXiv:``, ``arxiv.org/abs|pdf/``, DBLP's
``CoRR abs/``, arXiv's DOI prefix ``10.48550/arXiv.``), never from a bare number, so page ranges
and volume numbers are not mistaken for ids. Versions are dropped (``1810.04805v2`` →
``1810.04805``) and old-style ids lose their subject class (``math.GT/0309136`` →
``math/0309136``), the forms the manifest pins.

New-style ids follow arXiv's scheme (https://info.arxiv.org/help/arxiv_identifier.html):
``YYMM.NNNN`` from April 2007 to December 2014, ``YYMM.NNNNN`` from January 2015; a match whose
month or digit count contradicts the scheme is rejected as a misread.
"""

from __future__ import annotations

import re

_NEW = r"(?P<new>(?P<yy>\d{2})(?P<mm>\d{2})\.(?P<num>\d{4,5}))(?:v\d+)?(?!\d)"
_OLD = r"(?P<old>(?P<arch>[a-z]+(?:-[a-z]+)?)(?:\.[A-Za-z]{2})?/(?P<onum>\d{7}))(?:v\d+)?(?!\d)"
_CONTEXT = (
    r"(?:arxiv\s*(?:preprint)?\s*(?:arxiv)?\s*[:.]?\s*(?:abs/)?"
    r"|arxiv\.org/(?:abs|pdf)/\s*"
    r"|\bcorr\s*,?\s*abs/\s*"
    r"|\babs/\s*"
    r"|10\.48550/arxiv\.)"
)
_ARXIV = re.compile(_CONTEXT + r"(?:" + _NEW + r"|" + _OLD + r")", re.I)
#: A DOI (Crossref's recommended pattern, https://www.crossref.org/blog/dois-and-matching-regular-expressions/).
_DOI = re.compile(r"\b(10\.\d{4,9}/[-._;()/:A-Za-z0-9]+)")
_OLD_ARCHIVES = {
    "astro-ph", "cond-mat", "gr-qc", "hep-ex", "hep-lat", "hep-ph", "hep-th", "math-ph", "nlin",
    "nucl-ex", "nucl-th", "physics", "quant-ph", "math", "cs", "q-bio", "q-fin", "stat",
    "cmp-lg", "chao-dyn", "patt-sol", "adap-org", "solv-int", "comp-gas", "funct-an", "alg-geom",
    "dg-ga", "q-alg",
}  # fmt: skip


def _valid_new(yy: str, mm: str, num: str) -> bool:
    year, month = int(yy), int(mm)
    if not 1 <= month <= 12 or year < 7 or (year == 7 and month < 4):
        return False
    return len(num) == (5 if year >= 15 else 4)


def arxiv_ids(text: str) -> list[str]:
    """The arXiv ids written in ``text``, versionless, in order of appearance, each once."""
    return [aid for aid, _ in arxiv_id_spans(text)]


def arxiv_id_spans(text: str) -> list[tuple[str, tuple[int, int]]]:
    """``(id, (start, end))`` of each arXiv id in ``text``, the span covering its context too
    (``arXiv preprint arXiv:1810.04805v2``), first occurrence of each id."""
    out: list[tuple[str, tuple[int, int]]] = []
    seen: set[str] = set()
    for m in _ARXIV.finditer(text):
        if m.group("new"):
            if not _valid_new(m.group("yy"), m.group("mm"), m.group("num")):
                continue
            aid = m.group("new")
        else:
            arch = m.group("arch").lower()
            if arch not in _OLD_ARCHIVES:
                continue
            aid = f"{arch}/{m.group('onum')}"
        if aid not in seen:
            seen.add(aid)
            out.append((aid, m.span()))
    return out


def via_doi(text: str, aid: str) -> bool:
    """Whether ``aid`` is written in ``text`` only as arXiv's DOI (``10.48550/arXiv.<id>``)."""
    spans = [m for m in _ARXIV.finditer(text) if aid in m.group(0)]
    return bool(spans) and all(m.group(0).lower().startswith("10.48550") for m in spans)


def hide_ids(text: str) -> str:
    """``text`` with every arXiv id and DOI (and its ``arXiv:`` / URL context) removed: what title
    resolution sees when it is measured on references whose id is known."""
    text = _ARXIV.sub(" ", text)
    text = _DOI.sub(" ", text)
    text = re.sub(r"(?i)https?://\S*|\barxiv\b(?:\s*preprint)?|\bdoi\s*:", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def normalise_arxiv_id(aid: str) -> str:
    """An arXiv id as the manifest pins it: no ``arXiv:`` prefix, no version, no subject class.

    Returns "" when ``aid`` is not an arXiv id.
    """
    found = arxiv_ids(f"arXiv:{aid.strip().removeprefix('arXiv:').removeprefix('arxiv:')}")
    return found[0] if found else ""


def dois(text: str) -> list[str]:
    """The DOIs written in ``text``, lower-cased, trailing punctuation stripped, each once.

    arXiv's own DOIs (``10.48550/arXiv.*``) are included; :func:`arxiv_ids` reads their ids.
    """
    out: list[str] = []
    for m in _DOI.finditer(text):
        doi = m.group(1).rstrip(".,;:)").lower()
        if doi not in out:
            out.append(doi)
    return out
