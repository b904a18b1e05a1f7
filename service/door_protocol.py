"""Refuse an embedding request in the HTTP protocol itself, the moment its headers are parsed.

A refusal through the ASGI app costs a task, the middleware stack and uvicorn's response machinery, so an
opening burst of 1,000 connections held the event loop for ~60 ms on a small host and a request (or a
/health probe) arriving behind it waited that long (`make bench-refusal` compares the two paths' CPU per
429). Here the door (`service.admission.admit_at_door`) is asked before uvicorn starts the request's task.
A refused request is answered with prebuilt bytes and its body, if any, is read and dropped by the parser,
so the connection stays usable for the next request. An admitted one's task is started by the loop gate,
a few per loop iteration (service/loop_gate.py).
"""

from __future__ import annotations

import functools
import select
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from service.admission import ADMITTED_AT_DOOR, EMBEDDINGS_PATH, error_response
from service.header_timeout import HeaderTimeoutProtocol
from service.loop_gate import Start
from service.openai_api import ApiError, server_timing
from service.request_io import CONNECTION_LOST, ConnectionLost
from service.teardown import Teardown

Door = Callable[[Start], "ApiError | None"]  # admit_at_door: refuses, or starts the handler

if not hasattr(HttpToolsProtocol, "_start_asgi_task"):  # the hook below; uvicorn >= 0.54 has it
    raise ImportError("this uvicorn version lacks HttpToolsProtocol._start_asgi_task; install uvicorn>=0.54")


# A request read this close to its connection's Retry-After counts as on time. The hold's timer counts from the
# loop's clock, read once per iteration, so it can fire up to an iteration's length (tens of ms under overload)
# before the Retry-After has passed; the request read at its release would then be held again, though its
# client was made to wait.
HOLD_SLACK_S = 0.1
REFUSALS_CACHED = 256  # distinct refusals kept ready-made; a burst refused together repeats a handful


def refusal_bytes(
    error: ApiError, total_ms: float, default_headers: list[tuple[bytes, bytes]], keep_alive: bool
) -> bytes:
    """A complete HTTP/1.1 response for an ApiError (status line, headers, JSON body).

    Only the date line (uvicorn's default headers, renewed each second) and the Server-Timing line are built
    per request; the rest is made once per distinct refusal (`make bench-refusal`: a quarter less CPU per 429).
    """
    head, rest = _refusal_parts(
        error.status,
        error.message,
        error.code,
        error.error_type,
        error.param,
        tuple(error.headers.items()),
        keep_alive,
    )
    lines = [name + b": " + value + b"\r\n" for name, value in default_headers]
    timing = f"server-timing: {_TIMING_BEFORE_TOTAL}{total_ms:.3f}\r\n".encode()
    return b"".join([head, *lines, timing, rest])


_TIMING_BEFORE_TOTAL = server_timing(0, 0, 0, 0, 0).rpartition("=")[0] + "="


@functools.lru_cache(maxsize=REFUSALS_CACHED)
def _refusal_parts(
    status: int,
    message: str,
    code: str,
    error_type: str,
    param: str | None,
    headers: tuple[tuple[str, str], ...],
    keep_alive: bool,
) -> tuple[bytes, bytes]:
    """The status line, and the header lines after Server-Timing through the end of the body."""
    error = ApiError(status, message, code, error_type, param, dict(headers))
    raw_headers, body = error_response(error, 0.0)
    lines = [name + b": " + value + b"\r\n" for name, value in raw_headers if name != b"server-timing"]
    if not keep_alive:
        lines.append(b"connection: close\r\n")
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()
    return head, b"".join(lines) + b"\r\n" + body


