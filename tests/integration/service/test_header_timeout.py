"""The header deadline on a real uvicorn server (loopback, the service's own protocol): slow or silent
clients get 408 and lose their connection; prompt clients, kept-alive connections and slow bodies are left
to their own rules."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from starlette.types import Receive, Scope, Send

from embedperf.errors import ConfigError
from service.cli import settings_from_args
from service.door_protocol import service_protocol
from tests.conftest import uvicorn_in_thread

HEADER_TIMEOUT_S = 0.5
WAIT_S = 15.0  # far beyond the deadline: only a connection that is never closed fails


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    with uvicorn_in_thread(hello, service_protocol(HEADER_TIMEOUT_S, door=lambda: None)) as address:
        yield address


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(WAIT_S)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_half_sent_headers_get_408_and_the_connection_is_closed(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answer = read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert error["code"] == "request_timeout" and "headers" in error["message"]


def test_a_silent_connection_is_closed_too(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_prompt_requests_and_kept_alive_connections_are_untouched(server: tuple[str, int]) -> None:
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(server) as sock:
        sock.settimeout(WAIT_S)
        for _ in range(2):  # the second request comes after the deadline of the first has passed
            sock.sendall(request)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            time.sleep(HEADER_TIMEOUT_S * 2)
        # a later request that stalls mid-headers gets its own deadline
        sock.sendall(b"GET / HTTP/1.1\r\nHost")
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_the_service_option_is_validated() -> None:
    assert settings_from_args(["--header-timeout-s", "2.5"]).header_timeout_s == 2.5
    assert settings_from_args([]).header_timeout_s == 10.0
    with pytest.raises(ConfigError, match="header"):
        settings_from_args(["--header-timeout-s", "0"])
