"""The HTTP service: FastAPI over :class:`rag.serve.engine.Engine` (OpenAPI at ``/docs``).

:func:`create_app` takes an injected lab (tests) or loads one in the app's lifespan, on a thread,
so ``/health`` answers at once and ``/ready`` says 503 with its cause ("index loading", "model
loading") until everything is loaded; nothing loads at import. Endpoints run on the thread pool
(retrieval and models are blocking).

Every error, from the app or the guard, is one model, :class:`rag.serve.models.ErrorResponse`
(``{error, detail}``, text scrubbed of keys and absolute paths), and each route declares every
status code it can answer with (:data:`ERRORS`), so a client generated from ``/openapi.json``
handles them; FastAPI's default 422 schema (``detail`` a list) is removed from the document since
the service never sends it.

The document states what the service enforces, so a request it allows is never refused: the
model-name and retriever fields carry the names this deployment runs
(:class:`rag.serve.offer.ModelOffer`, read at start and checked in each route), and
``POST /ingest``'s 202 links to ``GET /ingest/{job_id}`` with the job's id (an OpenAPI link,
which stateful clients and fuzzers follow).

Streaming (``stream: true``) sends server-sent events: ``retrieval`` (the numbered sources), then
``token`` events, then ``citations`` and ``done``. No answerer here generates token by token (the
local model and the API clients return whole completions, and the extractive answerer has no
tokens), so the ``token`` events carry the finished answer word by word; a client sees the
sources before the answer is written, which is where the waiting is.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag.errors import ConfigError, LLMError, ProviderUnavailable, RagError, RetrievalError
from rag.llm.errors import RetriesExhausted, UnusableReply
from rag.serve import models as m
from rag.serve.config import LabSettings, ServeSettings
from rag.serve.desk import Desk, UnknownPaperError
from rag.serve.engine import ChoiceError, Engine, load_lab
from rag.serve.guard import Guard, scrub
from rag.serve.ingest_routes import INGEST_LINK, add_ingest_routes
from rag.serve.jobs import IngestWorker
from rag.serve.offer import ModelOffer
from rag.serve.paper_routes import add_paper_routes
from rag.serve.statuses import ERRORS, MODEL_FAILED, NEEDS_LAB, WITH_BODY, error_responses
from rag.serve.warm import RETRY_AFTER_S, Bounded, StillLoading, StillRunning

log = logging.getLogger(__name__)
API_KEY_ENV = "RAG_API_KEY"


#: The server-sent events of ``/ask`` and ``/chat`` with ``stream: true``, in order, and the
#: model of each one's JSON ``data`` (``done``: the route's JSON response).
SSE_EVENTS = (
    ("retrieval", "the numbered sources, before the answer is written"),
    ("token", "the answer, word by word"),
    ("citations", "which sources the answer cites, and whether it declined"),
    ("done", "the whole answer, as the JSON response has it"),
    ("error", "answering failed after the stream started (replaces the rest)"),
)


def sse_response(retrieval: type[BaseModel], done: type[BaseModel]) -> dict[str, Any]:
    """The ``text/event-stream`` half of a 200 answer: each event an ``{event, data}`` object
    whose ``data`` is JSON of the event's model (OpenAPI 3.1: ``schema`` describes one event)."""
    data = {"retrieval": retrieval, "token": m.TokenEvent, "citations": m.CitationsEvent,
            "done": done, "error": m.ErrorResponse}  # fmt: skip
    events = [
        {
            "type": "object",
            "description": what,
            "required": ["event", "data"],
            "properties": {
                "event": {"const": name},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {"$ref": f"#/components/schemas/{data[name].__name__}"},
                },
            },
        }
        for name, what in SSE_EVENTS
    ]
    return {
        "description": (
            "The answer as JSON, or with stream: true as server-sent events: "
            + ", then ".join(name for name, _ in SSE_EVENTS[:4])
            + "; error replaces the rest when answering fails after the stream has started."
        ),
        "content": {"text/event-stream": {"schema": {"oneOf": events}}},
    }


def answer_route(retrieval: type[BaseModel], done: type[BaseModel]) -> dict[str, Any]:
    """What an answering route (``/ask``, ``/chat``) declares: ``done`` as its JSON body, or the
    stream of :func:`sse_response`, and the errors of a request that runs a model."""
    return {
        "response_model": done,
        "responses": {
            200: sse_response(retrieval, done),
            **error_responses(*WITH_BODY, MODEL_FAILED),
        },
    }


