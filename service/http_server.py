"""The HTTP server of every layout: granian's embeddable server (HTTP/1.1 parsed in Rust, outside the GIL)
running the service app on this process's event loop.

granian refuses a request head over --max-header-bytes with 431 and closes its connection (it reads the head
in blocks into a buffer of half that size, so a head between half and all of it may be refused too), and
closes a connection whose next request head has not arrived within --keep-alive-timeout-s: idle keep-alive
connections and clients trickling their headers alike. Every front end binds the port with SO_REUSEPORT, so
the kernel spreads connections over them; `reserve_port` holds the port for them (bound, not listening).
On SIGTERM or SIGINT the requests in flight get --shutdown-grace-s to finish, then the server stops; a request
that arrives meanwhile is answered a JSON 503 `shutting_down` with Retry-After and its connection closed."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.server.embed import Server

from service.http_errors import json_answer, send_bytes
from service.openai_api import error_body
from service.settings import ServiceSettings

log = logging.getLogger("service.http")
LISTEN_BACKLOG = 4096
DRAIN_POLL_S = 0.02

AsgiApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


SHUTTING_DOWN = error_body("the service is shutting down; retry on another replica", "server_error", "shutting_down")
DRAIN_HEADERS = {"Retry-After": "1", "Connection": "close"}


class InFlight:
    """The app, counting requests in flight (the shutdown waits for them), refusing new ones when draining."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.count = 0
        self.draining = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.draining:
            await send_bytes(send, *json_answer(503, SHUTTING_DOWN, DRAIN_HEADERS))
            return
        self.count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.count -= 1


def http_server(settings: ServiceSettings, app: AsgiApp) -> Server:
    head = HTTP1Settings(
        header_read_timeout=round(settings.keep_alive_timeout_s * 1000),  # settings keep it in granian's 1..60,000
        keep_alive=True,
        max_buffer_size=settings.max_header_bytes // 2,  # settings keep it at granian's 8 KiB or more
    )
    return Server(
        app,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        http=HTTPModes.http1,
        websockets=False,
        backlog=LISTEN_BACKLOG,
        http1_settings=head,
        log_enabled=False,  # the app writes the access log and its own messages
    )


async def serve(settings: ServiceSettings, app: AsgiApp) -> None:
    """Serve until SIGTERM or SIGINT, then let the requests in flight finish within the grace and stop."""
    counted = InFlight(app)
    server = http_server(settings, counted)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(server.serve())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if serving.done():  # it could not start (the port) or ended by itself
        stopping.cancel()
        serving.result()
        return
    counted.draining = True
    log.info("draining: %d request(s) in flight, a grace of %g s", counted.count, settings.shutdown_grace_s)
    deadline_s = time.monotonic() + settings.shutdown_grace_s
    while counted.count and time.monotonic() < deadline_s:
        await asyncio.sleep(DRAIN_POLL_S)
    left = counted.count
    server.stop()
    await serving
    log.info("HTTP server stopped (%d request(s) still in flight at the end of the grace)", left)


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket bound to (host, port) with SO_REUSEPORT and not listening: it holds the port (an ephemeral
    one when port is 0) for the servers that bind it beside it, and takes no connection itself."""
    holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind((host, port))
    return holder
