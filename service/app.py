"""The service's ASGI app: routes, middleware stack and lifespan over one ServiceState, whatever engine is
behind it: every front-end process of `embedperf serve` builds it over its link to the engine process
(service/supervisor.py), the one-process layout and the in-process tests over an engine in the same process
(service/local_app.py). Nothing here imports torch.

Stack, outermost first: request ID + access log (service/access_log.py) -> API keys ->
admission, for POST /v1/embeddings and /rerank only (both service/admission.py) -> those two routes' handlers
(ServingPathMiddleware) -> FastAPI's own stack (app.middleware_stack: a serving request passes no FastAPI layer)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from modelcore.model_folder import weights_sha256
from service.access_log import RequestContextMiddleware
from service.admission import (
    EMBEDDINGS_PATH,
    RERANK_PATH,
    AdmissionMiddleware,
    ApiKeyMiddleware,
    key_is_valid,
)
from service.embed_route import embeddings, rerank, serve_route
from service.http_errors import Answer, send_bytes
from service.openai_api import error_body, request_body_schema
from service.rerank_api import RERANK_KIND, RERANK_SCORE, rerank_body_schema
from service.state import ServiceState

log = logging.getLogger("service.app")
Handler = Callable[[Scope, Receive], Awaitable[Answer]]
SERVING_ROUTES = {EMBEDDINGS_PATH: embeddings, RERANK_PATH: rerank}


class ServingPathMiddleware:
    """POST /v1/embeddings and /rerank straight to their handlers on the raw ASGI channel: they take the raw body
    and need no routing, dependencies, request or response objects, whose CPU a front end spends per request.
    The routes stay registered with FastAPI for the OpenAPI document and the 405 of other methods."""

    def __init__(self, app: ASGIApp, handlers: dict[str, Handler]) -> None:
        self.app = app
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        post = scope["type"] == "http" and scope["method"] == "POST"
        handler = self.handlers.get(scope["path"]) if post else None
        if handler is None:
            await self.app(scope, receive, send)
            return
        await send_bytes(send, *await handler(scope, receive))


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def build_app(state: ServiceState) -> FastAPI:
    """The service as an ASGI app over `state`; its lifespan starts (or reaches) the engine in the background,
    so /health answers at once and /ready once the engine is warm."""
    settings = state.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(state.prepare())
        try:
            yield
        finally:  # the server has stopped taking requests and waited (up to the grace) for those in flight
            task.cancel()  # a no-op once it is done
            await state.close(settings.shutdown_grace_s)

    # /docs and /redoc would load their scripts from a CDN: off. /openapi.json is served (with a key when set).
    # FastAPI's OpenTelemetry: off, or a tracer set up in the environment would add its cost to every request.
    app = FastAPI(title="embedperf reference embedding service", lifespan=lifespan, docs_url=None, redoc_url=None,
                  telemetry={"tracing": False, "metrics": False, "logs": False})  # fmt: skip
    app.state.service = state
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = error_body(str(exc.detail), "invalid_request_error", code)
        return _json(exc.status_code, body, dict(exc.headers or {}))  # keeps Allow on 405

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return _json(400, error_body(f"invalid request: {exc.errors()}", "invalid_request_error", "invalid_request"))

    def openapi() -> dict[str, Any]:
        """FastAPI's document plus the request-body schemas of the raw-body embeddings and rerank routes."""
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(title=app.title, version=app.version, routes=app.routes)
        dimension = state.model.dimension if state.model is not None else 4096
        names = sorted(state.served_names())
        schemas = {
            EMBEDDINGS_PATH: request_body_schema(settings.max_inputs, dimension, settings.max_input_chars, names),
            RERANK_PATH: rerank_body_schema(settings.max_inputs, settings.max_input_chars),
        }
        for path, schema in schemas.items():
            body = {"required": True, "content": {"application/json": {"schema": schema}}}
            document["paths"][path]["post"]["requestBody"] = body
        if state.model is not None:  # the dimension is known: the document is final
            app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
    _add_probe_routes(app, state)

    @app.get("/v1/models")
    async def models() -> Response:
        """The OpenAI models list: what a client may name in `model` (clients and detection ask it first)."""
        created = int(state.started_unix_s)
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "embedperf"}
            for name in sorted(state.served_names())
        ]
        return _json(200, {"object": "list", "data": data})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    # a bi-encoder score, not a cross-encoder's: named so that nobody mistakes it
    rerank_info = dict(path=RERANK_PATH, kind=RERANK_KIND, model=settings.model_name, score=RERANK_SCORE)

    @app.get("/info")
    async def info() -> Response:
        m = state.model
        if m is not None and state.weights is None:
            state.weights = await asyncio.to_thread(weights_sha256, m.path)
        return _json(
            200,
            {
                "model": settings.model_name,
                "fallback_model": settings.fallback_model_id(),
                "model_path": str(m.path) if m else settings.model,
                "dimension": m.dimension if m else None,
                "max_tokens": m.max_tokens if m else None,
                "pooling": m.pooling if m else None,
                "device": str(m.device) if m else settings.device,
                "devices": [spec.as_info() for spec in settings.device_specs()],
                "precision": settings.precision,
                "rerank": rerank_info,
                "config": settings.public_config(),
                "weights_sha256": state.weights or {},
                "versions": state.engine.versions(),
                "ready": state.ready,
                "pid": os.getpid(),
                "engine_pid": state.engine.process_id(),
                "http_workers": settings.front_end_count(),
                "started_unix_s": state.started_unix_s,
            },
        )

    @app.post(EMBEDDINGS_PATH, summary="Create embeddings (OpenAI-compatible)")
    async def create_embeddings() -> None:
        """Answered by ServingPathMiddleware, in front of FastAPI."""

    @app.post(RERANK_PATH, summary="Rank texts against a query (TEI-shaped; bi-encoder cosine score)")
    async def rerank_texts() -> None:
        """Answered by ServingPathMiddleware, in front of FastAPI."""

    # after every route and exception handler: FastAPI's stack copies the handlers when it is built
    serving: dict[str, Handler] = {path: partial(serve_route, state, handler=h) for path, h in SERVING_ROUTES.items()}
    stack: ASGIApp = ServingPathMiddleware(app.build_middleware_stack(), serving)
    stack = AdmissionMiddleware(stack, batcher=state.serving_batcher, deadline_ms=settings.deadline_ms)
    stack = ApiKeyMiddleware(stack, keys=settings.api_key_list()) if settings.api_key_list() else stack
    app.middleware_stack = RequestContextMiddleware(stack, state.access_log, on_done=state.count_request)
    return app


