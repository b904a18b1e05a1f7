"""Load shedding before the body is read: a pure ASGI middleware in front of POST /v1/embeddings and /rerank.

Under overload most requests are refused, so a refusal must cost next to nothing. As text-embeddings-
inference takes a permit before tokenising, the middleware asks the batcher, before routing, body reading or
parsing, whether the request would be shed anyway (queue full, or an estimated wait beyond the share of the
deadline the service admits) and answers 429 with Retry-After at once. Every other path (/health, /ready,
/metrics, ...) passes straight through, never judged. A request let in counts as queued ahead of the next
ones until its inputs reach the batcher (`Admitted`), so requests let in together are judged together.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from service.batch_errors import BatcherError
from service.batcher import Batcher
from service.http_errors import api_error, send_refusal

EMBEDDINGS_PATH = "/v1/embeddings"
RERANK_PATH = "/rerank"
SERVING_PATHS = frozenset({EMBEDDINGS_PATH, RERANK_PATH})  # the POST routes that queue work for the batcher
ADMITTED_KEY = "embedperf.admitted"  # scope["state"] key of the request's Admitted


class Admitted:
    """A let-in request, counted as queued ahead of later ones until release(): when its inputs are queued
    (the route calls it just before submitting) or when it ends without getting that far."""

    def __init__(self, gate: AdmissionMiddleware) -> None:
        self._gate: AdmissionMiddleware | None = gate
        gate.pending += 1

    def release(self) -> None:
        if self._gate is not None:
            self._gate.pending -= 1
            self._gate = None


def admitted_of(scope: Scope) -> Admitted | None:
    admitted: Admitted | None = scope.get("state", {}).get(ADMITTED_KEY)
    return admitted


class AdmissionMiddleware:
    """Refuses serving requests (SERVING_PATHS) with 429 + Retry-After while the batcher would shed them anyway.

    `batcher` returns the running batcher, or None while the service is not ready (the route then answers
    503 itself).
    """

    def __init__(self, app: ASGIApp, batcher: Callable[[], Batcher | None], deadline_ms: float) -> None:
        self.app = app
        self.batcher = batcher
        self.deadline_ms = deadline_ms
        self.pending = 0  # requests let in whose inputs have not reached the batcher's queue yet

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
            batcher.check_admission(1, self.deadline_ms, ahead_requests=self.pending)
        except BatcherError as exc:
            await send_refusal(send, scope, api_error(exc, [0], batcher.drain_s(), 0), t_start_s)
            return
        admitted = Admitted(self)
        scope.setdefault("state", {})[ADMITTED_KEY] = admitted
        try:
            await self.app(scope, receive, send)
        finally:
            admitted.release()
