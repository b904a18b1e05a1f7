"""A deadline on request headers: a client that opens a connection and sends its headers slowly (or not
at all) is answered 408 and disconnected, instead of holding a connection for ever.

uvicorn times out only idle keep-alive connections between requests; a connection that never completes
its request line and headers stays open. The deadline runs from the connection's opening (first request)
or from the first byte of each later request, and stops when the headers are complete: the body has its
own deadline (`--body-timeout-s`, service/request_io.py).
"""

from __future__ import annotations

import asyncio
import json
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.openai_api import error_body

log = logging.getLogger("embedperf.service")


def timeout_response(timeout_s: float) -> bytes:
    """A complete 408 with an OpenAI-shaped JSON body, as the body deadline answers."""
    body = json.dumps(
        error_body(
            f"the request headers did not arrive within {timeout_s:g} s; send them at once",
            "invalid_request_error",
            "request_timeout",
        )
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus a per-request deadline on the request line and headers."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_timer is None:  # a later request on a kept-alive connection
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._cancel_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        log.debug("closing a connection whose request headers took over %.1f s", self.header_timeout_s)
        self.transport.write(timeout_response(self.header_timeout_s))
        self.transport.close()
