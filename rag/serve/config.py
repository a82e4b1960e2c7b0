"""What the service answers with: the report's own components and defaults, read from a profile.

The service must answer as the write-up says, so its settings are not a second set of defaults:
:func:`profile_settings` reads the notebooks' ``parameters`` cells (their literal defaults) and
applies ``params/<profile>.yaml`` on top, exactly as the report runner does. Retrieval settings come
from ``04_retrieval`` (chunking, embedder, pools, reranker, variants), answering settings from
``05_faithfulness`` (retriever, k, context order, token budget, per-paper cap, local model).
:class:`ServeSettings` adds what only a service has: limits, the API key's presence, rate limits.
"""

from __future__ import annotations

import ast
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rag.errors import ConfigError
from rag.text.chunk import ChunkSettings, chunk_settings

#: Notebook parameters the lab takes, by the notebook that owns them.
RETRIEVAL_KEYS = (
    "manifest_path", "paper_ids", "max_papers", "pdf_mirror", "chunk_strategy", "max_tokens",
    "overlap_tokens", "embedder", "reranker", "rerank_pool", "hybrid_pool", "n_variants",
    "variants", "llm_model",
)  # fmt: skip
ANSWER_KEYS = (
    "retriever", "k", "context_order", "context_token_budget", "per_paper_cap", "local_model",
    "local_max_tokens",
)  # fmt: skip


class LabSettings(BaseModel):
    """The components' settings (defaults = the notebooks' defaults of the default profile)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str = "default"
    manifest_path: str = "data/manifest.jsonl"
    paper_ids: tuple[str, ...] = ()
    max_papers: int = Field(0, ge=0)
    pdf_mirror: str = ""
    chunk_strategy: str = "fixed"
    max_tokens: int = Field(254, ge=8)
    overlap_tokens: int = Field(32, ge=0)
    embedder: str = "minilm"
    reranker: str = "fuse:e5-small"
    rerank_pool: int = Field(30, ge=1)
    hybrid_pool: int = Field(100, ge=1)
    n_variants: int = Field(2, ge=0)
    variants: str = "rules"
    llm_model: str = "smollm2-135m"
    retriever: str = "hybrid"
    k: int = Field(5, ge=1, le=50)
    context_order: str = "edges"
    context_token_budget: int = Field(1200, ge=1)
    per_paper_cap: int = Field(3, ge=1)
    local_model: str = "smollm2-135m"
    local_max_tokens: int = Field(128, ge=1)
    pdfs: str = Field("", description="A folder of PDFs served instead of the profile's corpus.")

    @model_validator(mode="after")
    def _check_chunking(self) -> LabSettings:
        self.chunking()  # a bad profile fails when it is loaded (ChunkError), not at indexing
        return self

    def chunk_fields(self) -> dict[str, Any]:
        """The chunk settings a profile sets, as notebook 04 names them (the served index's key)."""
        return {
            "strategy": self.chunk_strategy,
            "max_tokens": self.max_tokens,
            "overlap_tokens": self.overlap_tokens,
        }

    def chunking(self) -> ChunkSettings:
        """The chunk settings the report indexes with, typed: what every stage below receives."""
        return chunk_settings(self.chunk_fields())


class ServeSettings(BaseModel):
    """Limits and policies of the HTTP service (components' settings: :class:`LabSettings`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="JSON request body limit (413). The default holds the largest body the "
        "schema allows: 20 chat messages of 4,000 characters, each character escaped to at most "
        "12 bytes of JSON (a surrogate pair), about 0.97 MB.",
    )
    max_upload_bytes: int = Field(
        50 * 1024 * 1024, ge=1024, description="PDF upload limit on /ingest (413)."
    )
    model_load_timeout_s: float = Field(
        20.0,
        ge=0,
        description="Longest a request waits for a component's first load (reranker, judge, "
        "chat model; it loads on a background thread); past it the answer is a 503 with "
        "Retry-After while the load goes on.",
    )
    model_call_timeout_s: float = Field(
        60.0,
        ge=0,
        description="Longest a request that runs a chat model (an LLM answerer, rewriter or "
        "summary) waits for it; past it the answer is a 503 with Retry-After while the work "
        "goes on and its completions are cached, so the same request later is answered at once.",
    )
    max_k: int = Field(50, ge=1, le=1000, description="Largest k a client may ask for.")
    max_query_chars: int = Field(2000, ge=10, description="Longest query/question accepted.")
    max_messages: int = Field(20, ge=1, description="Most chat messages accepted.")
    rate_limit_per_minute: int = Field(
        600, ge=0, description="Requests per minute per API key or client IP (0: no limit)."
    )
    rate_burst: int = Field(60, ge=1, description="Requests a client may send at once.")
    allow_network: bool = Field(
        True, description="Ingest may download from arXiv (False: cache and mirror only)."
    )
    index_dir: str = Field(
        "", description="Folder of the served index ('': cache_dir('serve', <profile>-<key>))."
    )


def _literal(default: str, name: str) -> Any:
    try:
        return ast.literal_eval(default)
    except (ValueError, SyntaxError) as e:
        raise ConfigError(
            f"notebook parameter {name!r} has a non-literal default {default!r}"
        ) from e


def profile_settings(profile: str = "default", **overrides: Any) -> LabSettings:
    """:class:`LabSettings` of ``profile``: notebook defaults, then the profile's deltas, then
    ``overrides`` (e.g. ``paper_ids`` for a small served corpus).

    Raises:
        ConfigError: unknown profile or key (from :mod:`rag.report.profiles`).
    """
    from rag.report import profiles

    nbs = {p.stem: p for p in profiles.notebook_paths()}
    resolved = profiles.resolve_parameters(profile, f"outputs/{profile}")
    values: dict[str, Any] = {"profile": profile}
    for stem, keys in (("04_retrieval", RETRIEVAL_KEYS), ("05_faithfulness", ANSWER_KEYS)):
        if stem not in nbs:
            raise ConfigError(f"notebook {stem} not found; the service reads its parameters")
        declared = profiles.declared_parameters(nbs[stem])
        for key in keys:
            if key in declared:
                values[key] = _literal(declared[key]["default"], key)
            if key in resolved.get(stem, {}):
                values[key] = resolved[stem][key]
    values.update({k: v for k, v in overrides.items() if v not in (None, (), [])})
    if "paper_ids" in values:
        values["paper_ids"] = tuple(values["paper_ids"])
    return LabSettings(**values)
