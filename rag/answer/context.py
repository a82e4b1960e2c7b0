"""Context assembly: ranked hits in, numbered sources ``[1]..[k]`` for a prompt out.

Hits are ranked by score (ties by chunk id), capped per paper (:class:`rag.ir.PaperCap`; a source
dropped for the budget does not use its paper's quota), then packed first-fit into a token
budget: a source whose rendered block does not fit the remaining budget is dropped and counted,
and packing continues with the next. The kept sources are then placed either in rank order
(``"score"``) or with the strongest at both ends (``"edges"``: ranks 1, 3, 5, ... from the front
and 2, 4, ... from the back), since models use the beginning and end of a long context best and
the middle worst (Liu et al., 2023, "Lost in the Middle: How Language Models Use Long Contexts",
TACL 2024). Sources are numbered in the order the model reads them, and the context keeps
``n -> chunk id``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag.errors import ConfigError
from rag.ir import PaperCap, sort_hits
from rag.types import Hit

logger = logging.getLogger(__name__)

Order = Literal["score", "edges"]
TokenCounter = Callable[[str], int]


def chars4(text: str) -> int:
    """Default token count: ``ceil(len(text) / 4)`` (OpenAI's rule of thumb for English)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class Source:
    """One numbered source as shown to the answerer.

    Attributes:
        n: the citation number (1-based position in the prompt).
        rank: 1-based retrieval rank among the hits (after sorting by score).
        n_tokens: tokens of :meth:`render`, by the context's counter.
    """

    n: int
    rank: int
    chunk_id: str
    paper_id: str
    title: str
    page: int
    section: str
    text: str
    score: float
    n_tokens: int

    def header(self) -> str:
        """``[n] Title (arXiv:id, p. 3, section: Method)``."""
        where = f"arXiv:{self.paper_id}, p. {self.page}"
        if self.section:
            where += f", section: {self.section}"
        title = self.title or "(untitled)"
        return f"[{self.n}] {title} ({where})"

    def render(self) -> str:
        """Header line plus the chunk text."""
        return f"{self.header()}\n{self.text.strip()}"


@dataclass(frozen=True, slots=True)
class Context:
    """The numbered sources of one question plus what assembly dropped.

    Attributes:
        sources: kept sources, in prompt order (``sources[i].n == i + 1``).
        order: "score" or "edges".
        token_budget: the budget the sources were packed into.
        n_hits: hits received.
        n_dropped_cap: hits dropped by the per-paper cap.
        n_dropped_budget: hits dropped because they did not fit the token budget.
    """

    sources: tuple[Source, ...]
    order: str
    token_budget: int
    n_hits: int
    n_dropped_cap: int = 0
    n_dropped_budget: int = 0

    @property
    def citation_map(self) -> dict[int, str]:
        """``{n: chunk_id}`` for every source."""
        return {s.n: s.chunk_id for s in self.sources}

    @property
    def source_texts(self) -> dict[int, str]:
        """``{n: chunk text}``, the shape :mod:`rag.evaluation.citations` scores citations
        against."""
        return {s.n: s.text for s in self.sources}

    @property
    def n_tokens(self) -> int:
        """Tokens of all rendered sources."""
        return sum(s.n_tokens for s in self.sources)

    def render(self) -> str:
        """All sources, separated by blank lines, as they appear in the prompt."""
        return "\n\n".join(s.render() for s in self.sources)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (contexts are stored once and shared by all answerers)."""
        d = asdict(self)
        d["sources"] = [asdict(s) for s in self.sources]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Context:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "sources": tuple(Source(**s) for s in d["sources"])})


class ContextSettings(BaseModel):
    """How retrieved hits become the numbered sources of a prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    order: Order = Field(
        "score", description="'score': rank order; 'edges': strongest at start and end."
    )
    per_paper_cap: int | None = Field(
        None, ge=1, le=100, description="At most this many sources per paper (None: no cap)."
    )
    token_budget: int = Field(
        1500, ge=1, le=200_000, description="Tokens all rendered sources may take together."
    )


def _source(n: int, rank: int, h: Hit, titles: Mapping[str, str], n_tokens: int) -> Source:
    title = titles.get(h.paper_id, "")
    return Source(n, rank, h.chunk_id, h.paper_id, title, h.page, h.section, h.text, h.score,
                  n_tokens)  # fmt: skip


def edge_positions(k: int) -> list[int]:
    """Prompt position (0-based) of each of ``k`` ranks under "edges" ordering.

    Rank 1 goes first, rank 2 last, rank 3 second, rank 4 second to last, and so on, so the
    weakest sources end up in the middle: for k=5 the prompt reads ranks 1, 3, 5, 4, 2.
    """
    front, back = 0, k - 1
    pos = []
    for r in range(k):
        if r % 2 == 0:
            pos.append(front)
            front += 1
        else:
            pos.append(back)
            back -= 1
    return pos


def assemble_context(
    hits: Sequence[Hit],
    *,
    order: Order = "score",
    per_paper_cap: int | None = None,
    token_budget: int = 1500,
    count_tokens: TokenCounter = chars4,
    titles: Mapping[str, str] | None = None,
) -> Context:
    """Numbered sources for one question (see the module docstring).

    Args:
        hits: retrieval hits, in any order (they are re-sorted by score, ties by chunk id).
        order: "score" or "edges".
        per_paper_cap: keep at most this many hits per paper (None: no cap).
        token_budget: total tokens of the rendered sources; a source that would overflow it is
            dropped and counted, and smaller later sources may still fit.
        count_tokens: tokenizer used for the budget (default ``ceil(chars / 4)``).
        titles: ``{paper_id: title}``; a missing title renders as "(untitled)".

    Raises:
        ConfigError: unknown order, cap < 1 or budget < 1.
    """
    if order not in ("score", "edges"):
        raise ConfigError(f"order={order!r}: use 'score' or 'edges'")
    if per_paper_cap is not None and per_paper_cap < 1:
        raise ConfigError(f"per_paper_cap={per_paper_cap}: must be >= 1 or None")
    if token_budget < 1:
        raise ConfigError(f"token_budget={token_budget}: must be >= 1")
    titles = titles or {}
    ranked = sort_hits(hits)
    cap = PaperCap(per_paper_cap) if per_paper_cap is not None else None
    n_cap = n_budget = 0
    kept: list[tuple[int, Hit, int]] = []
    used = 0
    for rank, h in enumerate(ranked, start=1):
        if cap is not None and not cap.allows(h):
            n_cap += 1
            continue
        # Counted with the rank-order number; "edges" may renumber it, which moves a digit or so.
        probe = _source(len(kept) + 1, rank, h, titles, 0)
        cost = count_tokens(probe.render())
        if used + cost > token_budget:
            n_budget += 1
            continue
        used += cost
        if cap is not None:
            cap.take(h)
        kept.append((rank, h, cost))
    positions = edge_positions(len(kept)) if order == "edges" else list(range(len(kept)))
    in_prompt_order = [item for _, item in sorted(zip(positions, kept, strict=True))]
    sources = []
    for i, (rank, h, cost) in enumerate(in_prompt_order, start=1):
        sources.append(_source(i, rank, h, titles, cost))
    if n_budget:
        logger.debug("context: %d of %d hits dropped by the token budget", n_budget, len(hits))
    return Context(tuple(sources), order, token_budget, len(hits), n_cap, n_budget)


def build_contexts(
    hits_by_qid: Mapping[str, Sequence[Hit]],
    settings: ContextSettings | None = None,
    *,
    count_tokens: TokenCounter = chars4,
    titles: Mapping[str, str] | None = None,
) -> dict[str, Context]:
    """:func:`assemble_context` for every question, with one settings object."""
    s = settings or ContextSettings()
    return {
        qid: assemble_context(
            hits,
            order=s.order,
            per_paper_cap=s.per_paper_cap,
            token_budget=s.token_budget,
            count_tokens=count_tokens,
            titles=titles,
        )
        for qid, hits in hits_by_qid.items()
    }
