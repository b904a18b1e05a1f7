"""text-embeddings-inference's wire format as the TEI stub (tests/fakes/tei_stub.py) speaks it: the error shape
and statuses, axum's plain-text rejections, the per-response timing headers and the embed request's options.

From TEI v1.9.3: router/src/lib.rs (ErrorType, ErrorResponse, ResponseMetadata -> HeaderMap),
router/src/http/server.rs (ErrorType -> StatusCode), router/src/http/types.rs (EmbedRequest), and axum 0.7's
Json extractor and DefaultBodyLimit for bodies it cannot take.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from loadgen.processes.stub_target import Receive, Scope, Send

ErrorType = Literal["Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"]
# router/src/http/server.rs, `impl From<&ErrorType> for StatusCode`; Validation: see status_of
STATUS_OF_ERROR: dict[str, int] = {
    "Unhealthy": 503,
    "Backend": 424,
    "Overloaded": 429,
    "Tokenizer": 422,
    "Empty": 400,
}
PLAIN_TEXT = (b"content-type", b"text/plain; charset=utf-8")
Headers = list[tuple[bytes, bytes]]


class TeiError(Exception):
    """An answer in TEI's error shape {"error", "error_type"}; failure: the te_request_failure label it counts
    under."""

    def __init__(self, error_type: ErrorType, message: str, failure: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.failure = failure

    def body(self) -> dict[str, str]:
        return {"error": self.message, "error_type": self.error_type}


class Rejection(Exception):
    """axum's plain-text answer to a body it cannot extract (never TEI's JSON error shape)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def status_of(error_type: ErrorType, validation_status: int) -> int:
    """The status of a TEI error; validation_status: 422 since TEI 1.9.0, 413 before it."""
    return validation_status if error_type == "Validation" else STATUS_OF_ERROR[error_type]


def shape_error(detail: str) -> Rejection:
    """axum's answer to JSON of the wrong shape (a missing field, a wrong type)."""
    return Rejection(422, f"Failed to deserialize the JSON body into the target type: {detail}")


@dataclass
class Phases:
    """Where one request's time went, in seconds (TEI's ResponseMetadata): per-input means."""

    tokenization_s: float = 0.0
    queue_s: float = 0.0
    inference_s: float = 0.0


def timing_headers(total_s: float, phases: Phases, chars: int, tokens: int) -> Headers:
    """TEI's per-response headers (`impl From<ResponseMetadata> for HeaderMap`): times in whole milliseconds,
    truncated (Rust's Duration::as_millis); x-compute-time and x-total-time both since the request arrived."""

    def ms(seconds: float) -> bytes:
        return str(int(seconds * 1000)).encode()

    return [
        (b"x-compute-type", b"gpu+optimized"),
        (b"x-compute-time", ms(total_s)),
        (b"x-compute-characters", str(chars).encode()),
        (b"x-compute-tokens", str(tokens).encode()),
        (b"x-total-time", ms(total_s)),
        (b"x-tokenization-time", ms(phases.tokenization_s)),
        (b"x-queue-time", ms(phases.queue_s)),
        (b"x-inference-time", ms(phases.inference_s)),
    ]


def embed_options(body: Any, normalize: bool, dimensions: bool) -> tuple[bool | None, bool, int | None]:
    """truncate, normalize (default true) and dimensions of an embed body, or axum's 422 for a wrong type;
    the flags say which of normalize and dimensions the route reads."""
    if not isinstance(body, dict):
        raise shape_error("invalid type: expected struct EmbedRequest")
    truncate = body.get("truncate")
    norm = body.get("normalize", True) if normalize else True
    dims = body.get("dimensions") if dimensions else None
    if not isinstance(truncate, bool | None) or not isinstance(norm, bool):
        raise shape_error("truncate and normalize are booleans")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 0):
        raise shape_error("dimensions: invalid value, expected usize")
    return truncate, norm, dims


async def read_json_body(scope: Scope, receive: Receive, limit_bytes: int) -> Any:
    """The request body as JSON, or axum's rejection (its Json extractor and DefaultBodyLimit)."""
    body = bytearray()
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > limit_bytes:
            raise Rejection(413, "Failed to buffer the request body: length limit exceeded")
    content_type = next((v for k, v in scope["headers"] if k == b"content-type"), b"").decode("latin-1")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if not (media_type == "application/json" or media_type.endswith("+json")):
        raise Rejection(415, "Expected request with `Content-Type: application/json`")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise Rejection(400, f"Failed to parse the request body as JSON: {exc}") from None


async def send_bytes(send: Send, status: int, body: bytes, headers: Headers | None = None) -> None:
    raw = [(b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, payload: Any, headers: Headers | None = None) -> None:
    content = json.dumps(payload, separators=(",", ":")).encode()
    await send_bytes(send, status, content, [(b"content-type", b"application/json"), *(headers or [])])
