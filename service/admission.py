"""Load shedding before the body is read: a pure ASGI middleware in front of POST /v1/embeddings and /rerank.

Under overload most requests are refused, so a refusal must cost next to nothing. As text-embeddings-
inference takes a permit before tokenising, the middleware asks, before routing, body reading or parsing,
whether even a one-input request would be shed now (queue full, or an estimated wait beyond the share of the
deadline the service admits) and answers 429 with Retry-After at once. Every other path (/health, /ready,
/metrics, ...) passes straight through, never judged. A request let in is not yet work: it counts only once its
body is in, when the route judges it again on its real inputs (service/admission_rule.py), so clients that
send their bodies slowly hold nothing but their own connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from service.batch_errors import BatcherError
from service.engine_view import BatcherView
from service.http_errors import api_error, send_refusal

EMBEDDINGS_PATH = "/v1/embeddings"
RERANK_PATH = "/rerank"
SERVING_PATHS = frozenset({EMBEDDINGS_PATH, RERANK_PATH})  # the POST routes that queue work for the batcher


class AdmissionMiddleware:
    """Refuses serving requests (SERVING_PATHS) with 429 + Retry-After while the engine would shed them anyway.

    `batcher` returns the running batcher (or the front end's view of the engine's), or None while the service
    is not ready (the route then answers 503 itself).
    """

    def __init__(self, app: ASGIApp, batcher: Callable[[], BatcherView | None], deadline_ms: float) -> None:
        self.app = app
        self.batcher = batcher
        self.deadline_ms = deadline_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        batcher = self.batcher()
        if (
            batcher is None
            or scope["type"] != "http"
            or scope["path"] not in SERVING_PATHS
            or scope["method"] != "POST"
        ):
            await self.app(scope, receive, send)
            return
        t_start_s = time.perf_counter()
        try:  # judged as one input: its size is not known before its body is read
            batcher.check_admission(1, self.deadline_ms)
        except BatcherError as exc:
            await send_refusal(send, scope, api_error(exc, [0], batcher.drain_s(), 0), t_start_s)
            return
        await self.app(scope, receive, send)
