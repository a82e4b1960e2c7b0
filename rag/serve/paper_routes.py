"""The paper desk's HTTP routes: ``GET /papers`` and ``/papers/{arxiv_id}`` with its citations,
related papers and summary, each a face over one :class:`rag.serve.desk.Desk` method.

:func:`add_paper_routes` adds them to the app (on the app itself, so its route list names each
one), given how the app reaches its desk (503 until the lab is loaded), the deployment's model
offer and the bounded wait for a model call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query

from rag.serve import desk_models as dm
from rag.serve import models as m
from rag.serve.desk import Desk, RelatedMethod
from rag.serve.offer import ModelOffer
from rag.serve.statuses import MODEL_FAILED, NEEDS_LAB, error_responses
from rag.serve.warm import Bounded


def add_paper_routes(
    app: FastAPI, need_desk: Callable[[], Desk], offer: ModelOffer, bounded: Bounded
) -> None:
    """Add the routes under ``/papers`` to ``app``; ``need_desk()`` returns the loaded desk or
    raises the 503."""

    @app.get("/papers", response_model=m.PapersResponse, responses=error_responses(*NEEDS_LAB))
    def papers() -> Any:
        return need_desk().list_papers()

    paper_codes = error_responses(*NEEDS_LAB, 404)
    query_codes = error_responses(*NEEDS_LAB, 404, 422)

    @app.get("/papers/{arxiv_id}", response_model=dm.PaperOut, responses=paper_codes)
    def paper(arxiv_id: str) -> Any:
        return need_desk().get_paper(arxiv_id)

    @app.get("/papers/{arxiv_id}/citations", response_model=dm.CitationsOut,
                responses=paper_codes)  # fmt: skip
    def paper_citations(arxiv_id: str) -> Any:
        return need_desk().citations(arxiv_id)

    @app.get("/papers/{arxiv_id}/related", response_model=dm.RelatedOut, responses=query_codes)
    def paper_related(
        arxiv_id: str,
        k: Annotated[int, Query(ge=1, le=m.MAX_K, description="Related papers to return.")] = 10,
        method: Annotated[RelatedMethod, Query(description="fusion: RRF of text and co-citation.")]
        = "fusion",
    ) -> Any:  # fmt: skip
        return need_desk().related(arxiv_id, k=k, method=method)

    summary_codes = error_responses(*NEEDS_LAB, 404, 422, MODEL_FAILED)

    @app.get("/papers/{arxiv_id}/summary", response_model=dm.SummaryOut,
                responses=summary_codes)  # fmt: skip
    def paper_summary(
        arxiv_id: str,
        sentences: Annotated[int, Query(ge=1, le=20, description="At most this many.")] = 5,
        model: Annotated[str | None, Query(min_length=1, max_length=200,
                                           description="A chat model; none: extractive.")] = None,
    ) -> Any:  # fmt: skip
        desk = need_desk()
        offer.check("model", model)
        return bounded.run(
            lambda: desk.summarize(arxiv_id, sentences=sentences, model=model),
            f"summarising with {model or 'the extractive summariser'}",
        )
