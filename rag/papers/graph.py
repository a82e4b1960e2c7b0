"""The corpus citation graph: every paper's references resolved, written as ``citations.jsonl``.

One row per (citing, cited) pair (:class:`rag.papers.resolve.Citation`): the first entry of the
citing paper's list that resolves to ``cited`` is kept, so a work listed twice counts once. Rows
keep resolved arXiv ids outside the corpus (papers worth adding) and DOIs; the graph of
:func:`citation_graph` is a networkx ``DiGraph`` over them, edges citing → cited.

Co-citation (Small 1973, "Co-citation in the scientific literature", JASIS 24) counts the papers
that cite both a and b; bibliographic coupling (Kessler 1963, "Bibliographic coupling between
scientific papers", American Documentation 14) counts the works both a and b cite.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import networkx as nx

from rag import paths
from rag.atomic import atomic_path
from rag.corpus.manifest import Paper
from rag.errors import ConfigError
from rag.papers.references import paper_references
from rag.papers.resolve import (
    TITLE_THRESHOLD,
    Citation,
    TitleMatcher,
    resolve_entry,
    stamp_month,
)
from rag.types import ParsedPaper


def paper_citations(
    parsed: ParsedPaper,
    matcher: TitleMatcher,
    *,
    threshold: float = TITLE_THRESHOLD,
    citing_month: tuple[int, int] | None = None,
) -> list[Citation]:
    """The resolved links of one parsed paper, one per cited work, in reference-list order."""
    rows: list[Citation] = []
    seen: set[str] = set()
    for ref in paper_references(parsed):
        for c in resolve_entry(
            parsed.paper_id,
            ref.index,
            ref.text,
            matcher,
            threshold=threshold,
            citing_month=citing_month,
        ):
            if c.cited not in seen:
                seen.add(c.cited)
                rows.append(c)
    return rows


def build_citations(
    papers: Sequence[Paper],
    parsed: Iterable[ParsedPaper],
    *,
    threshold: float = TITLE_THRESHOLD,
) -> list[Citation]:
    """Resolve the references of every parsed paper against the corpus ``papers``.

    Raises:
        ConfigError: a parsed paper is not among ``papers``.
    """
    by_id = {p.arxiv_id: p for p in papers}
    matcher = TitleMatcher({p.arxiv_id: p.title for p in papers})
    rows: list[Citation] = []
    for pp in parsed:
        if pp.paper_id not in by_id:
            raise ConfigError(f"parsed paper {pp.paper_id!r} is not in the corpus given")
        if not pp.ok:
            continue
        month = stamp_month(by_id[pp.paper_id].stamp_date)
        rows.extend(paper_citations(pp, matcher, threshold=threshold, citing_month=month))
    return rows


def write_citations(rows: Iterable[Citation], path: str | os.PathLike[str]) -> Path:
    """Write rows as JSONL, atomically (a failed write leaves the old file intact)."""
    p = Path(path)
    with atomic_path(p) as tmp, tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    return p


def read_citations(path: str | os.PathLike[str]) -> list[Citation]:
    """Rows written by :func:`write_citations`.

    Raises:
        ConfigError: the file is missing or a line is not a citation row.
    """
    p = paths.resolve(path)  # a relative path is the project's, wherever the caller stands
    if not p.is_file():
        raise ConfigError(f"citations file not found: {p.name}; build it with rag.papers.measure")
    rows = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(Citation(**json.loads(line)))
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{p.name} line {n}: not a citation row ({e})") from e
    return rows


def citation_graph(rows: Iterable[Citation], corpus: Iterable[str] = ()) -> nx.DiGraph:
    """A directed graph citing → cited; nodes carry ``in_corpus``; every corpus id is a node."""
    g = nx.DiGraph()
    for pid in corpus:
        g.add_node(pid, in_corpus=True)
    for r in rows:
        g.add_node(r.citing, in_corpus=True)
        if r.cited not in g:
            g.add_node(r.cited, in_corpus=r.in_corpus)
        g.add_edge(r.citing, r.cited, how=r.how, score=r.score)
    return g


def degrees(g: nx.DiGraph) -> dict[str, dict[str, int]]:
    """Per corpus paper: ``in`` (corpus papers citing it), ``out`` (corpus papers it cites) and
    ``out_all`` (every resolved work it cites, in the corpus or not)."""
    out: dict[str, dict[str, int]] = {}
    for n, data in sorted(g.nodes(data=True)):
        if not data.get("in_corpus"):
            continue
        out[n] = {
            "in": sum(1 for u in g.predecessors(n) if g.nodes[u].get("in_corpus")),
            "out": sum(1 for v in g.successors(n) if g.nodes[v].get("in_corpus")),
            "out_all": g.out_degree(n),
        }
    return out


def references_of(rows: Iterable[Citation]) -> dict[str, set[str]]:
    """``{citing: {cited, ...}}`` over every resolved work (in the corpus or not)."""
    refs: dict[str, set[str]] = {}
    for r in rows:
        refs.setdefault(r.citing, set()).add(r.cited)
    return refs


def cocitation(refs: Mapping[str, set[str]], paper: str, *, hide: str = "") -> Counter[str]:
    """For every other work b: how many citing papers list both ``paper`` and b.

    ``hide`` names a citing paper whose list is not read (the paper left out when its own
    references are what is predicted).
    """
    counts: Counter[str] = Counter()
    for citing, cited in refs.items():
        if citing == hide or paper not in cited:
            continue
        counts.update(c for c in cited if c != paper)
    return counts


def coupling(refs: Mapping[str, set[str]], paper: str) -> Counter[str]:
    """For every other citing paper b: how many works ``paper`` and b both cite."""
    mine = refs.get(paper, set())
    return Counter(
        {b: len(mine & cited) for b, cited in refs.items() if b != paper and mine & cited}
    )


def paper_links(rows: Iterable[Citation], paper: str, corpus: Iterable[str]) -> dict:
    """A corpus paper's links, JSON-ready: what it cites (in the corpus or not) and which corpus
    papers cite it, each with how the link was resolved and the raw reference.

    Raises:
        ConfigError: ``paper`` is not in ``corpus``.
    """
    corpus = set(corpus)
    if paper not in corpus:
        raise ConfigError(f"paper {paper!r} is not in the corpus; list_papers shows the ids")
    rows = list(rows)

    def link(r: Citation, other: str) -> dict:
        return {
            "arxiv_id": other,
            "in_corpus": other in corpus,
            "how": r.how,
            "score": r.score,
            "reference": r.reference,
        }

    return {
        "arxiv_id": paper,
        "cites": [link(r, r.cited) for r in rows if r.citing == paper],
        "cited_by": sorted(
            (link(r, r.citing) for r in rows if r.cited == paper),
            key=lambda d: d["arxiv_id"],
        ),
    }


def most_cited_outside(rows: Iterable[Citation], k: int = 10) -> list[tuple[str, int]]:
    """The arXiv ids outside the corpus cited by the most corpus papers (ties by id)."""
    counts = Counter(r.cited for r in rows if not r.in_corpus and not r.cited.startswith("doi:"))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
