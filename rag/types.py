"""Records shared by the stages: parsed blocks, chunks and retrieval hits.

These are the contracts between modules; each stage's own settings live in its module.
IR data (queries, qrels, runs) are plain dicts, see :mod:`rag.evaluation.metrics`:
``queries: {qid: text}``, ``qrels: {qid: {doc_id: grade}}``, ``runs: {qid: {doc_id: score}}``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


class AsDict:
    """Gives a dataclass ``to_dict()``: :func:`dataclasses.asdict` of it, JSON-ready when its
    fields are (slot-free, so a ``slots=True`` dataclass keeps its slots)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


BlockKind = Literal["heading", "body", "caption", "footnote", "references", "header_footer"]
ParseStatus = Literal[
    "ok", "encrypted", "empty", "image_only", "too_many_pages", "timeout", "corrupt", "error"
]


@dataclass(frozen=True, slots=True)
class Block:
    """One text block of a parsed PDF, in reading order.

    Attributes:
        page: 1-based page number.
        kind: what the block is; chunkers keep ``heading`` and ``body`` (and optionally captions
            and footnotes) and drop ``header_footer`` and, by default, ``references``.
        section: the heading of the section the block belongs to ("" before the first heading).
        text: normalised text (ligatures expanded, hyphenated line breaks joined, whitespace
            collapsed within lines).
        bbox: (x0, y0, x1, y1) in PDF points on its page.
    """

    page: int
    kind: BlockKind
    section: str
    text: str
    bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass(slots=True)
class ParsedPaper:
    """A parsed paper: its blocks in reading order plus how the parse went."""

    paper_id: str
    n_pages: int
    blocks: list[Block] = field(default_factory=list)
    status: ParseStatus = "ok"
    error: str | None = None
    parse_seconds: float = 0.0
    #: :meth:`content_sha1` once computed (or read from the parse cache's memo); not serialised.
    known_sha1: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def content_sha1(self) -> str:
        """Content hash (id, pages, status, blocks; not the parse time), computed once.

        The hash is remembered on the record, so a record is not to be edited after hashing
        (nothing in the pipeline edits a parse; a changed parse is a new record)."""
        if self.known_sha1 is None:
            h = hashlib.sha1()
            encode = json.JSONEncoder(ensure_ascii=False).encode
            h.update(encode([self.paper_id, self.n_pages, self.status, self.error]).encode())
            for b in self.blocks:
                h.update(encode([b.page, b.kind, b.section, b.text, list(b.bbox)]).encode())
            self.known_sha1 = h.hexdigest()
        return self.known_sha1

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("known_sha1")
        d["blocks"] = [asdict(b) for b in self.blocks]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ParsedPaper:
        blocks = [Block(**{**b, "bbox": tuple(b["bbox"])}) for b in d.get("blocks", [])]
        return cls(**{**d, "blocks": blocks})


@dataclass(frozen=True, slots=True)
class Chunk(AsDict):
    """A retrievable unit of text.

    ``chunk_id`` is a stable hash of (paper id, strategy, parameters, offsets); ``char_start`` and
    ``char_end`` index into the paper's chunkable text as built by
    :func:`rag.text.chunk.paper_text`.
    """

    chunk_id: str
    paper_id: str
    strategy: str
    text: str
    section: str
    page_start: int
    page_end: int
    char_start: int
    char_end: int
    n_tokens: int


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieval result: a chunk record plus its score (higher is better)."""

    chunk_id: str
    paper_id: str
    page: int
    section: str
    text: str
    score: float
