"""One question through several retrievers side by side, graded against the gold when it has one.

Each retriever's ranking is the paper desk's ``search`` (the same call as ``POST /search``). When
the question is one of the corpus gold questions (:mod:`rag.evaluation.gold`; matched on its text,
case and spacing ignored), its relevant chunks are the served chunks holding one of its evidence
quotes (:func:`rag.evaluation.gold.chunk_qrels`, the relevance notebook 04 grades on), and each
ranking is scored by how many of them it finds in its top k, its first relevant rank, and how many
of the gold papers it reaches. A question outside the gold is compared without grades.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag.lab import html as h
from rag.lab.records import Record


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def find_gold(question: str, items: Sequence[Any]) -> Any | None:
    """The answerable gold item asking ``question`` (case and spacing ignored), or None."""
    key = _norm(question)
    return next((g for g in items if g.answerable and _norm(g.question) == key), None)


def gold_record(item: Any, store: Any) -> dict[str, Any]:
    """``{qid, answer, papers, chunks}`` of a gold item over the served chunks ``store``."""
    from rag.evaluation.gold import chunk_qrels

    papers = set(item.relevant_papers)
    chunks = [store[i] for i in store if store[i].paper_id in papers]
    qrels, _ = chunk_qrels([item], chunks)
    return {
        "qid": item.qid, "answer": item.answer, "papers": sorted(papers),
        "chunks": sorted(qrels.get(item.qid, {})),
    }  # fmt: skip


def overlap(hits: Sequence[dict[str, Any]], gold: dict[str, Any], k: int) -> dict[str, Any]:
    """How a ranking meets the gold: relevant chunks in its top ``k`` (and their share of all
    relevant chunks, None when none was placed), its first relevant rank, gold papers reached."""
    relevant = set(gold["chunks"])
    ranks = [i for i, x in enumerate(hits[:k], 1) if x["chunk_id"] in relevant]
    papers = {x["arxiv_id"] for x in hits[:k]} & set(gold["papers"])
    return {
        "gold_chunks_found": len(ranks),
        f"recall@{k}": round(len(ranks) / len(relevant), 3) if relevant else None,
        "first_gold_rank": ranks[0] if ranks else None,
        "gold_papers_found": len(papers),
    }


class Comparison(
    Record, kind="comparison", columns="retriever rank score arxiv_id page section chunk_id gold"
):
    """The same question's rankings by several retrievers (``Lab.compare``)."""

    question: str
    k: int
    runs: dict[str, dict[str, Any]]
    gold: dict[str, Any] | None
    overlap: dict[str, dict[str, Any]]

    def _is_gold(self, hit: dict[str, Any]) -> bool | None:
        return None if self.gold is None else hit["chunk_id"] in set(self.gold["chunks"])

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"retriever": name, "rank": i, "score": x["score"], "arxiv_id": x["arxiv_id"],
             "page": x["page"], "section": x["section"], "chunk_id": x["chunk_id"],
             "gold": self._is_gold(x)}
            for name, run in self.runs.items()
            for i, x in enumerate(run["hits"], 1)
        ]  # fmt: skip

    def summary(self) -> list[dict[str, Any]]:
        """One row per retriever: its latency and, with gold, how it meets it."""
        return [
            {"retriever": name, "latency_ms": round(run["latency_ms"], 1),
             **self.overlap.get(name, {})}
            for name, run in self.runs.items()
        ]  # fmt: skip

    def text(self) -> str:
        lines = [f"{self.question!r}, top {self.k}:"]
        if self.gold is None:
            lines.append("  (not a gold question: rankings without grades)")
        else:
            lines.append(f"  gold {self.gold['qid']}: {len(self.gold['chunks'])} relevant chunks "
                         f"in {', '.join(self.gold['papers'])}")  # fmt: skip
        for row in self.summary():
            lines.append("  " + ", ".join(f"{k} {v}" for k, v in row.items()))
        for name, run in self.runs.items():
            lines.append(f"{name}:")
            for i, x in enumerate(run["hits"], 1):
                star = "*" if self._is_gold(x) else " "
                lines.append(f" {star}{i:>2}. arXiv:{x['arxiv_id']}, p. {x['page']}  "
                             f"{x['section']}")  # fmt: skip
        return "\n".join(lines)

    def html(self) -> str:
        names = list(self.runs)
        depth = max((len(r["hits"]) for r in self.runs.values()), default=0)
        cells = []
        for i in range(depth):
            row: list[Any] = [i + 1]
            for name in names:
                hits = self.runs[name]["hits"]
                if i >= len(hits):
                    row.append("")
                    continue
                x = hits[i]
                gold = self._is_gold(x)
                mark = "<span class='rag-gold' title='holds gold evidence'>★ gold</span> "
                row.append(h.Raw(
                    f"{mark if gold else ''}{h.paper_link(x['arxiv_id'])}, p. {h.esc(x['page'])}"
                    f"<br><span class='rag-muted'>{h.esc(h.snippet(x['section'], 60))}</span>"
                ))  # fmt: skip
            cells.append(row)
        if self.gold is None:
            note = "Not a gold question: the rankings are shown without grades."
        else:
            note = (
                f"Gold {self.gold['qid']}: {len(self.gold['chunks'])} relevant chunks in "
                f"{', '.join(self.gold['papers'])}; ★ marks a chunk holding its evidence."
            )
        summary = self.summary()
        cols = list(summary[0]) if summary else ["retriever"]
        return h.box(
            self.kind,
            h.head(f"<b>{h.esc(self.question)}</b> — top {self.k} by {len(names)} retrievers"),
            h.table(["#", *names], cells, numeric=("#",)),
            f"<p class='rag-muted'>{h.esc(note)}</p>",
            h.table(cols, [[r.get(c) for c in cols] for r in summary],
                    numeric=[c for c in cols if c != "retriever"]),
        )  # fmt: skip