#: Models only the event stream refers to (FastAPI adds those of the routes).
SSE_MODELS = (m.RetrievalEvent, m.ChatRetrievalEvent, m.TokenEvent, m.CitationsEvent)


#: The request fields naming a model: (schema, property, takes ``extractive``).
MODEL_FIELDS = (
    ("AskRequest", "answerer", True),
    ("ChatRequest", "answerer", True),
    ("ChatRequest", "rewrite_model", False),
)


def _state_offer(schema: dict[str, Any], offer: ModelOffer) -> None:
    """Replace the model-name fields' free text with the names ``offer`` takes, and the
    retrievers with those it runs."""
    schemas = schema["components"]["schemas"]
    for model in ("SearchRequest", "AskRequest", "ChatRequest"):
        field = schemas[model]["properties"]["retriever"]
        keep = {k: v for k, v in field.items() if k in ("default", "description", "title")}
        schemas[model]["properties"]["retriever"] = {**offer.retriever_schema(), **keep}
    for model, prop, answerer in MODEL_FIELDS:
        field = schemas[model]["properties"][prop]
        nullable = any(b.get("type") == "null" for b in field.get("anyOf", []))
        named = offer.schema(answerer, nullable=nullable)
        keep = {k: v for k, v in field.items() if k in ("default", "description", "title")}
        schemas[model]["properties"][prop] = {**named, **keep}
    for param in schema["paths"]["/papers/{arxiv_id}/summary"]["get"]["parameters"]:
        if param["name"] == "model":
            param["schema"] = offer.schema(answerer=True)


def _finish_document(schema: dict[str, Any], offer: ModelOffer) -> dict[str, Any]:
    """Add the event models to the document, state the model names ``offer`` takes and the
    ingest link, and drop FastAPI's HTTPValidationError (added for every route with
    parameters): routes that can answer 422 declare :class:`ErrorResponse`."""
    _, defs = models_json_schema(
        [(model, "serialization") for model in SSE_MODELS],
        ref_template="#/components/schemas/{model}",
    )
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, body in defs.get("$defs", {}).items():
        schemas.setdefault(name, body)
    ref = "#/components/schemas/HTTPValidationError"
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            resp = op.get("responses", {})
            body = resp.get("422", {}).get("content", {}).get("application/json", {})
            if body.get("schema", {}).get("$ref") == ref:
                del resp["422"]
    for name in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(name, None)
    _state_offer(schema, offer)
    schema["paths"]["/ingest"]["post"]["responses"]["202"]["links"] = INGEST_LINK
    return schema


class _State:
    """What the lifespan loads, and why it is not ready yet."""

    def __init__(self) -> None:
        self.lab: Engine | None = None
        self.cause = "starting"
        self.worker: IngestWorker | None = None
        self.desk: Desk | None = None


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc if p != "body") or "body"


def _problem(e: dict[str, Any]) -> str:
    """One invalid field: its name, what is wrong, and the value sent (a scalar, shortened)."""
    text = f"{_field(e.get('loc', ()))}: {e.get('msg', '')}"
    value = e.get("input")
    if e.get("type") != "missing" and isinstance(value, str | int | float | bool):
        shown = repr(value)
        text += f" (got {shown[:60] + '…' if len(shown) > 60 else shown})"
    return text


def rag_error(exc: RagError) -> tuple[int, str, str, dict[str, str] | None]:
    """The status, error name, detail and headers of a :class:`RagError` a route raised.

    A bad request field is a 422; a model's unusable reply a 502 naming the model and the cause
    but never the reply; an unreachable model endpoint a 502 naming the endpoint; a model not
    available here a 503 with ``Retry-After``; any other model failure a 502 naming its type;
    anything else a 500 naming its type only. A component still in its first load, or a model
    call still running, past its bounded wait (:mod:`rag.serve.warm`) is a 503 with
    ``Retry-After``.
    """
    if isinstance(exc, ConfigError | RetrievalError):
        return 422, type(exc).__name__, str(exc), None
    if isinstance(exc, StillLoading):
        err = "still running" if isinstance(exc, StillRunning) else "still loading"
        return 503, err, str(exc), {"Retry-After": str(RETRY_AFTER_S)}
    if isinstance(exc, UnusableReply):
        return 502, "unusable model reply", exc.public, None
    if isinstance(exc, RetriesExhausted):
        where = exc.endpoint or "the provider's API"
        return 502, "model endpoint unreachable", f"could not reach {where}: {exc}", None
    if isinstance(exc, ProviderUnavailable):
        return 503, "model unavailable", str(exc), {"Retry-After": str(RETRY_AFTER_S)}
    if isinstance(exc, LLMError):
        return 502, "model failed", f"the model call failed ({type(exc).__name__})", None
    return 500, "internal error", type(exc).__name__, None


