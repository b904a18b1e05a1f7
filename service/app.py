"""FastAPI application: the OpenAI-compatible embeddings route, health/readiness/info/metrics, and lifespan."""

from __future__ import annotations

import asyncio
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
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.batcher import (
    Batcher,
    BatcherConfig,
    BatcherStopped,
    BatchResult,
    ComputeFailed,
    DeadlineExceeded,
    InputTooLong,
    QueueFull,
)
from service.cache import EmbeddingCache
from service.devices import version_matrix
from service.limits import ConcurrencyLimit, RateLimit
from service.metrics import STAGES, ServiceMetrics
from service.model import EmbeddingModel, load_model, weights_sha256
from service.openai_api import (
    ApiError,
    EmbeddingRequest,
    encode_vector,
    error_body,
    parse_embedding_request,
    server_timing,
    shorten,
)
from service.settings import ServiceSettings

log = logging.getLogger("service.app")
WARMUP_TEXTS = ["warm-up: the quick brown fox jumps over the lazy dog", "预热：深度学习模型推理性能测试"]


@dataclass
class ServiceState:
    """Everything one app instance owns; created by create_app, filled in by the lifespan."""

    settings: ServiceSettings
    model: EmbeddingModel | None
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    batcher: Batcher | None = None
    ready: bool = False
    failure: str | None = None
    started_unix_s: float = field(default_factory=time.time)
    weights: dict[str, str] | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.cache = EmbeddingCache(s.cache_size)
        self.concurrency = ConcurrencyLimit(s.max_concurrency)
        self.rate = RateLimit(s.rate_limit_qps)
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
        )

    def served_names(self) -> set[str]:
        names = {self.settings.model_name}
        if self.model is not None:
            names |= {self.model.name, self.model.path.name}
        if self.settings.model:
            names.add(Path(self.settings.model).name)
        return names

    async def prepare(self) -> None:
        """Load (if not given), start the batcher, run a warm-up batch, then report ready."""
        s = self.settings
        try:
            if self.model is None:
                path = Path(s.model) if s.model else None
                self.model = await asyncio.to_thread(
                    load_model, path, s.device, s.precision, s.threads, None, s.int8_exclude
                )
            self.batcher = Batcher(self.model, self.batcher_config(), self.metrics)
            self.batcher.start()
            if s.warmup:
                warmup_texts = (WARMUP_TEXTS * s.max_batch_size)[: min(s.queue_size, s.max_batch_size)]
                await self.batcher.submit(warmup_texts, deadline_ms=max(s.deadline_ms, 120_000))
            self.ready = True
            self.metrics.ready.set(1)
            log.info("ready: %s on %s (%s)", self.model.name, self.model.device, s.precision)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.exception("the service could not get ready")


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def create_app(settings: ServiceSettings, model: EmbeddingModel | None = None) -> FastAPI:
    """The service as an ASGI app. With model=None the lifespan loads settings.model in the background."""
    state = ServiceState(settings=settings, model=model)

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
            state.metrics.ready.set(0)

    app = FastAPI(title="embedperf reference embedding service", lifespan=lifespan)
    app.state.service = state

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _json(exc.status_code, error_body(str(exc.detail), "invalid_request_error", code))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        return _json(
            400, error_body(f"invalid request: {exc.errors()}", "invalid_request_error", "invalid_request")
        )

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "ready": state.ready,
            "model": state.settings.model_name,
            "device": state.settings.device,
            "busy_frac": round(state.batcher.busy_fraction(), 4) if state.batcher else 0.0,
        }

    @app.get("/ready")
    async def ready() -> Response:
        if state.ready:
            return _json(200, {"status": "ready"})
        status = "failed" if state.failure else "loading"
        return _json(503, {"status": status, "reason": state.failure or "model loading or warming up"})

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
                "precision": state.settings.precision,
                "config": state.settings.public_config(),
                "weights_sha256": state.weights or {},
                "versions": version_matrix(m.device if m else None),
                "ready": state.ready,
                "pid": os.getpid(),
                "started_unix_s": state.started_unix_s,
            },
        )

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        t_start_s = time.perf_counter()
        state.metrics.inflight.inc()
        try:
            response = await _embed(state, request, t_start_s)
        except ApiError as exc:
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
    admitted, retry_after_s = state.rate.try_acquire()
    if not admitted:
        raise ApiError(
            429,
            f"rate limit of {state.settings.rate_limit_qps:g} requests/s exceeded",
            "rate_limit_exceeded",
            "rate_limit_error",
            headers={"Retry-After": str(retry_after_s)},
        )
    if not state.concurrency.try_acquire():
        raise ApiError(
            429,
            f"more than {state.settings.max_concurrency} requests in flight",
            "too_many_concurrent_requests",
            "rate_limit_error",
            headers={"Retry-After": "1"},
        )
    try:
        body = parse_embedding_request(
            request.headers.get("content-type", ""),
            await request.body(),
            state.settings.max_inputs,
            state.model.dimension,
        )
        if (
            body.model is not None
            and body.model not in state.served_names()
            and body.model.rsplit("/", 1)[-1] not in state.served_names()
        ):
            raise ApiError(
                404,
                f"the model '{body.model}' does not exist; this service serves '{state.settings.model_name}'",
                "model_not_found",
                param="model",
            )
        return await _compute_and_respond(state, body, t_start_s)
    finally:
        state.concurrency.release()


async def _compute_and_respond(state: ServiceState, body: EmbeddingRequest, t_start_s: float) -> Response:
    assert state.batcher is not None and state.model is not None
    n = len(body.texts)
    vectors = np.empty((n, state.model.dimension), dtype=np.float32)
    tokens = [0] * n
    missing: list[int] = []
    for index, text in enumerate(body.texts):
        hit = state.cache.get(text)
        if hit is None:
            missing.append(index)
        else:
            vectors[index], tokens[index] = hit.vector, hit.tokens
    if state.cache.enabled:
        state.metrics.cache_hits.inc(n - len(missing))
        state.metrics.cache_misses.inc(len(missing))
    result = BatchResult(np.empty((0, 0)), [], 0.0, 0.0, 0.0, 0, 0)
    if missing:
        result = await _submit(state, [body.texts[i] for i in missing], missing)
        for row, index in enumerate(missing):
            vectors[index], tokens[index] = result.embeddings[row], result.token_counts[row]
            state.cache.put(body.texts[index], result.embeddings[row], result.token_counts[row])
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
    return Response(content, media_type="application/json", headers=headers)


async def _submit(state: ServiceState, texts: list[str], positions: list[int]) -> BatchResult:
    assert state.batcher is not None
    try:
        return await state.batcher.submit(texts, state.settings.deadline_ms)
    except QueueFull as exc:
        raise ApiError(
            429, str(exc), "queue_full", "rate_limit_error", headers={"Retry-After": "1"}
        ) from None
    except DeadlineExceeded as exc:
        raise ApiError(503, str(exc), "deadline_exceeded", "server_error") from None
    except InputTooLong as exc:
        index = positions[exc.index]
        limit = state.model.max_tokens if state.model else 0
        raise ApiError(
            413,
            f"input[{index}] is longer than the model's limit of {limit} tokens; shorten it "
            "or run the service with --long-input truncate",
            "input_too_long",
            param="input",
        ) from None
    except BatcherStopped as exc:
        raise ApiError(503, str(exc), "shutting_down", "server_error", headers={"Retry-After": "1"}) from None
    except ComputeFailed as exc:
        raise ApiError(500, str(exc), "inference_failed", "server_error") from None
