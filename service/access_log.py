"""Request IDs, the JSON access log and request counts: the outermost layer of the service's ASGI stack.

Every HTTP response carries `X-Request-ID` (the client's, else a new one: RequestIds) and every request writes one
JSON line (request_id, status, path, inputs, tokens, queue/tokenise/compute ms, the model that served it),
so a slow request found in a load test's report can be looked up in the service's log. The embeddings route
fills in what only it knows on the request's `RequestRecord`. An exception nothing else handled is answered
here as a JSON 500 that carries the ID too, and logged with its traceback."""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
import time
import uuid
from collections.abc import Callable
from typing import IO

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.http_errors import json_answer, send_bytes
from service.openai_api import error_body
from service.request_record import RECORD_KEY, RequestRecord

log = logging.getLogger("service.access")
REQUEST_ID_HEADER = b"x-request-id"
FLUSH_S = 0.2  # the longest a line waits to be written
MAX_REQUEST_ID_CHARS = 200  # a longer client ID (or one with spaces or non-ASCII) is replaced by a new one


class RequestIds:
    """New request IDs: 32 hex digits, a random prefix drawn once per process and a counter (unique across the
    service's processes and restarts, without drawing randomness for every request as uuid4 does)."""

    def __init__(self) -> None:
        self.prefix = uuid.uuid4().hex[:16]
        self.counter = itertools.count()

    def new(self) -> str:
        return f"{self.prefix}{next(self.counter):016x}"


def request_id_from(scope: Scope, ids: RequestIds) -> str:
    """The client's X-Request-ID when it sent a usable one, else a new one of `ids`."""
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER:
            text = value.decode("latin-1")
            printable = text.isascii() and text.isprintable() and " " not in text
            if 0 < len(text) <= MAX_REQUEST_ID_CHARS and printable:
                return text
            break
    return ids.new()


class AccessLog:
    """One JSON line per request to stderr ('-'), a file (appended to), or nowhere ('off'). Lines are written
    together at most FLUSH_S after the first of them: a write per request handed the GIL to the inference
    thread at every line, which cost ~5 % of closed-loop throughput (`make bench-ab`)."""

    def __init__(self, target: str) -> None:
        self._owned: IO[str] | None = None
        self.stream: IO[str] | None = None
        self._lines: list[str] = []
        if target == "-":
            self.stream = sys.stderr
        elif target != "off":
            self._owned = self.stream = open(target, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: RequestRecord) -> None:
        """Queue the request's line (call on the event loop); written with the others of the next FLUSH_S."""
        if self.stream is not None:
            self._lines.append(record.line())
            if len(self._lines) == 1:
                asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        if self.stream is not None and self._lines:
            self.stream.write("\n".join(self._lines) + "\n")
            self.stream.flush()
        self._lines.clear()

    def close(self) -> None:
        self.flush()
        if self._owned is not None:
            self._owned.close()
            self._owned = self.stream = None


class RequestContextMiddleware:
    """Pure ASGI middleware: request ID in and out, one access-log line per request, JSON 500 as a last resort."""

    def __init__(
        self, app: ASGIApp, access_log: AccessLog, on_done: Callable[[RequestRecord], None] | None = None
    ) -> None:
        self.app = app
        self.access_log = access_log
        self.on_done = on_done  # counts finished requests (the service's request metrics)
        self.ids = RequestIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = RequestRecord(request_id_from(scope, self.ids), scope["method"], scope["path"], time.perf_counter())
        scope.setdefault("state", {})[RECORD_KEY] = record
        header = (REQUEST_ID_HEADER, record.request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception("unexpected error on %s %s (request %s)", record.method, record.path, record.request_id)
            if not record.status:
                record.error = "internal_error"
                body = error_body("internal error; see the service log", "server_error", "internal_error")
                await send_bytes(send_with_id, *json_answer(500, body, {}))
        finally:
            self.access_log.write(record)
            if self.on_done is not None:
                self.on_done(record)