def create_app(
    lab: Engine | None = None,
    *,
    settings: LabSettings | None = None,
    serve: ServeSettings | None = None,
    api_key: str | None = None,
    loader: Callable[[Callable[[str], None]], Engine] | None = None,
) -> FastAPI:
    """The service. ``lab`` injected: ready at once; else loaded in the lifespan, on a thread, by
    ``loader(status)`` (default :func:`rag.serve.engine.load_lab` over ``settings``).

    ``api_key`` defaults to ``$RAG_API_KEY`` (unset or empty: no key required).
    """
    serve = serve or ServeSettings()
    profile = lab.settings if lab is not None else settings or LabSettings()
    offer = ModelOffer.here(profile)
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")
    secrets = (key,) if key else ()
    state = _State()
    bounded = Bounded(serve.model_call_timeout_s)

    def start_worker(the_lab: Engine) -> None:
        state.worker = IngestWorker(
            lambda: the_lab.index,
            manifest_path=the_lab.settings.manifest_path,
            pdf_mirror=the_lab.settings.pdf_mirror,
            allow_network=serve.allow_network,
        )
        state.desk = Desk(the_lab)
        state.lab, state.cause = the_lab, "ready"

    def load() -> None:
        try:

            def status(s: str) -> None:
                state.cause = s

            if loader is not None:
                start_worker(loader(status))
            else:
                start_worker(load_lab(settings or LabSettings(), serve, status))
            log.info("ready: %d papers, %d chunks", len(state.lab.index.snapshot.papers),
                     state.lab.index.snapshot.n_chunks)  # fmt: skip
        except Exception as e:  # reported by /ready; the process stays up for /health
            state.cause = f"load failed: {scrub(str(e), secrets)}"
            log.error("loading failed: %s", scrub(str(e), secrets))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if lab is not None:
            start_worker(lab)
        else:
            threading.Thread(target=load, name="load", daemon=True).start()
        yield

    app = FastAPI(
        title="arXiv RAG Lab",
        description="Search, ask and chat over the pinned corpus with the report's components.",
        lifespan=lifespan,
    )
    app.state.lab_state = state

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _finish_document(FastAPI.openapi(app), offer)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    def error(status: int, err: str, detail: str, headers=None) -> JSONResponse:
        body = m.ErrorResponse(error=err, detail=scrub(detail, secrets)).model_dump()
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errs):
            return error(400, "malformed JSON", "the request body is not valid JSON")
        detail = "; ".join(_problem(e) for e in errs)
        return error(422, "invalid request", detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not found", 405: "method not allowed", 503: "not ready"}
        return error(exc.status_code, kind.get(exc.status_code, "http error"), str(exc.detail),
                     getattr(exc, "headers", None))  # fmt: skip

    @app.exception_handler(UnknownPaperError)
    async def _unknown_paper(request: Request, exc: UnknownPaperError) -> JSONResponse:
        return error(404, "unknown paper", str(exc))

    @app.exception_handler(ChoiceError)
    async def _choice(request: Request, exc: ChoiceError) -> JSONResponse:
        return error(422, "invalid request", f"{exc.field}: {exc}")

    @app.exception_handler(RagError)
    async def _rag(request: Request, exc: RagError) -> JSONResponse:
        status, err, detail, headers = rag_error(exc)
        if status == 500:
            log.error("internal error on %s: %s", request.url.path, scrub(str(exc), secrets))
        return error(status, err, detail, headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return error(500, "internal error", type(exc).__name__)

    def need_lab() -> Engine:
        if state.lab is None:
            raise StarletteHTTPException(503, f"not ready: {state.cause}")
        return state.lab

    def need_desk() -> Desk:
        need_lab()
        if state.desk is None:
            raise RuntimeError("the lab is loaded but its desk is not")
        return state.desk

    @app.get("/health", response_model=m.Health)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/ready",
        response_model=m.Ready,
        responses={
            **error_responses(*NEEDS_LAB),
            503: {"model": m.NotReady, "description": ERRORS[503]},
        },
    )
    def ready() -> Any:
        lab_now = state.lab
        if lab_now is None:
            cause = scrub(state.cause, secrets)
            body = m.NotReady(error="not ready", detail=cause, cause=cause)
            return JSONResponse(body.model_dump(), status_code=503)
        snap = lab_now.index.snapshot
        return {"ready": True, "papers": len(snap.papers), "chunks": snap.n_chunks}

    @app.post("/search", response_model=m.SearchResponse, responses=error_responses(*WITH_BODY))
    def search(req: m.SearchRequest) -> Any:
        the_lab = need_lab()
        offer.check_retriever(req.retriever)
        hits, meta = the_lab.search(req.query, req.k, req.retriever, req.per_paper_cap)
        return {"query": req.query, "hits": hits, **meta}

    def answer(query: str, req: m.AskRequest | m.ChatRequest, extra: dict[str, Any]) -> Any:
        the_lab = need_lab()
        offer.check_retriever(req.retriever)
        offer.check("answerer", req.answerer)
        kw = {"k": req.k, "retriever": req.retriever, "answerer": req.answerer, "judge": req.judge}
        if not req.stream:
            what = f"answering with {req.answerer}"
            return {**bounded.run(lambda: the_lab.ask(query, **kw), what).to_dict(), **extra}
        events = the_lab.ask_events(query, **kw)
        first = next(events)  # a bad answerer or retriever fails here, as JSON, not mid-stream
        return StreamingResponse(
            _sse(first, events, extra, secrets), media_type="text/event-stream"
        )

    @app.post("/ask", **answer_route(m.RetrievalEvent, m.AskResponse))
    def ask(req: m.AskRequest) -> Any:
        return answer(req.question, req, {})

    @app.post("/chat", **answer_route(m.ChatRetrievalEvent, m.ChatResponse))
    def chat(req: m.ChatRequest) -> Any:
        desk = need_desk()
        offer.check_retriever(req.retriever)
        offer.check("answerer", req.answerer)
        offer.check("rewrite_model", req.rewrite_model, answerer=False)
        msgs = [{"role": x.role, "content": x.content} for x in req.messages]
        # the desk's rewrite, then the answer as /ask gives it (a stream, or JSON), each step
        # bounded on its own (Desk.chat is the same two steps, unbounded and unstreamed)
        extra = bounded.run(
            lambda: desk.rewrite(msgs, rewrite_model=req.rewrite_model,
                                 bypass_rewrite=req.bypass_rewrite),
            f"rewriting with {req.rewrite_model or 'the rule rewriter'}",
        )  # fmt: skip
        return answer(extra["rephrased_query"], req, extra)

    add_ingest_routes(app, need_lab, lambda: state.worker, error, secrets)
    add_paper_routes(app, need_desk, offer, bounded)

    static = resources.files("rag.serve") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html")

    guarded = Guard(
        app,
        api_key=key or None,
        per_minute=serve.rate_limit_per_minute,
        burst=serve.rate_burst,
        max_body=serve.max_body_bytes,
        max_upload=serve.max_upload_bytes,
    )
    guarded.fastapi = app  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def _sse(
    first: tuple[str, Any],
    events: Iterator[tuple[str, Any]],
    extra: dict[str, Any],
    secrets: tuple[str, ...],
):
    def ev(name: str, data: Any) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    yield ev("retrieval", {"sources": first[1], **extra})
    try:
        for kind, payload in events:
            if kind == "answer":
                for i, word in enumerate(payload.text.split(" ")):
                    yield ev("token", {"text": word if i == 0 else " " + word})
            elif kind == "result":
                d = payload.to_dict()
                yield ev("citations", {"citations": d["citations"], "refused": d["refused"]})
                yield ev("done", {**d, **extra})
    except Exception as e:  # the status line is sent already: report the failure as an event
        log.exception("stream failed")
        yield ev("error", {"error": type(e).__name__, "detail": scrub(str(e), secrets)})
