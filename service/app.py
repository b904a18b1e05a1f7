"""FastAPI application: the OpenAI-compatible embeddings route, health/readiness/info/metrics, and lifespan."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.admission import ADMITTED_AT_DOOR, DOOR_JUDGED_INPUTS, ShedMiddleware, api_error
from service.batch_errors import BatcherError
from service.batcher import Batcher, BatcherConfig, BatchResult
from service.cache import EmbeddingCache, ResultCache
from service.cache_redis import RedisCache
from service.devices import version_matrix
from service.limits import ConcurrencyLimit, RateLimit
from service.loop_gate import LoopGate
from service.metrics import STAGES, ServiceMetrics
from service.model import EmbeddingModel, load_model, weights_sha256
from service.openai_api import (
    CLIENT_CLOSED_REQUEST,
    ApiError,
    EmbeddingRequest,
    encode_vector,
    error_body,
    parse_embedding_request,
    request_body_schema,
    server_timing,
    shorten,
)
from service.request_io import (
    ConnectionLost,
    connection_lost_signal,
    limit_chars,
    read_body,
    unless_disconnected,
)
from service.settings import DEFAULT_MODEL_NAME, ServiceSettings
from service.workers import WorkerPool, build_pool, primary_device

log = logging.getLogger("service.app")
DEFAULT_MODEL_ALIASES = ("sentence-transformers/all-MiniLM-L6-v2",)  # the Hugging Face id of the default
PARSE_OFF_LOOP_BYTES = 64 * 1024  # bodies above this are parsed on a thread so the event loop stays free
WARMUP_TEXTS = ["warm-up: the quick brown fox jumps over the lazy dog", "预热：深度学习模型推理性能测试"]


@dataclass
class ServiceState:
    """Everything one app instance owns; created by create_app, filled in by the lifespan."""

    settings: ServiceSettings
    model: EmbeddingModel | None
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    batcher: Batcher | None = None
    pool: WorkerPool | None = None
    ready: bool = False
    failure: str | None = None
    started_unix_s: float = field(default_factory=time.time)
    weights: dict[str, str] | None = None
    freeze_heap: bool = False  # the service process (not an app embedded in tests) freezes its start-up heap

    def __post_init__(self) -> None:
        s = self.settings
        self.cache = ResultCache(EmbeddingCache(s.cache_size), None, self.metrics)  # Redis joins in prepare
        self.concurrency = ConcurrencyLimit(s.max_concurrency)
        self.rate = RateLimit(s.rate_limit_qps)
        self.loop_gate = LoopGate()
        self.api_keys = [key.encode() for key in s.api_key_list()]

    def batcher_config(self) -> BatcherConfig:
        s = self.settings
        return BatcherConfig(
            batching=s.batching,
            max_batch_size=s.max_batch_size,
            max_batch_tokens=s.max_batch_tokens,
            max_wait_ms=s.max_wait_ms,
            sort_by_length=s.sort_by_length,
            overlap_tokenize=s.overlap_tokenize,
            queue_size=s.queue_size,
            long_input=s.long_input,
            admit_wait_share=s.admit_wait_share,
            workers=len(s.device_specs()),
        )

    def served_names(self) -> set[str]:
        """The model id clients may name: the served name, the loaded model's name, and documented aliases."""
        names = {self.settings.model_name}
        if self.model is not None:
            names.add(self.model.name)
        if self.settings.model:
            names.add(Path(self.settings.model).name)
        if DEFAULT_MODEL_NAME in names and not self.settings.model:
            names |= set(DEFAULT_MODEL_ALIASES)
        return names

    def device_healthy(self) -> bool:
        return self.batcher is None or self.batcher.health.healthy()

    async def prepare(self) -> None:
        """Load (if not given), start the batcher, run a warm-up batch, then report ready."""
        s = self.settings
        if self.api_keys:
            log.info("auth: on (%d API key(s)); POST /v1/embeddings needs a Bearer key", len(self.api_keys))
        else:
            log.info("auth: off (no API keys set); anyone who can reach the port can call /v1/embeddings")
        try:
            if self.model is None:
                path = Path(s.model) if s.model else None
                self.model = await asyncio.to_thread(
                    load_model, path, primary_device(s), s.precision, s.threads, None, s.int8_exclude
                )
            self.pool = await asyncio.to_thread(build_pool, s, self.model, self.metrics)
            if s.warmup and len(self.pool) > 1:  # the batcher's warm-up below reaches only one worker
                await asyncio.to_thread(self.pool.warm_up, WARMUP_TEXTS)
            if s.cache:
                self.cache.shared = RedisCache(
                    s.cache,
                    _cache_namespace(s),
                    self.model.dimension,
                    s.cache_ttl_s,
                    s.cache_retry_max_s,
                    self.metrics,
                )
                await self.cache.shared.connect()
            self.batcher = Batcher(self.pool, self.batcher_config(), self.metrics, self.pool.bind_thread)
            self.batcher.start()
            if s.warmup:
                warmup_texts = (WARMUP_TEXTS * s.max_batch_size)[: min(s.queue_size, s.max_batch_size)]
                await self.batcher.submit(warmup_texts, deadline_ms=max(s.deadline_ms, 120_000))
            if self.freeze_heap:
                freeze_startup_heap()
            self.ready = True
            self.metrics.ready.set(1)
            log.info("ready: %s on %s (%s)", self.model.name, self.model.device, s.precision)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.exception("the service could not get ready")


