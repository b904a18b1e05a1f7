"""Request intake that bounds what one client can cost: body size and read time, input length, hang-ups, and
the admission limits in front of the queue (a concurrency cap and a token-bucket rate limit, both -> 429)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Literal

from starlette.types import Message, Receive, Scope

from service.batch_job import CLIENT_DISCONNECTED
from service.openai_api import CLIENT_CLOSED_REQUEST, ApiError

# Truncate mode cuts each input to this many characters per model token before tokenising: a token covers at
# least one character, and real text averages 2-6, so the cut never shortens what the model would see while a
# megabyte of text costs the tokeniser only a few kilobytes.
TRUNCATE_CHARS_PER_TOKEN = 16
BODY_LATE = "request body late"  # the cancellation of a request whose body did not arrive in time
WATCHERS: set[asyncio.Future[Message]] = set()  # hang-up watches whose messages have not come
HANG_UP_WATCH_AFTER_S = 0.05  # how long a request runs before its hang-up watch starts (cancelled_on_hang_up)


def header(scope: Scope, name: bytes) -> str | None:
    """The value of a request header (name in lower case), None when the request has none."""
    return next((value.decode("latin-1") for key, value in scope["headers"] if key == name), None)


async def read_body(scope: Scope, receive: Receive, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, or 413 once it exceeds max_bytes (Content-Length first, then while streaming,
    so chunked uploads are bounded too) and 408 when it has not fully arrived within timeout_s."""
    declared = header(scope, b"content-length")
    if declared is not None:
        if not declared.isdigit():
            message = f"Content-Length {declared!r} is not a whole number of bytes"
            raise ApiError(400, message, "invalid_content_length")
        if int(declared) > max_bytes:
            raise _too_large(int(declared), max_bytes)
    chunks, size, more = list[bytes](), 0, True  # the body's parts, their bytes, whether more are to come
    task = asyncio.current_task()
    assert task is not None  # a request runs in a task
    late = asyncio.get_running_loop().call_later(timeout_s, task.cancel, BODY_LATE)  # cheaper than asyncio.timeout
    try:
        while more:
            part = await receive()
            if part["type"] == "http.disconnect":
                raise client_gone()
            chunks.append(part.get("body", b""))
            size, more = size + len(chunks[-1]), part.get("more_body", False)
            if size > max_bytes:
                raise _too_large(size, max_bytes)
    except asyncio.CancelledError as exc:
        if BODY_LATE not in exc.args:
            raise
        task.uncancel()
        why = f"the request body did not arrive within {timeout_s:g} s; send it at once"
        raise ApiError(408, why, "request_timeout", headers={"Connection": "close"}) from None
    finally:
        late.cancel()
    return b"".join(chunks)


def _too_large(size_bytes: int, max_bytes: int) -> ApiError:
    message = (
        f"request body of {size_bytes} bytes or more exceeds the limit of {max_bytes} bytes; "
        "send fewer or shorter inputs per request"
    )
    return ApiError(413, message, "request_too_large", headers={"Connection": "close"})


def limit_chars(
    texts: list[str], max_input_chars: int, long_input: Literal["truncate", "reject"], max_tokens: int
) -> list[str]:
    """Apply the per-input character limit before any tokenisation: reject mode answers 413 over
    max_input_chars; truncate mode cuts to min(max_input_chars, max_tokens x TRUNCATE_CHARS_PER_TOKEN)."""
    if long_input == "reject":
        for index, text in enumerate(texts):
            if len(text) > max_input_chars:
                message = (
                    f"input[{index}] has {len(text)} characters; at most {max_input_chars} are accepted "
                    "(and the model reads only its token limit); shorten it"
                )
                raise ApiError(413, message, "input_too_long", param="input")
        return texts
    cut = min(max_input_chars, max_tokens * TRUNCATE_CHARS_PER_TOKEN)
    return [text if len(text) <= cut else text[:cut] for text in texts]


def client_gone() -> ApiError:
    """The answer to a request whose client hung up (nobody reads it; it shows in the access log)."""
    return ApiError(
        CLIENT_CLOSED_REQUEST, "the client closed the connection before the response", "client_closed_request"
    )


class cancelled_on_hang_up:  # noqa: N801 - used as `async with cancelled_on_hang_up(receive):`
    """Cancel the calling task with CLIENT_DISCONNECTED if the client hangs up inside the block. As vLLM's
    server does: the ASGI receive channel says `http.disconnect` when the connection drops, and the
    cancellation reaches the batcher, which drops the request's work wherever it is. The caller turns that
    CancelledError into `client_gone()` (and uncancels its task); any other cancellation passes through.
    The body has been read, so only http.disconnect matters: the watch is a callback on the awaited message
    (`ensure_future` keeps a server's own future as it is: no task a request), left to end on the message
    ASGI answers once the response is sent. It starts after HANG_UP_WATCH_AFTER_S: a request answered sooner
    (most, below saturation) costs no watch, ~30 CPU-us of a front end's ~270; a hang-up is seen at most that
    late. A class rather than contextlib's generator: it runs per request."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._inside = False

    async def __aenter__(self) -> None:
        self._task = asyncio.current_task()
        self._inside = True
        self._armed = asyncio.get_running_loop().call_later(HANG_UP_WATCH_AFTER_S, self._watch)

    async def __aexit__(self, *exc_info: object) -> None:
        self._inside = False
        self._armed.cancel()

    def _watch(self) -> None:
        message = asyncio.ensure_future(self._receive())
        WATCHERS.add(message)  # the loop keeps weak references to tasks only
        message.add_done_callback(self._on_message)

    def _on_message(self, message: asyncio.Future[Message]) -> None:
        WATCHERS.discard(message)
        if not self._inside or message.cancelled() or message.exception() is not None:
            return
        if message.result()["type"] != "http.disconnect":
            self._watch()
        elif self._task is not None:
            self._task.cancel(CLIENT_DISCONNECTED)


class ConcurrencyLimit:
    """At most `limit` requests in flight (0 = unlimited; event loop only); more are refused, not queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0

    def try_acquire(self) -> bool:
        if admitted := not self.limit or self.inflight < self.limit:
            self.inflight += 1
        return admitted

    def release(self) -> None:
        self.inflight -= 1


class RateLimit:
    """Token bucket of `qps` requests per second with a one-second burst (0 = unlimited)."""

    def __init__(self, qps: float, clock: Callable[[], float] | None = None) -> None:
        self.qps = qps
        self.burst = max(1.0, qps)
        self._tokens = self.burst
        self._clock = clock or time.monotonic
        self._t_last_s = self._clock()

    def try_acquire(self) -> tuple[bool, int]:
        """(admitted, retry_after_s): retry_after_s says when a token will next be available."""
        if not self.qps:
            return True, 0
        now_s = self._clock()
        self._tokens = min(self.burst, self._tokens + (now_s - self._t_last_s) * self.qps)
        self._t_last_s = now_s
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True, 0
        return False, max(1, math.ceil((1.0 - self._tokens) / self.qps))
