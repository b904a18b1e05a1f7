"""Refusals answered by the HTTP protocol on a real uvicorn server (loopback): a refused request gets a
complete 429 without reaching the app, its body is dropped, and the connection serves the next request."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from starlette.types import Receive, Scope, Send

from service.admission import ADMITTED_AT_DOOR
from service.door_protocol import service_protocol
from service.openai_api import ApiError
from service.request_io import CONNECTION_LOST
from tests.conftest import uvicorn_in_thread

WAIT_S = 10.0


@dataclass
class Door:
    """Refuses the next `refusals` embedding requests, then lets them in."""

    refusals: int = 0
    asked: int = 0
    retry_after: str = "2"

    def __call__(self, start: Callable[[], bool]) -> ApiError | None:
        self.asked += 1
        if self.refusals > 0:
            self.refusals -= 1
            headers = {"Retry-After": self.retry_after}
            return ApiError(429, "busy", "overloaded", "rate_limit_error", headers=headers)
        start()
        return None


@dataclass
class EchoApp:
    """Answers 200 with the request body and whether the door admitted it; holds `{"input": "hold"}` until
    its connection is lost, listening only to the protocol's ConnectionLost signal (never to receive())."""

    calls: list[tuple[str, bytes, bool]] = field(default_factory=list)
    holding: threading.Event = field(default_factory=threading.Event)
    lost_seen: threading.Event = field(default_factory=threading.Event)
    lost_after_answer: list[bytes] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        admitted = ADMITTED_AT_DOOR in scope.get("extensions", {})
        self.calls.append((scope["path"], body, admitted))
        lost = scope.get("extensions", {}).get(CONNECTION_LOST)
        if body == b'{"input": "hold"}':
            gone = asyncio.Event()
            lost.subscribe(gone.set)
            self.holding.set()
            await gone.wait()
            self.lost_seen.set()
            return
        if lost is not None:
            lost.subscribe(lambda: self.lost_after_answer.append(body))
        answer = json.dumps({"body": body.decode(), "admitted": admitted}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[tuple[str, int], Door, EchoApp]]:
    door, app = Door(), EchoApp()
    with uvicorn_in_thread(app, service_protocol(10.0, door)) as address:
        yield address, door, app