FULL_GC_EVERY_MIDDLE = 100  # middle-generation collections between full ones (Python's default: 10)


def freeze_startup_heap() -> None:
    """Move the objects alive after loading and warm-up (the model, tokeniser, libraries) out of the GC's reach.

    A full collection otherwise walks ~400k long-lived objects and stalls every thread holding the
    GIL for ~0.2 s, which shows up as the P99 of /health and of every request. What a full collection still
    walks is the state of requests in flight (~100k objects at 1,000 connections: ~40 ms); those walks run
    every ~30 s instead of every ~3 s once full collections wait for ten times more middle-generation ones.
    """
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_GC_EVERY_MIDDLE))


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def create_app(
    settings: ServiceSettings, model: EmbeddingModel | None = None, freeze_heap: bool = False
) -> FastAPI:
    """The service as an ASGI app. With model=None the lifespan loads settings.model in the background.

    freeze_heap: once ready, take the start-up heap out of the garbage collector's reach (the service
    process does; an app embedded in another process, such as a test, should not freeze its host's heap).
    """
    state = ServiceState(settings=settings, model=model, freeze_heap=freeze_heap)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(state.prepare())
        try:
            yield
        finally:
            if not task.done():
                task.cancel()
            if state.batcher is not None:  # uvicorn stopped accepting and waited for requests: drain the rest
                await asyncio.to_thread(state.batcher.stop)
            if state.cache.shared is not None:
                await state.cache.shared.close()
            state.metrics.ready.set(0)

    app = FastAPI(title="embedperf reference embedding service", lifespan=lifespan)
    app.add_middleware(ShedMiddleware, state=state)
    app.state.service = state

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = error_body(str(exc.detail), "invalid_request_error", code)
        return _json(exc.status_code, body, dict(exc.headers or {}))  # keeps Allow on 405

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        log.error("unexpected error on %s %s: %r", request.method, request.url.path, exc)
        return _json(500, error_body("internal error; see the service log", "server_error", "internal_error"))

    def openapi() -> dict[str, Any]:
        """FastAPI's document plus the request-body schema of the raw-body embeddings route."""
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(title=app.title, version=app.version, routes=app.routes)
        dimension = state.model.dimension if state.model is not None else 4096
        s = state.settings
        document["paths"]["/v1/embeddings"]["post"]["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {
                    "schema": request_body_schema(s.max_inputs, dimension, s.max_input_chars)
                }
            },
        }
        if state.model is not None:  # the dimension is known: the document is final
            app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return _json(
            400, error_body(f"invalid request: {exc.errors()}", "invalid_request_error", "invalid_request")
        )

    # /health and /ready read in-memory state only: they never wait on the queue, tokeniser or model threads.
    @app.get("/health")
    async def health() -> dict[str, Any]:
        batcher = state.batcher
        return {
            "status": "ok",
            "ready": state.ready and state.device_healthy(),
            "model": state.settings.model_name,
            "device": state.settings.device,
            "busy_frac": round(batcher.busy_fraction(), 4) if batcher else 0.0,
            "device_busy_frac": state.pool.busy_fractions() if state.pool else {},
            **({"cache": state.cache.shared.status()} if state.cache.shared else {}),
            "queue_depth": batcher.queue_depth if batcher else 0,
            "estimated_wait_ms": round(batcher.estimated_wait_s() * 1000, 1) if batcher else 0.0,
            **(batcher.health.snapshot() if batcher else {}),
        }

    @app.get("/ready")
    async def ready() -> Response:
        if state.ready and state.device_healthy():
            return _json(200, {"status": "ready"})
        if state.ready and state.batcher is not None:
            errors = state.batcher.health.recent_errors()
            return _json(
                503,
                {"status": "degraded", "reason": f"{errors} device errors in the last minute"},
                {"Retry-After": str(state.batcher.health.retry_after_s())},
            )
        status = "failed" if state.failure else "loading"
        return _json(
            503,
            {"status": status, "reason": state.failure or "model loading or warming up"},
            {"Retry-After": "5"},
        )

    for path, endpoint in (("/health", health), ("/ready", ready)):  # probes may use HEAD
        app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/info")
    async def info() -> Response:
        m = state.model
        if m is not None and state.weights is None:
            state.weights = await asyncio.to_thread(weights_sha256, m.path)
        return _json(
            200,
            {
                "model": state.settings.model_name,
                "model_path": str(m.path) if m else state.settings.model,
                "dimension": m.dimension if m else None,
                "max_tokens": m.max_tokens if m else None,
                "pooling": m.pooling if m else None,
                "device": str(m.device) if m else state.settings.device,
                "devices": [spec.as_info() for spec in state.settings.device_specs()],
                "precision": state.settings.precision,
                "config": state.settings.public_config(),
                "weights_sha256": state.weights or {},
                "versions": version_matrix(m.device if m else None),
                "ready": state.ready,
                "pid": os.getpid(),
                "started_unix_s": state.started_unix_s,
            },
        )

    @app.post("/v1/embeddings", summary="Create embeddings (OpenAI-compatible)")
    async def embeddings(request: Request) -> Response:
        door: dict[str, float] = request.scope.get("extensions", {}).get(ADMITTED_AT_DOOR, {})
        t_start_s = door.get("t_s") or time.perf_counter()  # from the door: the wait for a turn counts
        state.metrics.inflight.inc()
        try:
            response = await _embed(state, request, t_start_s)
        except ApiError as exc:
            if exc.status == CLIENT_CLOSED_REQUEST:  # nobody reads it: after a burst of hang-ups, cost little
                response = Response(status_code=CLIENT_CLOSED_REQUEST)
            else:
                total_ms = (time.perf_counter() - t_start_s) * 1000
                headers = {"Server-Timing": server_timing(0, 0, 0, 0, total_ms), **exc.headers}
                response = _json(exc.status, exc.body(), headers)
        finally:
            state.metrics.inflight.dec()
        state.metrics.requests.labels(status=str(response.status_code)).inc()
        return response

    return app


