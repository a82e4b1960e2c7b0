"""The status codes each HTTP route declares: every error status the service answers with
(:data:`ERRORS`), the sets a route adds up from, and their OpenAPI ``responses`` entries, so a
client generated from ``/openapi.json`` handles every one."""

from __future__ import annotations

from typing import Any

from rag.serve import models as m

#: Every error status the service answers with, and when.
ERRORS: dict[int, str] = {
    400: "The request body is not valid JSON.",
    401: "The X-API-Key header is missing or wrong (only when the service has a key).",
    404: "No ingest job or served paper has this id.",
    413: "The request body is over the limit (JSON bodies and PDF uploads have their own).",
    422: "A field is invalid or names an unavailable component; detail names the field first.",
    429: "Too many requests from this client; Retry-After says when to retry.",
    500: "An internal error; detail names its type only.",
    502: "A model answered unusably (detail names the model and the cause, never its output) "
    "or its endpoint could not be reached (detail names the endpoint).",
    503: "Not ready: the index or a model is still loading, or a model is not available here; "
    "Retry-After says when to retry.",
}
#: The guard's codes, on every route but /health: rate limit and key.
GUARDED = (401, 429)
#: Codes of a route that needs the loaded lab.
NEEDS_LAB = (*GUARDED, 500, 503)
#: Codes of a route with a JSON request body.
WITH_BODY = (*NEEDS_LAB, 400, 413, 422)
#: The code a route that runs a chat model adds: the model's reply or endpoint failed.
MODEL_FAILED = 502


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries declaring :class:`ErrorResponse` for ``codes``."""
    return {c: {"model": m.ErrorResponse, "description": ERRORS[c]} for c in sorted(codes)}
