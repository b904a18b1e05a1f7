"""Load shedding at the door, and the HTTP answer to every batcher refusal or failure.

Under overload most requests are refused, so a refusal must cost next to nothing: `door_refusal` decides,
before routing, auth, body reading or parsing, whether POST /v1/embeddings gets 429 because the batcher's
estimated queue wait already exceeds what the deadline allows. The HTTP protocol (service/door_protocol.py)
asks it as soon as a request's headers are parsed and writes the 429 itself, with no ASGI task; ShedMiddleware
asks the same for requests that reach the app another way (an in-process test client). The event loop then
stays free for admitted work and for /health and /ready. Admitted requests then pass the service's LoopGate,
which starts a few of them per loop iteration, so a burst of them never holds the loop for long at a time.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from service.batch_errors import (
    BatcherError,
    BatcherStopped,
    ClientGone,
    ComputeFailed,
    DeadlineExceeded,
    InputTooLong,
    InvalidInput,
    Overloaded,
    QueueFull,
)
from service.loop_gate import Start
from service.openai_api import CLIENT_CLOSED_REQUEST, ApiError, server_timing

if TYPE_CHECKING:
    from service.app import ServiceState

EMBEDDINGS_PATH = "/v1/embeddings"
DOOR_JUDGED_INPUTS = 1  # the door judges a request before its body is read, as one input


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
    if isinstance(error, ClientGone):  # nobody reads it; it shows in the request counts by status
        return ApiError(CLIENT_CLOSED_REQUEST, str(error), "client_closed_request")
    assert isinstance(error, ComputeFailed), error
    return ApiError(500, str(error), "inference_failed", "server_error")


def error_response(error: ApiError, total_ms: float) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The raw headers and body of an ApiError answered straight from the door."""
    body = json.dumps(error.body()).encode()
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "server-timing": server_timing(0, 0, 0, 0, total_ms),
        **{name.lower(): value for name, value in error.headers.items()},
    }
    return [(name.encode(), value.encode("latin-1")) for name, value in headers.items()], body


async def send_error(send: Send, error: ApiError, total_ms: float) -> None:
    """Write an ApiError as a complete JSON response straight to the ASGI channel."""
    raw_headers, body = error_response(error, total_ms)
    await send({"type": "http.response.start", "status": error.status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


def door_refusal(state: ServiceState) -> ApiError | None:
    """The 429 a new embedding request gets before its body is read, or None to let it in.

    It is refused when the batcher would shed it anyway: the queue is full, or the estimated wait already
    exceeds what the deadline allows. Requests held at the loop gate count as queued ahead of it.
    """
    batcher = state.batcher
    if not state.ready or batcher is None:
        return None  # /ready is 503 and the route answers for itself
    try:
        batcher.check_admission(
            DOOR_JUDGED_INPUTS, state.settings.deadline_ms, ahead_inputs=state.loop_gate.waiting
        )
    except BatcherError as exc:
        error = api_error(state, exc, [0])
        state.metrics.requests.labels(status=str(error.status)).inc()
        return error
    return None


ADMITTED_AT_DOOR = "embedperf.admitted_at_door"  # scope["extensions"] key set by the HTTP protocol


def admit_at_door(state: ServiceState, start: Start) -> ApiError | None:
    """The door as the HTTP protocol asks it: the request's refusal, or None once its handler has been
    started (`start`), now or by the loop gate on a later turn."""
    refusal = door_refusal(state)
    if refusal is not None:
        return refusal
    if state.ready and state.batcher is not None:
        state.loop_gate.admit(start)
    else:
        start()  # not ready: the route answers 503 at once
    return None


class ShedMiddleware:
    """Plain ASGI middleware: refuses embedding requests with 429 while the batcher would shed them anyway."""

    def __init__(self, app: ASGIApp, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == EMBEDDINGS_PATH:
            t_start_s = time.perf_counter()
            if ADMITTED_AT_DOOR not in scope.get("extensions", {}):  # the protocol has decided and metered
                refusal = door_refusal(self.state)
                if refusal is not None:
                    await send_error(send, refusal, (time.perf_counter() - t_start_s) * 1000)
                    return
                await self.state.loop_gate.enter()  # a burst of admitted requests is handled a few per turn
        await self.app(scope, receive, send)