def _check_auth(state: ServiceState, request: Request) -> None:
    if not state.api_keys:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    supplied = token.strip().encode()
    valid = False
    for key in state.api_keys:  # compare against every key, in constant time, to leak nothing
        valid |= hmac.compare_digest(supplied, key)
    if scheme.lower() != "bearer" or not valid:
        raise ApiError(
            401,
            "missing or invalid API key; send 'Authorization: Bearer <key>'",
            "invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )


async def _embed(state: ServiceState, request: Request, t_start_s: float) -> Response:
    _check_auth(state, request)
    if not state.ready or state.batcher is None or state.model is None:
        raise ApiError(
            503,
            "the model is still loading or warming up; retry shortly",
            "model_not_ready",
            "server_error",
            headers={"Retry-After": "1"},
        )
    s = state.settings
    # The body is read before any slot is taken, under a size limit and a deadline: a slow or huge upload
    # costs its own connection only.
    raw_body = await read_body(request, s.max_body_bytes, s.body_timeout_s)
    admitted, retry_after_s = state.rate.try_acquire()
    if not admitted:
        raise ApiError(
            429,
            f"rate limit of {state.settings.rate_limit_qps:g} requests/s exceeded",
            "rate_limit_exceeded",
            "rate_limit_error",
            headers={"Retry-After": str(retry_after_s)},
        )
    slot = state.concurrency.slot()
    if slot is None:
        raise ApiError(
            429,
            f"more than {state.settings.max_concurrency} requests in flight",
            "too_many_concurrent_requests",
            "rate_limit_error",
            headers={"Retry-After": "1"},
        )
    lost = connection_lost_signal(request)
    if lost is not None:  # a client that hangs up frees its place at once, not when its handler gets to run
        lost.subscribe(slot.release)
    try:
        parse_args = (request.headers.get("content-type", ""), raw_body, s.max_inputs, state.model.dimension)
        if len(raw_body) > PARSE_OFF_LOOP_BYTES:
            body = await asyncio.to_thread(parse_embedding_request, *parse_args)
        else:
            body = parse_embedding_request(*parse_args)
        if body.model is not None and body.model not in state.served_names():
            raise ApiError(
                404,
                f"The model '{body.model}' does not exist; this service serves '{s.model_name}'",
                "model_not_found",
                param="model",
            )
        texts = limit_chars(body.texts, s.max_input_chars, s.long_input, state.model.max_tokens)
        body = dataclasses.replace(body, texts=texts)
        work = _compute_and_respond(state, body, t_start_s, lost)
        # Behind the service's HTTP protocol the batcher hears of a disconnection directly; in-process clients
        # (tests) have no such signal, so a watcher task listens for http.disconnect instead.
        return await (work if lost is not None else unless_disconnected(request, work))
    finally:
        slot.release()


async def _compute_and_respond(
    state: ServiceState, body: EmbeddingRequest, t_start_s: float, lost: ConnectionLost | None
) -> Response:
    assert state.batcher is not None and state.model is not None
    n = len(body.texts)
    vectors = np.empty((n, state.model.dimension), dtype=np.float32)
    tokens = [0] * n
    cached = await state.cache.lookup(body.texts)
    missing = cached.missing
    for index, entry in enumerate(cached.entries):
        if entry is not None:
            vectors[index], tokens[index] = entry.vector, entry.tokens
    result = BatchResult(np.empty((0, 0)), [], 0.0, 0.0, 0.0, 0, 0)
    if missing:
        result = await _submit(state, [body.texts[i] for i in missing], missing, lost)
        for row, index in enumerate(missing):
            vectors[index], tokens[index] = result.embeddings[row], result.token_counts[row]
        await state.cache.store([(body.texts[i], vectors[i], tokens[i]) for i in missing])
    t_post_s = time.perf_counter()
    shortened = shorten(vectors, body.dimensions)
    usage = sum(tokens)
    payload = {
        "object": "list",
        "data": [
            {
                "object": "embedding",
                "index": i,
                "embedding": encode_vector(shortened[i], body.encoding_format),
            }
            for i in range(n)
        ],
        "model": state.settings.model_name,
        "usage": {"prompt_tokens": usage, "total_tokens": usage},
    }
    content = json.dumps(payload, separators=(",", ":"))
    t_end_s = time.perf_counter()
    post_ms = (t_end_s - t_post_s) * 1000
    total_ms = (t_end_s - t_start_s) * 1000
    stages = {
        "queue": result.queue_ms,
        "tokenize": result.tokenize_ms,
        "compute": result.compute_ms,
        "post": post_ms,
        "total": total_ms,
    }
    for stage in STAGES:
        state.metrics.stage_duration.labels(stage=stage).observe(stages[stage] / 1000)
    headers = {
        "Server-Timing": server_timing(**{f"{k}_ms": v for k, v in stages.items()}),
        "X-Batch-Size": str(result.batch_size),
        "X-Batch-Tokens": str(result.batch_tokens),
    }
    if state.cache.enabled:
        headers["X-Cache"] = cached.header()
    return Response(content, media_type="application/json", headers=headers)


async def _submit(
    state: ServiceState, texts: list[str], positions: list[int], lost: ConnectionLost | None
) -> BatchResult:
    assert state.batcher is not None
    batcher = state.batcher
    try:
        return await batcher.submit(
            texts,
            state.settings.deadline_ms,
            lost,
            judged_inputs=DOOR_JUDGED_INPUTS,
        )
    except BatcherError as exc:
        raise api_error(state, exc, positions) from None


def _cache_namespace(settings: ServiceSettings) -> str:
    """Shared-cache keys differ whenever the vectors would: model, precision and the int8 layer choice."""
    variant: str = settings.precision
    if settings.precision == "int8" and settings.int8_exclude:
        variant += "-x" + hashlib.sha256(settings.int8_exclude.encode()).hexdigest()[:8]
    return f"embedperf:{settings.model or settings.model_name}:{variant}"
