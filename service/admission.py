"""Refusals before the body is read, as pure ASGI middlewares (no routing, no body read): API keys (401) and
load shedding (429) in front of POST /v1/embeddings and /rerank.

With --api-keys set, every endpoint but the probes needs a valid Bearer key. /health and /ready stay open for
load balancers and orchestrators; /metrics, /info, /openapi.json and the serving routes need a key (a
Prometheus scrape sends it as `authorization: {credentials: KEY}`). Under overload most requests are refused,
so a refusal must cost next to nothing. As text-embeddings-inference takes a permit before tokenising, the
admission middleware asks, before routing, body reading or parsing, whether even a one-input request would be
shed now (queue full, or an estimated wait beyond the share of the deadline the service admits) and answers
429 with Retry-After at once. Every other path (/health, /ready, /metrics, ...) passes straight through, never
judged. A request let in is not yet work: it counts only once its body is in, when the route judges it again
on its real inputs (service/admission_rule.py), so clients that send their bodies slowly hold nothing but
their own connections."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from service.batch_errors import BatcherError
from service.engine_view import BatcherView
from service.http_errors import api_error, send_refusal
from service.openai_api import ApiError

EMBEDDINGS_PATH = "/v1/embeddings"
RERANK_PATH = "/rerank"
SERVING_PATHS = frozenset({EMBEDDINGS_PATH, RERANK_PATH})  # the POST routes that queue work for the batcher


class AdmissionMiddleware:
    """Refuses serving requests with 429 + Retry-After while the engine would shed them anyway. `batcher`: the
    running batcher (or a front end's view of the engine's), None while not ready (the route answers 503)."""

    def __init__(self, app: ASGIApp, batcher: Callable[[], BatcherView | None], deadline_ms: float) -> None:
        self.app = app
        self.batcher = batcher
        self.deadline_ms = deadline_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        batcher = self.batcher()
        serving = scope["type"] == "http" and scope["path"] in SERVING_PATHS and scope["method"] == "POST"
        if batcher is None or not serving:
            await self.app(scope, receive, send)
            return
        t_start_s = time.perf_counter()
        try:  # judged as one input: its size is not known before its body is read
            batcher.check_admission(1, self.deadline_ms)
        except BatcherError as exc:
            await send_refusal(send, scope, api_error(exc, [0], batcher.drain_s(), 0), t_start_s)
            return
        await self.app(scope, receive, send)


OPEN_PATHS = frozenset({"/health", "/ready"})  # probes: answered without a key


def key_is_valid(authorization: bytes, keys: list[bytes]) -> bool:
    """Whether an Authorization header value is 'Bearer <one of keys>', compared in constant time."""
    scheme, _, token = authorization.partition(b" ")
    # compared with every key (a list, not a lazy any()): the time taken says nothing about which one matched
    matches = [hmac.compare_digest(token.strip(), key) for key in keys]
    return scheme.lower() == b"bearer" and any(matches)


class ApiKeyMiddleware:
    """Refuses requests without a valid key with a JSON 401 (WWW-Authenticate: Bearer), probes excepted."""

    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self.keys = [key.encode() for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        authorization = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        if key_is_valid(authorization, self.keys):
            await self.app(scope, receive, send)
            return
        message = "missing or invalid API key; send 'Authorization: Bearer <key>'"
        error = ApiError(401, message, "invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        await send_refusal(send, scope, error, time.perf_counter())
