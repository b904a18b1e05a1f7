"""The HTTP answer to every refusal or failure: batcher errors mapped to statuses, and JSON responses
(json_answer) sent whole on the ASGI channel (send_bytes) by the middlewares and the serving routes."""

from __future__ import annotations

import json
import math
import time

from starlette.types import Scope, Send

from service.batch_errors import (
    BatcherError,
    BatcherStopped,
    ComputeFailed,
    DeadlineExceeded,
    EngineUnavailable,
    InputTooLong,
    InvalidInput,
    Overloaded,
    QueueFull,
    ShuttingDown,
    TooManyTokens,
)
from service.openai_api import ApiError, server_timing
from service.request_record import record_of

JSON_TYPE = {"Content-Type": "application/json"}
Answer = tuple[int, bytes, dict[str, str]]  # a complete response: status, body, headers


def api_error(error: BatcherError, positions: list[int], drain_s: float, max_tokens: int) -> ApiError:
    """The HTTP answer to a batcher error. positions map batcher input indices to request indices; drain_s is
    how long the queue takes to empty (the Retry-After of a full queue); max_tokens the model's input limit."""
    retry = {"Retry-After": str(max(1, math.ceil(drain_s)))}
    if isinstance(error, Overloaded):
        headers = {"Retry-After": str(error.retry_after_s)}
        return ApiError(429, str(error), "overloaded", "rate_limit_error", headers=headers)
    if isinstance(error, QueueFull):
        return ApiError(429, str(error), "queue_full", "rate_limit_error", headers=retry)
    if isinstance(error, DeadlineExceeded):
        return ApiError(503, str(error), "deadline_exceeded", "server_error", headers=retry)
    if isinstance(error, InvalidInput):
        return ApiError(400, str(error), "invalid_input", param="input")
    if isinstance(error, TooManyTokens):
        return ApiError(413, str(error), "too_many_tokens", param="input")
    if isinstance(error, InputTooLong):
        message = (
            f"input[{positions[error.index]}] is longer than the model's limit of {max_tokens} tokens; shorten "
            "it or run the service with --long-input truncate"
        )
        return ApiError(413, message, "input_too_long", param="input")
    if isinstance(error, EngineUnavailable):
        return ApiError(503, str(error), "engine_unavailable", "server_error", headers={"Retry-After": "1"})
    if isinstance(error, (ShuttingDown, BatcherStopped)):
        return ApiError(503, str(error), "shutting_down", "server_error", headers={"Retry-After": "1"})
    assert isinstance(error, ComputeFailed), error
    return ApiError(500, str(error), "inference_failed", "server_error")


async def send_refusal(send: Send, scope: Scope, error: ApiError, t_start_s: float) -> None:
    """Answer error before the request's body is read, as a complete JSON response. The server's HTTP parser
    frames every request, so a body sent anyway is read and dropped and the connection serves the next
    request. A client waiting for `100 Continue` never sends its body, and its next request could be taken for
    one: that connection is closed after the answer."""
    record = record_of(scope)
    if record is not None:
        record.error = error.code
    headers = dict(error.headers)
    if any(name == b"expect" and value.lower() == b"100-continue" for name, value in scope["headers"]):
        headers["Connection"] = "close"
    await send_bytes(send, *json_answer(error.status, error.body(), headers, t_start_s))


def json_answer(status: int, body: object, headers: dict[str, str], t_start_s: float | None = None) -> Answer:
    """A JSON response; with t_start_s, a Server-Timing total since then."""
    if t_start_s is not None:
        headers = {"Server-Timing": server_timing({"total": (time.perf_counter() - t_start_s) * 1000}), **headers}
    return status, json.dumps(body).encode(), {**JSON_TYPE, **headers}


async def send_bytes(send: Send, status: int, content: bytes, headers: dict[str, str]) -> None:
    """A complete response on the ASGI channel: content, its length and the given headers."""
    raw = [(b"content-length", str(len(content)).encode())]
    raw += [(name.lower().encode(), value.encode("latin-1")) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": content})
