"""Response models of the paper routes (``/papers/{arxiv_id}``, ``/citations``, ``/related``,
``/summary``): the shapes :class:`rag.serve.desk.Desk` returns, for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Section(BaseModel):
    section: str
    page: int = Field(description="The page the section starts on.")


class PaperOut(BaseModel):
    arxiv_id: str
    title: str
    category: str = Field(description="arXiv primary category ('' for an uploaded paper).")
    version: str = Field(description="The pinned version, e.g. 'v2' ('' for an upload).")
    url: str
    source: str = Field(description="profile, arxiv or upload.")
    pages: int
    n_chunks: int
    sections: list[Section]


class Link(BaseModel):
    arxiv_id: str = Field(description="The other work: an arXiv id, or 'doi:...'.")
    in_corpus: bool
    how: str = Field(description="How the reference was resolved: arxiv_id, doi or title.")
    score: float = Field(description="1.0 for an id written in the reference; else title match.")
    reference: str = Field(description="The reference entry as the citing paper prints it.")
    title: str = Field(description="The corpus title ('' outside the corpus).")


class CitationsOut(BaseModel):
    arxiv_id: str
    cites: list[Link]
    cited_by: list[Link]
    n_cites: int
    n_cited_by: int


class RelatedPaper(BaseModel):
    arxiv_id: str
    title: str
    score: float
    rank: int


class RelatedOut(BaseModel):
    arxiv_id: str
    method: str
    related: list[RelatedPaper]


class SummaryOut(BaseModel):
    paper_id: str
    title: str
    method: str = Field(description="extractive, or llm:<model>.")
    version: str
    settings: dict[str, Any]
    text: str
    sentences: list[dict[str, Any]] = Field(
        description="Each summary sentence with its section, page, evidence pages and verdict."
    )
    counts: dict[str, Any]
    llm: dict[str, Any] | None = None
