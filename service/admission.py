"""Load shedding at the door, and the HTTP answer to every batcher refusal or failure.

Under overload most requests are refused, so a refusal must cost next to nothing: ShedMiddleware answers
429 for POST /v1/embeddings as plain ASGI, before routing, auth, body reading or parsing, whenever the
batcher's estimated queue wait already exceeds what the deadline allows. The event loop then stays free
for admitted work and for /health and /ready. Admitted requests then pass the service's LoopGate, which
starts a few of them per loop iteration, so a burst of them never holds the loop for long at a time.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from service.batcher import (
    BatcherError,
    BatcherStopped,
    ComputeFailed,
    DeadlineExceeded,
    InputTooLong,
    InvalidInput,
    Overloaded,
    QueueFull,
)
from service.openai_api import ApiError, server_timing

if TYPE_CHECKING:
    from service.app import ServiceState

EMBEDDINGS_PATH = "/v1/embeddings"


def retry_after_s(state: ServiceState) -> int:
    """Whole seconds until the queue ahead of a new request should have drained (at least 1)."""
    wait_s = state.batcher.estimated_wait_s() if state.batcher is not None else 0.0
    return max(1, math.ceil(wait_s))


def api_error(state: ServiceState, error: BatcherError, positions: list[int]) -> ApiError:
    """The HTTP answer to a batcher error (positions map batcher input indices to request indices)."""
    retry = {"Retry-After": str(retry_after_s(state))}
    if isinstance(error, Overloaded):
        headers = {"Retry-After": str(error.retry_after_s)}
        return ApiError(429, str(error), "overloaded", "rate_limit_error", headers=headers)
    if isinstance(error, QueueFull):
        return ApiError(429, str(error), "queue_full", "rate_limit_error", headers=retry)
    if isinstance(error, DeadlineExceeded):
        return ApiError(503, str(error), "deadline_exceeded", "server_error", headers=retry)
    if isinstance(error, InvalidInput):
        return ApiError(400, str(error), "invalid_input", param="input")
    if isinstance(error, InputTooLong):
        limit = state.model.max_tokens if state.model else 0
        return ApiError(
            413,
            f"input[{positions[error.index]}] is longer than the model's limit of {limit} tokens; shorten it "
            "or run the service with --long-input truncate",
            "input_too_long",
            param="input",
        )
    if isinstance(error, BatcherStopped):
        return ApiError(503, str(error), "shutting_down", "server_error", headers={"Retry-After": "1"})
    assert isinstance(error, ComputeFailed), error
    return ApiError(500, str(error), "inference_failed", "server_error")


async def send_error(send: Send, error: ApiError, total_ms: float) -> None:
    """Write an ApiError as a complete JSON response straight to the ASGI channel."""
    body = json.dumps(error.body()).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "server-timing": server_timing(0, 0, 0, 0, total_ms),
        **{name.lower(): value for name, value in error.headers.items()},
    }
    raw_headers = [(name.encode(), value.encode("latin-1")) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class ShedMiddleware:
    """Plain ASGI middleware: refuses embedding requests with 429 while the batcher would shed them anyway."""

    def __init__(self, app: ASGIApp, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == EMBEDDINGS_PATH:
            state = self.state
            batcher = state.batcher
            if state.ready and batcher is not None:
                t_start_s = time.perf_counter()
                try:
                    # requests held at the loop gate are ahead of this one (one input each at least)
                    batcher.check_admission(
                        1, state.settings.deadline_ms, ahead_inputs=state.loop_gate.waiting
                    )
                except BatcherError as exc:
                    error = api_error(state, exc, [0])
                    state.metrics.requests.labels(status=str(error.status)).inc()
                    await send_error(send, error, (time.perf_counter() - t_start_s) * 1000)
                    return
            await state.loop_gate.enter()  # a burst of admitted requests is handled a few per loop turn
        await self.app(scope, receive, send)
