"""Request and response models of the service (pydantic: validation, limits, OpenAPI at /docs).

Every limit lives here, so a bad field is refused with 422 before any work, and the message names
the field: ``k`` in 1..50, queries of 1..2,000 characters (blank refused), at most 20 chat messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from rag.corpus.manifest import ARXIV_ID_RE

MAX_K = 50
Query = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
RetrieverName = Literal["dense", "bm25", "hybrid", "rerank", "multi-query", "hyde"]
#: extractive, a registered model or provider:model (endpoint model ids can be long)
Answerer = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Strict(BaseModel):
    """A request body as the OpenAPI document states it: no unknown field and no coercion (a
    ``"5"`` or ``5.0`` for an integer, a ``"true"`` for a boolean is refused with 422)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class SearchRequest(_Strict):
    query: Query = Field(description="What to search for.")
    k: int = Field(5, ge=1, le=MAX_K, description="Hits to return.")
    retriever: RetrieverName = Field("hybrid", description="One of the report's six retrievers.")
    per_paper_cap: int | None = Field(None, ge=1, le=MAX_K, description="Max hits per paper.")


class _AnswerOptions(_Strict):
    k: int = Field(5, ge=1, le=MAX_K, description="Chunks retrieved for the context.")
    retriever: RetrieverName = Field("hybrid", description="Retriever fetching the context.")
    answerer: Answerer = Field(
        "extractive",
        description="extractive (no model), smollm2-135m, a model from `rag models`, or "
        "provider:model (ollama:NAME, openai-compatible:NAME, openai:ID, ...).",
    )
    judge: bool = Field(False, description="Judge every claim with the offline judge.")
    stream: bool = Field(False, description="Answer as server-sent events.")


class AskRequest(_AnswerOptions):
    question: Query = Field(description="The question.")


class ChatMessage(_Strict):
    role: Literal["user", "assistant"]
    content: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4000)]


class ChatRequest(_AnswerOptions):
    messages: list[ChatMessage] = Field(min_length=1, max_length=20)
    bypass_rewrite: bool = Field(False, description="Retrieve with the last message as typed.")
    rewrite_model: Answerer | None = Field(
        None, description="Rewrite with this LLM (e.g. smollm2-135m); None: the rule rewriter."
    )

    @field_validator("messages")
    @classmethod
    def _last_is_user(cls, v: list[ChatMessage]) -> list[ChatMessage]:
        if v and v[-1].role != "user":
            raise ValueError("the last message must be the user's question")
        return v


class IngestRequest(_Strict):
    arxiv_id: Annotated[str, StringConstraints(strip_whitespace=True, max_length=40)] = Field(
        pattern=ARXIV_ID_RE.rstrip("$") + r"(v[1-9]\d*)?$",
        description="An arXiv id (e.g. 1908.10084), optionally versioned.",
    )


class Hit(BaseModel):
    chunk_id: str
    arxiv_id: str
    title: str
    page: int
    section: str
    score: float
    text: str


class SearchResponse(BaseModel):
    query: str
    retriever: str
    hits: list[Hit]
    latency_ms: float


class Citation(BaseModel):
    n: int
    chunk_id: str
    arxiv_id: str
    title: str
    page: int
    section: str
    quote: str
    cited: bool


class AskResponse(BaseModel):
    query: str
    retriever: str
    answerer: str
    answer: str
    refused: bool
    citations: list[Citation]
    unknown_citations: list[int]
    judgement: dict[str, Any] | None
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_ms: dict[str, float]


class ChatResponse(AskResponse):
    rephrased_query: str
    rewritten: bool
    rewriter: str
    rewrite_reason: str


class RetrievalEvent(BaseModel):
    """The first server-sent event of a streamed answer: the numbered sources (none cited yet)."""

    sources: list[Citation]


class ChatRetrievalEvent(RetrievalEvent):
    rephrased_query: str
    rewritten: bool
    rewriter: str
    rewrite_reason: str


class TokenEvent(BaseModel):
    """One word of the answer (with its leading space after the first)."""

    text: str


class CitationsEvent(BaseModel):
    citations: list[Citation]
    refused: bool


class ErrorResponse(BaseModel):
    """Every error the service answers with (4xx and 5xx), from the app and the guard alike."""

    error: str = Field(description="The kind of error, e.g. 'invalid request', 'rate limited'.")
    detail: str = Field(
        description="What was wrong (a bad field is named first); keys and local paths scrubbed."
    )


class NotReady(ErrorResponse):
    """``GET /ready`` before the index and models are loaded (503)."""

    ready: Literal[False] = False
    cause: str = Field(description="What is loading, or why loading failed.")


class Ready(BaseModel):
    ready: Literal[True] = True
    papers: int
    chunks: int


class Health(BaseModel):
    status: Literal["ok"]


class ServedPaperOut(BaseModel):
    arxiv_id: str
    title: str
    category: str = Field(description="arXiv primary category ('' for an uploaded paper).")
    source: Literal["profile", "arxiv", "upload"]
    n_chunks: int
    added_at: str | None


class PapersResponse(BaseModel):
    n_papers: int
    n_chunks: int
    papers: list[ServedPaperOut]


class JobOut(BaseModel):
    """An ingest job (``POST /ingest`` answers 202 with it; ``GET /ingest/{job_id}`` reports it)."""

    job_id: str
    paper_id: str
    status: Literal["queued", "running", "done", "failed"]
    stage: Literal["queued", "fetching", "parsing", "chunking", "embedding", "committing", "done"]
    added_chunks: int
    detail: str
    created: float
    finished: float | None
