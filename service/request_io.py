"""Request intake that bounds what one client can cost: body size and read time, input length, disconnects."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

from starlette.requests import Request

from service.openai_api import CLIENT_CLOSED_REQUEST, ApiError

T = TypeVar("T")
# Truncate mode cuts each input to this many characters per model token before tokenising: a token covers at
# least one character, and real text averages 2-6, so the cut never shortens what the model would see while a
# megabyte of text costs the tokeniser only a few kilobytes.
TRUNCATE_CHARS_PER_TOKEN = 16
CONNECTION_LOST = "embedperf.connection_lost"  # scope["extensions"] key of a request's ConnectionLost


class ConnectionLost:
    """Callbacks the HTTP protocol (door_protocol.py) runs the moment a request's connection drops.

    The batcher registers one that abandons the request's work and fails its wait, so a burst of
    disconnections frees queue space and stops abandoned batches a loop turn or two after they happen, and
    the handler needs no task of its own watching for `http.disconnect`. The protocol marks the signal at
    once (`lost`, a flag the batcher's workers read, so no input of a gone request is computed, and the few
    cheap `on_mark` callbacks: the batcher frees the request's queue space, so the next request is not
    refused for it) and fires the other callbacks a slice of connections per loop turn (service/teardown.py).
    """

    def __init__(self) -> None:
        self.lost = False  # set the moment the connection drops; read from any thread
        self._callbacks: list[Callable[[], None]] = []
        self._mark_callbacks: list[Callable[[], None]] = []

    def mark(self) -> None:
        """The connection dropped: say so now and run the on_mark callbacks; fire() runs the others."""
        self.lost = True
        callbacks, self._mark_callbacks = self._mark_callbacks, []
        for callback in callbacks:
            callback()

    def on_mark(self, callback: Callable[[], None]) -> None:
        """Run callback (cheap: it runs inside the protocol's connection teardown) the moment the connection
        drops, or now if it already has."""
        if self.lost:
            callback()
        else:
            self._mark_callbacks.append(callback)

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Run callback when the connection drops, or now if it already has."""
        if self.lost:
            callback()
        else:
            self._callbacks.append(callback)

    def fire(self) -> None:
        self.mark()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


def connection_lost_signal(request: Request) -> ConnectionLost | None:
    """The request's ConnectionLost, when the HTTP protocol provides one (not with in-process clients)."""
    signal: ConnectionLost | None = request.scope.get("extensions", {}).get(CONNECTION_LOST)
    return signal


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, or 413 once it exceeds max_bytes (Content-Length first, then while streaming,
    so chunked uploads are bounded too) and 408 when it has not fully arrived within timeout_s."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, f"Content-Length {declared!r} is not a number", "invalid_request")
        if int(declared) > max_bytes:
            raise _too_large(int(declared), max_bytes)
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_bytes:
                    raise _too_large(len(body), max_bytes)
    except TimeoutError:
        raise ApiError(
            408,
            f"the request body did not arrive within {timeout_s:g} s; send it at once",
            "request_timeout",
            headers={"Connection": "close"},
        ) from None
    return bytes(body)


def _too_large(size_bytes: int, max_bytes: int) -> ApiError:
    return ApiError(
        413,
        f"request body of {size_bytes} bytes or more exceeds the limit of {max_bytes} bytes; "
        "send fewer or shorter inputs per request",
        "request_too_large",
        headers={"Connection": "close"},
    )


def limit_chars(
    texts: list[str], max_input_chars: int, long_input: Literal["truncate", "reject"], max_tokens: int
) -> list[str]:
    """Apply the per-input character limit before any tokenisation: reject mode answers 413 over
    max_input_chars; truncate mode cuts to min(max_input_chars, max_tokens x TRUNCATE_CHARS_PER_TOKEN)."""
    if long_input == "reject":
        for index, text in enumerate(texts):
            if len(text) > max_input_chars:
                raise ApiError(
                    413,
                    f"input[{index}] has {len(text)} characters; at most {max_input_chars} are accepted "
                    "(and the model reads only its token limit); shorten it",
                    "input_too_long",
                    param="input",
                )
        return texts
    cut = min(max_input_chars, max_tokens * TRUNCATE_CHARS_PER_TOKEN)
    return [text if len(text) <= cut else text[:cut] for text in texts]


async def _disconnected(request: Request) -> None:
    """Returns when the client goes away (the body has already been read, so only http.disconnect comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await work, but cancel it when the client disconnects first: its queued inputs are then dropped
    before compute and its queue space released (the batcher abandons a cancelled submission)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server cancelled this request: abandon the work before leaving
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise ApiError(
        CLIENT_CLOSED_REQUEST, "the client closed the connection before the response", "client_closed_request"
    )
