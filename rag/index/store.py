"""The chunk store: chunk records by id, what turns an index's ids into filled hits.

Every retriever reads it, and it is built with the indexes (:mod:`rag.index.build`), so it lives in
the index layer: retrieval only looks chunks up.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from rag.errors import ConfigError, IndexBuildError
from rag.ir import sort_hits
from rag.types import Chunk, Hit


class ChunkStore:
    """Chunk records by id: what turns an index's ids into filled :class:`Hit` records.

    Works for corpus chunks and for document collections (SciFact abstracts) stored as one
    :class:`Chunk` per document with ``paper_id`` = the document id (see :meth:`from_docs`).
    """

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self._chunks: dict[str, Chunk] = {}
        for c in chunks:
            if c.chunk_id in self._chunks:
                raise ConfigError(
                    f"chunk id {c.chunk_id!r} appears twice; chunk ids must be unique"
                )
            self._chunks[c.chunk_id] = c

    @classmethod
    def from_docs(cls, docs: Mapping[str, Mapping[str, str] | str]) -> ChunkStore:
        """One chunk per document: BEIR ``{doc_id: {"title", "text"}}`` or ``{doc_id: text}``.

        The chunk text is ``title + " " + text`` (what BM25 and the embedders index); ``section``
        holds the title; page 1.
        """
        chunks = []
        for doc_id, doc in docs.items():
            if isinstance(doc, str):
                title, body = "", doc
            else:
                title, body = doc.get("title", "") or "", doc.get("text", "") or ""
            text = f"{title} {body}".strip()
            chunks.append(
                Chunk(
                    chunk_id=str(doc_id),
                    paper_id=str(doc_id),
                    strategy="doc",
                    text=text,
                    section=title,
                    page_start=1,
                    page_end=1,
                    char_start=0,
                    char_end=len(text),
                    n_tokens=len(text.split()),
                )
            )
        return cls(chunks)

    def __len__(self) -> int:
        return len(self._chunks)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._chunks

    def __iter__(self) -> Iterator[str]:
        return iter(self._chunks)

    def __getitem__(self, chunk_id: str) -> Chunk:
        try:
            return self._chunks[chunk_id]
        except KeyError as e:
            raise IndexBuildError(
                f"the index returned chunk id {chunk_id!r}, which is not in the chunk store; "
                "the index was built from other chunks: rebuild it from this store"
            ) from e

    @property
    def ids(self) -> list[str]:
        """Chunk ids in insertion order."""
        return list(self._chunks)

    @property
    def texts(self) -> list[str]:
        """Chunk texts in the order of :attr:`ids`."""
        return [c.text for c in self._chunks.values()]

    def hit(self, chunk_id: str, score: float) -> Hit:
        """The :class:`Hit` for one chunk id and score, filled from the stored record."""
        c = self[chunk_id]
        return Hit(c.chunk_id, c.paper_id, c.page_start, c.section, c.text, float(score))

    def hits(self, pairs: Iterable[tuple[str, float]]) -> list[Hit]:
        """Hits for ``(chunk_id, score)`` pairs, sorted deterministically."""
        return sort_hits(self.hit(cid, s) for cid, s in pairs)
