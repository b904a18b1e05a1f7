"""uvicorn's httptools connection protocol with the request head bounded in size and time.

A request head (request line and headers) over max_head_bytes is answered 431 and its connection closed as
soon as that many bytes have arrived, before uvicorn has gathered the headers or the app has seen them; a head
not complete within head_timeout_s (a client trickling its headers) is answered 408. Only the public
connection callbacks are extended (asyncio's data_received and httptools' message callbacks); uvicorn takes
the class through its documented `http` setting.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _raw_response(status: int, reason: str, message: str, code: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def bounded_protocol(max_head_bytes: int, head_timeout_s: float) -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's Config(http=...), with these bounds."""
    too_large = _raw_response(
        431,
        "Request Header Fields Too Large",
        f"the request head exceeds {max_head_bytes} bytes; send smaller headers",
        "headers_too_large",
    )
    too_slow = _raw_response(
        408,
        "Request Timeout",
        f"the request head did not arrive within {head_timeout_s:g} s",
        "head_timeout",
    )

    class BoundedHeadProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.embedperf_head_bytes = 0
            self.embedperf_in_head = True
            self.embedperf_timer: asyncio.TimerHandle | None = None
            self.embedperf_start_timer()

        def embedperf_start_timer(self) -> None:
            if self.embedperf_timer is not None:
                self.embedperf_timer.cancel()
            loop = asyncio.get_running_loop()
            self.embedperf_timer = loop.call_later(head_timeout_s, self.embedperf_refuse, too_slow)

        def embedperf_refuse(self, response: bytes) -> None:
            if self.embedperf_in_head and not self.transport.is_closing():
                self.transport.write(response)
                self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if not self.embedperf_in_head:  # the next request on a kept-alive connection
                self.embedperf_in_head = True
                self.embedperf_head_bytes = 0
                self.embedperf_start_timer()

        def on_headers_complete(self) -> None:
            self.embedperf_in_head = False
            if self.embedperf_timer is not None:
                self.embedperf_timer.cancel()
                self.embedperf_timer = None
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():
                return
            super().data_received(data)
            if self.embedperf_in_head:  # this chunk did not complete the head: all of it was head
                self.embedperf_head_bytes += len(data)
                if self.embedperf_head_bytes > max_head_bytes:
                    self.embedperf_refuse(too_large)

        def connection_lost(self, exc: Any) -> None:
            if self.embedperf_timer is not None:
                self.embedperf_timer.cancel()
            super().connection_lost(exc)

    return BoundedHeadProtocol
