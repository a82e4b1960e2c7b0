"""The ingest routes: ``POST /ingest`` (an arXiv id as JSON, or a PDF upload) queues a job on the
:class:`rag.serve.jobs.IngestWorker`; ``GET /ingest/{job_id}`` reports it.

:func:`add_ingest_routes` adds them to the app (on the app itself, so its route list names
each one). The 202
links to the job's status (:data:`INGEST_LINK`, an OpenAPI link the app adds to the document).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from rag.errors import RagError
from rag.serve import models as m
from rag.serve.guard import scrub
from rag.serve.jobs import IngestWorker
from rag.serve.statuses import NEEDS_LAB, WITH_BODY, error_responses

#: The job a 202 of ``POST /ingest`` queued, as an OpenAPI link to its status.
INGEST_LINK = {
    "IngestJob": {
        "operationRef": "#/paths/~1ingest~1{job_id}/get",
        "parameters": {"job_id": "$response.body#/job_id"},
        "description": "The status of the job just queued.",
    }
}

#: ``POST /ingest`` takes either JSON or a multipart PDF upload (parsed by the route itself).
INGEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {"schema": m.IngestRequest.model_json_schema()},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "file": {
                        "type": "string",
                        "format": "binary",
                        "description": "A PDF (another file is taken, and its job fails).",
                    },
                    # no type: a form field is text on the wire whatever it spells ("null",
                    # "5"), so no value of it can be refused for its type
                    "title": {"description": "Shown for the paper (form text)."},
                },
            }
        },
    },
}


def add_ingest_routes(
    app: FastAPI,
    need_lab: Callable[[], Any],
    worker: Callable[[], IngestWorker | None],
    error: Callable[..., JSONResponse],
    secrets: tuple[str, ...],
) -> None:
    """Add the ingest routes to ``app``. ``need_lab()`` raises the 503 until the lab is loaded;
    ``worker()`` is the ingest worker (None before the load); ``error(status, err, detail)`` is
    the app's :class:`rag.serve.models.ErrorResponse`; ``secrets`` are scrubbed from a job's
    detail."""

    @app.post(
        "/ingest",
        status_code=202,
        response_model=m.JobOut,
        responses=error_responses(*WITH_BODY),
        openapi_extra={"requestBody": INGEST_BODY},
    )
    async def ingest(request: Request) -> Any:
        need_lab()
        the_worker = worker()
        if the_worker is None:
            raise RuntimeError("the lab is loaded but the ingest worker is not")
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("multipart/form-data"):
            form = await request.form()
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                return error(422, "invalid request", "file: a PDF upload is required")
            # any file is taken (the document cannot state "a PDF" of bytes); the job refuses a
            # file that is not one, as it does an arXiv id that is not pinned
            job = the_worker.submit_pdf(await upload.read(), str(form.get("title") or ""))
        else:
            try:
                req = m.IngestRequest.model_validate_json(await request.body())
            except ValidationError as e:
                raise RequestValidationError(e.errors()) from None
            try:
                job = the_worker.submit_arxiv(req.arxiv_id)
            except RagError as e:
                return error(422, "invalid request", f"arxiv_id: {e}")
        return JSONResponse(job.to_dict(), status_code=202)

    @app.get(
        "/ingest/{job_id}", response_model=m.JobOut, responses=error_responses(*NEEDS_LAB, 404)
    )
    def ingest_status(job_id: str) -> Any:
        need_lab()
        the_worker = worker()
        job = the_worker.jobs.get(job_id) if the_worker else None
        if job is None:
            return error(404, "unknown job", f"no ingest job {job_id[:40]!r}")
        return {**job.to_dict(), "detail": scrub(job.detail, secrets)}