def _add_probe_routes(app: FastAPI, state: ServiceState) -> None:
    """/health and /ready read in-memory state only: they never wait on the queue, tokeniser or engine. With API
    keys set, /health says no more than liveness to a caller without one: its load figures and cache status
    are for operators (the same figures are in /metrics, behind the key)."""
    keys = [key.encode() for key in state.settings.api_key_list()]

    async def health(request: Request) -> dict[str, Any]:
        if keys and not key_is_valid(request.headers.get("authorization", "").encode("latin-1"), keys):
            return {"status": "ok"}
        batcher = state.batcher
        return {
            "status": "ok",
            "ready": state.ready and state.device_healthy(),
            "model": state.settings.model_name,
            "serving_fallback": bool(batcher and batcher.serving_fallback()),
            "device": state.settings.device,
            "busy_frac": round(batcher.busy_fraction(), 4) if batcher else 0.0,
            "device_busy_frac": state.engine.device_busy_fractions(),
            **({"cache": state.cache.shared.status()} if state.cache.shared else {}),
            "queue_depth": batcher.queue_depth if batcher else 0,
            "estimated_wait_ms": round(batcher.estimated_wait_s() * 1000, 1) if batcher else 0.0,
            **(batcher.health.snapshot() if batcher else {}),
        }

    async def ready() -> Response:
        engine_down = state.engine.unavailable_reason()
        if state.ready and engine_down is not None:
            return _json(503, {"status": "engine_unavailable", "reason": engine_down}, {"Retry-After": "1"})
        if state.ready and state.device_healthy():
            return _json(200, {"status": "ready"})
        status, reason, retry_after_s = "failed" if state.failure else "loading", state.failure, 5
        if state.ready and state.batcher is not None:
            health = state.batcher.health
            status, reason = "degraded", f"{health.recent_errors()} device errors in the last minute"
            retry_after_s = health.retry_after_s()
        body = {"status": status, "reason": reason or "model loading or warming up"}
        return _json(503, body, {"Retry-After": str(retry_after_s)})

    for path, endpoint in (("/health", health), ("/ready", ready)):
        app.add_api_route(path, endpoint, methods=["GET"])
        app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)  # probes may use HEAD