def post(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


class Reader:
    """Reads whole HTTP/1.1 responses (Content-Length framed) off one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        sock.settimeout(WAIT_S)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def closed(self) -> bool:
        return not self.buffer and self.sock.recv(1) == b""

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole response")
        self.buffer += chunk


def test_a_refusal_never_reaches_the_app_and_the_connection_serves_the_next_request(
    served: tuple[tuple[str, int], Door, EchoApp],
) -> None:
    address, door, app = served
    calls_before = len(app.calls)
    door.refusals = 1
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        sock.sendall(post(b'{"input": "refused"}'))
        status, headers, body = reader.response()
        assert status == 429
        assert json.loads(body)["error"]["code"] == "overloaded"
        assert headers["retry-after"] == "2" and headers["content-type"] == "application/json"
        assert "total;dur=" in headers["server-timing"] and "date" in headers
        assert "connection" not in headers  # kept alive
        sock.sendall(post(b'{"input": "next"}'))
        status, _, body = reader.response()
    assert status == 200
    assert json.loads(body) == {"body": '{"input": "next"}', "admitted": True}
    assert len(app.calls) == calls_before + 1  # only the admitted request reached the app


def test_pipelined_requests_after_a_refusal_keep_their_own_bodies(
    served: tuple[tuple[str, int], Door, EchoApp],
) -> None:
    address, door, _app = served
    door.refusals = 2
    chunked = (
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        sock.sendall(
            post(b"x" * 100_000)
            + chunked
            + post(b'{"input": "third"}')
            + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        answers = [reader.response() for _ in range(4)]
    assert [status for status, _, _ in answers] == [429, 429, 200, 200]
    assert json.loads(answers[2][2])["body"] == '{"input": "third"}'
    assert json.loads(answers[3][2]) == {"body": "", "admitted": False}  # not an embedding request: no door


HEADERS_ONLY_100_CONTINUE = (
    post(b'{"input": "never sent"}', extra=b"Expect: 100-continue\r\n").partition(b"\r\n\r\n")[0]
    + b"\r\n\r\n"
)  # headers only, as such a client sends them: it may never send its body
HTTP_1_0 = post(b"{}").replace(b"HTTP/1.1", b"HTTP/1.0", 1)


@pytest.mark.parametrize(
    "request_bytes", [HEADERS_ONLY_100_CONTINUE, HTTP_1_0], ids=["100-continue", "http-1.0"]
)
def test_refusals_that_cannot_keep_the_connection_close_it(
    served: tuple[tuple[str, int], Door, EchoApp], request_bytes: bytes
) -> None:
    address, door, _app = served
    door.refusals = 1
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        sock.sendall(request_bytes)
        status, headers, _ = reader.response()
        assert status == 429 and headers["connection"] == "close"
        assert reader.closed()


def test_the_door_is_asked_only_for_embedding_posts(served: tuple[tuple[str, int], Door, EchoApp]) -> None:
    address, door, _app = served
    door.refusals = 0
    asked_before = door.asked
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        sock.sendall(
            b"GET /v1/embeddings HTTP/1.1\r\nHost: x\r\n\r\n"
            + post(b"{}").replace(b"/v1/embeddings", b"/v1/other")
        )
        assert [reader.response()[0] for _ in range(2)] == [200, 200]
    assert door.asked == asked_before


def test_a_dropped_connection_signals_its_unanswered_request_only(
    served: tuple[tuple[str, int], Door, EchoApp],
) -> None:
    address, door, app = served
    door.refusals = 0
    with socket.create_connection(address) as sock:
        sock.sendall(post(b'{"input": "answered"}'))
        assert Reader(sock).response()[0] == 200
    with socket.create_connection(address) as sock:
        sock.sendall(post(b'{"input": "hold"}'))
        assert app.holding.wait(WAIT_S)
    assert app.lost_seen.wait(WAIT_S)  # the app never called receive(): the protocol told it
    assert app.lost_after_answer == []  # a connection closed after its answer signals nothing


def test_a_storm_of_half_closed_connections_is_signalled_and_closed_by_the_server() -> None:
    """Clients that shut their sending side (EOF) while their requests wait: each request's signal fires and
    the server closes every connection, through the teardown queue's slices (200 connections, slices of 32)."""
    door, app = Door(), HoldAll()
    with uvicorn_in_thread(app, service_protocol(10.0, door)) as address:
        socks = [socket.create_connection(address) for _ in range(200)]
        try:
            for sock in socks:
                sock.sendall(post(b'{"input": "hold"}'))
            deadline_s = time.monotonic() + WAIT_S
            while app.holding < len(socks) and time.monotonic() < deadline_s:
                time.sleep(0.01)
            assert app.holding == len(socks)
            for sock in socks:
                sock.shutdown(socket.SHUT_WR)
            for sock in socks:
                sock.settimeout(WAIT_S)
                assert sock.recv(1) == b""  # closed by the server, no answer sent
            while app.lost < len(socks) and time.monotonic() < deadline_s:
                time.sleep(0.01)
            assert app.lost == len(socks)
        finally:
            for sock in socks:
                sock.close()


@dataclass
class HoldAll:
    """Holds every request until the protocol signals its connection lost; counts both."""

    holding: int = 0
    lost: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        gone = asyncio.Event()
        scope["extensions"][CONNECTION_LOST].subscribe(gone.set)
        self.holding += 1
        await gone.wait()
        self.lost += 1


def test_refused_requests_leave_no_cyclic_garbage(served: tuple[tuple[str, int], Door, EchoApp]) -> None:
    """A refused request's connection is freed by reference counting once it closes: under overload most
    connections are refused, and cyclic garbage from each would pile up until a full collection, which then
    holds the event loop for tens of milliseconds."""
    address, door, _ = served
    gc.collect()
    gc.disable()
    try:
        door.refusals = 20
        for _ in range(20):
            with socket.create_connection(address) as sock:
                sock.sendall(post(b'{"input": "refused"}'))
                assert Reader(sock).response()[0] == 429
        time.sleep(0.3)  # the server has seen every connection close
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(thing).__name__ for thing in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not {"DoorProtocol", "RequestResponseCycle"} & kinds, sorted(kinds)


@pytest.fixture(scope="module")
def holding() -> Iterator[tuple[tuple[str, int], Door, list[int]]]:
    door, holds = Door(retry_after="1"), []
    with uvicorn_in_thread(
        EchoApp(), service_protocol(10.0, door, on_hold=lambda: holds.append(1))
    ) as address:
        yield address, door, holds


def timed(reader: Reader, sock: socket.socket, body: bytes) -> tuple[int, float]:
    t_start_s = time.perf_counter()
    sock.sendall(post(body))
    status = reader.response()[0]
    return status, time.perf_counter() - t_start_s


def test_a_connection_refused_again_before_its_retry_after_is_not_read_until_it_passes(
    holding: tuple[tuple[str, int], Door, list[int]],
) -> None:
    address, door, holds = holding
    holds.clear()
    door.refusals = 3
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        first, first_s = timed(reader, sock, b'{"input": "one"}')
        early, early_s = timed(reader, sock, b'{"input": "again at once"}')  # answered, then the hold begins
        held, held_s = timed(reader, sock, b'{"input": "and again"}')
    assert (first, early, held) == (429, 429, 429)
    assert first_s < 0.5 and early_s < 0.5  # every request read is answered at once
    assert 0.8 < held_s < 5, "the third request was read before the second one's Retry-After (1 s) passed"
    assert holds == [1]


def test_a_held_connection_whose_client_has_left_is_closed_without_reading_its_request(
    holding: tuple[tuple[str, int], Door, list[int]],
) -> None:
    """At the end of a load, clients that retried at once and were held have gone: the request each left
    unread must not be admitted (and computed) when its hold ends."""
    address, door, holds = holding
    holds.clear()
    door.refusals = 2
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        assert timed(reader, sock, b'{"input": "one"}')[0] == 429
        assert timed(reader, sock, b'{"input": "again at once"}')[0] == 429  # now held for 1 s
        asked = door.asked
        sock.sendall(post(b'{"input": "left behind"}'))
        sock.shutdown(socket.SHUT_WR)  # the client leaves while held
        t_start_s = time.perf_counter()
        with contextlib.suppress(ConnectionResetError):  # reset: closed with the request left unread
            assert reader.closed()  # closed by the server when the hold ended, nothing answered
        assert 0.8 < time.perf_counter() - t_start_s < 5
    assert door.asked == asked  # the request left behind was never read
    assert holds == [1]


def test_a_client_that_waits_out_retry_after_or_is_let_in_is_never_held(
    holding: tuple[tuple[str, int], Door, list[int]],
) -> None:
    address, door, holds = holding
    holds.clear()
    with socket.create_connection(address) as sock:
        reader = Reader(sock)
        door.refusals = 2
        assert timed(reader, sock, b'{"input": "one"}')[0] == 429
        time.sleep(1.1)  # waits out Retry-After: 1
        status, waited_s = timed(reader, sock, b'{"input": "after waiting"}')
        assert status == 429 and waited_s < 0.5
        door.refusals = 0  # let in
        statuses_s = [timed(reader, sock, b'{"input": "let in"}') for _ in range(3)]
    assert [status for status, _ in statuses_s] == [200, 200, 200]
    assert max(seconds for _, seconds in statuses_s) < 0.5
    assert holds == []