class DoorProtocol(HeaderTimeoutProtocol):
    """uvicorn's protocol (with the header deadline) that answers the door's refusals without a task.

    A connection refused again before the Retry-After of its previous 429 has passed is not read until this
    refusal's Retry-After has: its client is not waiting between tries, and at 1,000 such connections the
    event loop spent itself answering ~12,500 429s a second, holding the GIL from the inference thread (goodput
    fell to about a quarter of capacity). A client that waits, or comes back and is let in, is never held.
    """

    door: Door | None = None
    on_hold: Callable[[], None] | None = None  # counts held connections (a metric)
    # Closes and cleans up hung-up connections a slice at a time (service_protocol sets one); None: at once.
    teardown: Teardown | None = None
    _close_queued = False
    _retry_at_s = 0.0  # when this connection's last 429 told its client to come back

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        scope = cycle.scope
        door = self.door
        if door is not None and scope["method"] == "POST" and scope["path"] == EMBEDDINGS_PATH:
            t_start_s = time.perf_counter()
            refusal = door(lambda: self._start_admitted(cycle, app, t_start_s))
            if refusal is not None:
                self._refuse(cycle, refusal, (time.perf_counter() - t_start_s) * 1000)
            return
        super()._start_asgi_task(cycle, app)

    def _start_admitted(self, cycle: RequestResponseCycle, app: Any, t_door_s: float) -> bool:
        """Start the handler of a request the door let in (now, or on its turn at the loop gate), unless its
        client left while it waited."""
        if cycle.disconnected:
            cycle.on_response = _nothing  # never started: let reference counting free it, not the GC
            return False
        extensions: dict[str, Any] = cycle.scope.setdefault("extensions", {})
        extensions[ADMITTED_AT_DOOR] = {"t_s": t_door_s}  # the handler's Server-Timing counts from here
        extensions[CONNECTION_LOST] = ConnectionLost()
        super()._start_asgi_task(cycle, app)
        return True

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol allows a bool
        """The client closed its side: mark its unanswered request as gone now and close the connection on a
        later turn of the teardown queue (as uvicorn would close it at once: no answer is sent after EOF).
        Closing ~1,000 sockets, and their protocols' clean-up, held the event loop ~20 ms in one piece."""
        self._mark_request_gone()
        if self.teardown is None:
            return None  # the transport closes itself now
        self._close_soon()
        return True  # kept open until then; no more reading

    def connection_lost(self, exc: Exception | None) -> None:
        """Mark the unanswered request as gone now (its work is skipped from here on), and leave the rest of
        the clean-up (abandoning the work, uvicorn's own) to the teardown queue."""
        signal = self._mark_request_gone()
        if self.teardown is None:
            self._finish_connection_lost(exc, signal)
        else:
            self.teardown.add(self._finish_connection_lost, exc, signal)

    def _mark_request_gone(self) -> ConnectionLost | None:
        """Cheap, and at once: the request in flight, if any, is marked disconnected; its signal (returned)
        is marked lost, so the batcher's workers skip its work before its callbacks have run."""
        self._cancel_header_timer()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return None
        cycle.disconnected = True  # as uvicorn would: an answer the handler still sends is dropped
        extensions: dict[str, Any] = cycle.scope.get("extensions", {})
        signal: ConnectionLost | None = extensions.get(CONNECTION_LOST)
        if signal is not None:
            signal.mark()
        return signal

    def _finish_connection_lost(self, exc: Exception | None, signal: ConnectionLost | None) -> None:
        if signal is not None:
            signal.fire()
        super().connection_lost(exc)

    def _refuse(self, cycle: RequestResponseCycle, error: ApiError, total_ms: float) -> None:
        # A client waiting for "100 Continue" may never send its body: close instead of guessing.
        keep_alive = cycle.keep_alive and not cycle.waiting_for_100_continue
        cycle.keep_alive = keep_alive
        self.transport.write(refusal_bytes(error, total_ms, self.server_state.default_headers, keep_alive))
        cycle.response_started = cycle.response_complete = True  # the parser now drops the body
        if not keep_alive:
            self.transport.close()
        cycle.on_response()  # uvicorn's bookkeeping: keep-alive timer, next pipelined request
        cycle.on_response = _nothing  # as uvicorn does after a handler: no cycle -> protocol -> cycle loop
        if keep_alive:
            self._hold_if_early(error)

    def _hold_if_early(self, error: ApiError) -> None:
        if error.status != 429 or "Retry-After" not in error.headers:
            return
        retry_after_s = float(error.headers["Retry-After"])
        now_s = time.monotonic()
        early = now_s < self._retry_at_s - HOLD_SLACK_S
        self._retry_at_s = now_s + retry_after_s
        if early and not self.transport.is_closing():
            self.transport.pause_reading()
            self.loop.call_later(retry_after_s, self._release_hold)
            if self.on_hold is not None:
                self.on_hold()

    def _release_hold(self) -> None:
        if self.transport.is_closing() or self.flow.read_paused:  # uvicorn's own pause stays
            return
        if peer_has_closed(self.transport):
            # Its client left while held (the end of a load): the request waiting unread would be admitted
            # and computed for nobody before the end of the stream was read.
            self._close_soon()
            return
        self.transport.resume_reading()

    def _close_soon(self) -> None:
        """Close the connection on the teardown queue's turn (at once without a queue), once."""
        if self.teardown is None:
            self.transport.close()
        elif not self._close_queued:
            self._close_queued = True
            self.teardown.add(self.transport.close)


def peer_has_closed(transport: Any) -> bool:
    """Whether the client has closed its side of the connection, seen without reading what it sent before
    (Linux: POLLRDHUP). False where that cannot be told."""
    sock = transport.get_extra_info("socket")
    rdhup = getattr(select, "POLLRDHUP", 0)
    if sock is None or not rdhup:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), rdhup)
    return any(events & (rdhup | select.POLLHUP) for _, events in poller.poll(0))


def _nothing() -> None:
    """The response callback of a finished or abandoned request.

    A cycle's callback is a bound method of its protocol, which holds the cycle: left in place, every
    refused request's connection becomes cyclic garbage (~15 objects) that only a full collection frees,
    and those collections then walked ~70,000 such objects and held the event loop for 70-100 ms.
    """


def service_protocol(
    header_timeout_s: float, door: Door, on_hold: Callable[[], None] | None = None
) -> type[DoorProtocol]:
    """The protocol class uvicorn should instantiate (`uvicorn.Config(http=...)`)."""
    attributes = {"header_timeout_s": header_timeout_s, "door": staticmethod(door), "teardown": Teardown()}
    if on_hold is not None:
        attributes["on_hold"] = staticmethod(on_hold)
    return type("DoorProtocol", (DoorProtocol,), attributes)
