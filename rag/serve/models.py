"""Request and response models of the service (pydantic: validation, limits, OpenAPI at /docs).

Every limit lives here, so a bad field is refused with 422 before any work, and the message names
the field: ``k`` in 1..50, queries of 1..2,000 characters (blank refused), at most 20 chat messages.

Each request model's JSON Schema states exactly what its validation enforces, so a request the
document allows is never refused (the fuzz test sends such requests and checks): a whole number
written ``5.0`` is an integer in JSON Schema, so it is taken as ``5``; a blank query is refused by a
``pattern`` (a character Python's ``str.strip`` keeps), and lengths count the text as sent; the
last chat message being the user's is an ``anyOf`` over the allowed lengths. Which model names a
request may give depends on the deployment and is stated by :mod:`rag.serve.offer`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from rag.corpus.manifest import ARXIV_ID_RE

MAX_K = 50
MAX_MESSAGES = 20
#: Every character ``str.isspace`` counts (what ``str.strip`` removes), as regex ranges.
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: Holds a character that is not white space (the same in Python, Rust and ECMA-262 regex).
NOT_BLANK = f"[^{_SPACE}]"


def _whole(value: Any) -> Any:
    """A float with no fraction as the int it equals (JSON Schema counts ``5.0`` an integer);
    anything else unchanged, for the strict integer check to refuse (``"5"``, ``5.5``, ``true``)."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


#: An integer field: an int, or a float equal to one.
Whole = Annotated[int, BeforeValidator(_whole)]


def text(max_length: int) -> Any:
    """A non-blank text field of at most ``max_length`` characters as sent, stripped for use."""
    return Annotated[
        str,
        StringConstraints(min_length=1, max_length=max_length, pattern=NOT_BLANK),
        AfterValidator(str.strip),
    ]


Query = text(2000)
RetrieverName = Literal["dense", "bm25", "hybrid", "rerank", "multi-query", "hyde"]
#: extractive, a registered model or provider:model (endpoint model ids can be long)
Answerer = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Strict(BaseModel):
    """A request body as the OpenAPI document states it: no unknown field and no coercion (a
    ``"5"`` or ``5.5`` for an integer, a ``"true"`` for a boolean is refused with 422; ``5.0`` is
    the integer 5, as in JSON Schema)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class SearchRequest(_Strict):
    query: Query = Field(description="What to search for.")
    k: Whole = Field(5, ge=1, le=MAX_K, description="Hits to return.")
    retriever: RetrieverName = Field(
        "hybrid", description="A retriever of the report that runs here (hyde needs an LLM)."
    )
    per_paper_cap: Annotated[int, Field(ge=1, le=MAX_K), BeforeValidator(_whole)] | None = Field(
        None, description="Max hits per paper."
    )


class _AnswerOptions(_Strict):
    k: Whole = Field(5, ge=1, le=MAX_K, description="Chunks retrieved for the context.")
    retriever: RetrieverName = Field(
        "hybrid", description="The retriever fetching the context (one that runs here)."
    )
    answerer: Answerer = Field(
        "extractive",
        description="extractive (no model), or a chat model this service runs: a name listed "
        "here, or provider:MODEL for a provider whose pattern is listed (which ones depends on "
        "the deployment's keys and endpoints).",
    )
    judge: bool = Field(False, description="Judge every claim with the offline judge.")
    stream: bool = Field(False, description="Answer as server-sent events.")


class AskRequest(_AnswerOptions):
    question: Query = Field(description="The question.")


class ChatMessage(_Strict):
    role: Literal["user", "assistant"]
    content: text(4000)  # type: ignore[valid-type]


def _last_is_user(n: int) -> dict[str, Any]:
    """``n`` messages, the last one the user's (JSON Schema has no "last item", so one branch of
    an ``anyOf`` per length)."""
    user = {"type": "object", "properties": {"role": {"const": "user"}}, "required": ["role"]}
    return {"minItems": n, "maxItems": n, "prefixItems": [{}] * (n - 1) + [user]}


class ChatRequest(_AnswerOptions):
    messages: list[ChatMessage] = Field(
        min_length=1,
        max_length=MAX_MESSAGES,
        description="The conversation so far; the last message is the user's question.",
        json_schema_extra={"anyOf": [_last_is_user(n) for n in range(1, MAX_MESSAGES + 1)]},
    )
    bypass_rewrite: bool = Field(False, description="Retrieve with the last message as typed.")
    rewrite_model: Answerer | None = Field(
        None,
        description="Rewrite with this LLM (e.g. smollm2-135m; the names this service runs, as "
        "for answerer); None: the rule rewriter.",
    )

    @field_validator("messages")
    @classmethod
    def _last_is_user(cls, v: list[ChatMessage]) -> list[ChatMessage]:
        if v and v[-1].role != "user":
            raise ValueError("the last message must be the user's question")
        return v


class IngestRequest(_Strict):
    arxiv_id: Annotated[str, StringConstraints(max_length=40)] = Field(
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
