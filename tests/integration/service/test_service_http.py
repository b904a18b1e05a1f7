"""The service behind the HTTP server configured exactly as `embedperf serve` configures it
(service.http_server.http_server), spoken to over raw sockets: refusals sent before a body is read leave the connection clean for the requests
pipelined behind them, and malformed framing is answered and closed."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import pytest

from modelcore.encoder import StopCheck
from modelcore.model import EmbeddingModel, load_model
from service.http_server import http_server, reserve_port
from service.local_app import create_app
from service.settings import ServiceSettings
from tests.integration.service.test_service_api import MODEL, GatedModel

WAIT_S = 30.0
KEY = "k3y"


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


@contextmanager
def serving(settings: ServiceSettings, model: Any) -> Iterator[tuple[str, int]]:
    """The app `embedperf serve` builds, under the server it uses, on a free port (in a thread); waits for
    /ready."""
    with reserve_port("127.0.0.1", 0) as holder:
        port = holder.getsockname()[1]
        settings = settings.model_copy(update={"port": port, "log_level": "warning", "access_log": "off"})
        server = http_server(settings, create_app(settings, model))
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
        thread.start()
        try:
            with httpx.Client(timeout=WAIT_S) as client:
                deadline_s = time.monotonic() + WAIT_S
                while time.monotonic() < deadline_s:
                    try:
                        if client.get(f"http://127.0.0.1:{port}/ready").status_code == 200:
                            break
                    except httpx.ConnectError:
                        pass
                    time.sleep(0.05)
            yield "127.0.0.1", port
        finally:
            loop.call_soon_threadsafe(server.stop)
            thread.join(timeout=10)


def post(body: bytes, *headers: bytes, chunked: bool = False) -> bytes:
    """A POST /v1/embeddings with extra header lines, framed by Content-Length or as one chunk."""
    head = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + b"".join(
        h + b"\r\n" for h in headers
    )
    if chunked:
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    return head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def embedding_body(text: str) -> bytes:
    """A valid request body whose text holds a whole HTTP request: read from the middle of a body, it would
    show up as a request of its own."""
    smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    return json.dumps({"model": MODEL, "input": f"{text} {smuggled}"}).encode()


class Reader:
    """Reads whole HTTP/1.1 responses (Content-Length framed, or ended by closing) off one socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.closed_by_server = False
        sock.settimeout(WAIT_S)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        if "content-length" not in headers and headers.get("connection", "").lower() == "close":
            body = self.buffer + self._rest()  # the server's own refusals: the body may end with the connection
            self.buffer = b""
            return int(lines[0].split()[1]), headers, body
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def closed(self) -> bool:
        return not self.buffer and (self.closed_by_server or self.sock.recv(1) == b"")

    def _rest(self) -> bytes:
        """Everything until the server closes the connection."""
        rest = b""
        while chunk := self.sock.recv(65536):
            rest += chunk
        self.closed_by_server = True
        return rest

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a whole response")
        self.buffer += chunk


def test_requests_pipelined_behind_unauthorised_ones_are_served_with_their_own_bodies(
    minilm: EmbeddingModel,
) -> None:
    key = b"Authorization: Bearer " + KEY.encode()
    with serving(ServiceSettings(api_keys=KEY), minilm) as address, socket.create_connection(address) as sock:
        sock.sendall(
            post(embedding_body("refused one"), b"X-Request-ID: r1")
            + post(embedding_body("served one"), key, b"X-Request-ID: s1")
            + post(embedding_body("refused, chunked"), b"X-Request-ID: r2", chunked=True)
            + post(
                embedding_body("served two, longer than the first"), key, b"X-Request-ID: s2", chunked=True
            )
        )
        reader = Reader(sock)
        answers = [reader.response() for _ in range(4)]
        assert [(status, headers["x-request-id"]) for status, headers, _ in answers] == [
            (401, "r1"),
            (200, "s1"),
            (401, "r2"),
            (200, "s2"),
        ]
        assert json.loads(answers[0][2])["error"]["code"] == "invalid_api_key"
        assert "connection" not in answers[0][1]  # kept alive: the server dropped the unread body itself
        tokens = [json.loads(body)["usage"]["prompt_tokens"] for _, _, body in answers[1::2]]
        assert tokens[1] > tokens[0]  # each answer is its own request's
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, _ = reader.response()
        assert status == 200 and not reader.buffer  # nothing was read from the middle of a body


def wait_for_queue_depth(
    client: httpx.Client, url: str, depth: int, held: list[Future[httpx.Response]]
) -> None:
    """Poll /health until the queue holds `depth` inputs, failing if a held request was answered meanwhile."""
    while client.get(f"{url}/health").json()["queue_depth"] != depth:
        answered = [future.result().status_code for future in held if future.done()]
        assert not answered, f"a held request was answered: {answered}"
        time.sleep(0.02)


class HeldModel(GatedModel):
    """GatedModel that says when a batch has reached the closed gate (the worker holds it there)."""

    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__(model)
        self.holding = threading.Event()

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        if not self.gate.is_set():
            self.holding.set()
        return super().embed_token_ids(batch, should_stop)


def test_requests_pipelined_behind_shed_ones_are_served_with_their_own_bodies(minilm: EmbeddingModel) -> None:
    gated = HeldModel(minilm)
    gated.gate.set()
    settings = ServiceSettings(
        queue_size=2, max_inputs=2, max_batch_size=1, max_wait_ms=0, deadline_ms=120_000
    )
    with serving(settings, gated) as address, httpx.Client(timeout=WAIT_S) as client:
        url = f"http://{address[0]}:{address[1]}"
        gated.gate.clear()
        with ThreadPoolExecutor(2) as pool:
            try:
                computing = pool.submit(
                    client.post, f"{url}/v1/embeddings", json={"model": MODEL, "input": "a"}
                )
                assert gated.holding.wait(WAIT_S)  # "a" is taken by the worker, held at the gate
                wait_for_queue_depth(client, url, 0, [computing])
                body = {"model": MODEL, "input": ["b", "c"]}
                queued = pool.submit(client.post, f"{url}/v1/embeddings", json=body)
                wait_for_queue_depth(client, url, 2, [computing, queued])  # the queue is full
                with socket.create_connection(address) as sock:
                    sock.sendall(
                        post(embedding_body("shed"), b"X-Request-ID: q1")
                        + b"GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: h1\r\n\r\n"
                        + post(embedding_body("shed too"), b"X-Request-ID: q2", chunked=True)
                        + b"GET /ready HTTP/1.1\r\nHost: x\r\nX-Request-ID: h2\r\n\r\n"
                    )
                    reader = Reader(sock)
                    answers = [reader.response() for _ in range(4)]
            finally:
                gated.gate.set()
            assert computing.result().status_code == 200 and queued.result().status_code == 200
    assert [(status, headers["x-request-id"]) for status, headers, _ in answers] == [
        (429, "q1"),
        (200, "h1"),
        (429, "q2"),
        (200, "h2"),
    ]
    assert json.loads(answers[0][2])["error"]["code"] == "queue_full"
    assert int(answers[0][1]["retry-after"]) >= 1 and "total;dur=" in answers[0][1]["server-timing"]


def test_a_refusal_to_a_client_waiting_for_100_continue_closes_the_connection(minilm: EmbeddingModel) -> None:
    """The client never sends the body the server did not ask for; its next request must not be read as one."""
    with serving(ServiceSettings(api_keys=KEY), minilm) as address, socket.create_connection(address) as sock:
        sock.sendall(
            b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 40\r\n\r\n"
        )
        reader = Reader(sock)
        status, headers, _ = reader.response()
        assert status == 401 and headers["connection"] == "close"
        assert reader.closed()


@pytest.mark.parametrize("length", [b"-5", b"abc"])
def test_a_malformed_content_length_is_answered_400_and_closed(minilm: EmbeddingModel, length: bytes) -> None:
    """The server's parser refuses the framing itself, before any application code runs."""
    with serving(ServiceSettings(), minilm) as address, socket.create_connection(address) as sock:
        sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n{}")
        reader = Reader(sock)
        status, _, _ = reader.response()
        assert status == 400
        assert reader.closed()


def test_a_request_head_over_the_limit_is_refused_before_it_is_all_read(minilm: EmbeddingModel) -> None:
    """The server stops at --max-header-bytes: 431 and the connection closed, while the client still has most
    of its header to send; a head well under the limit is served."""
    with serving(ServiceSettings(max_header_bytes=16384), minilm) as address:
        with socket.create_connection(address) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000)
            reader = Reader(sock)
            status, _, _ = reader.response()
            assert status == 431
            assert reader.closed()
        health = httpx.get(f"http://{address[0]}:{address[1]}/health", headers={"X-Big": "a" * 6000})
        assert health.status_code == 200


def test_a_client_trickling_its_head_is_disconnected_after_the_head_timeout(minilm: EmbeddingModel) -> None:
    """--keep-alive-timeout-s bounds the time to send a request head: a client that sent half of one is cut
    off by the server, and a request on another connection meanwhile is answered at once."""
    with serving(ServiceSettings(keep_alive_timeout_s=1.0), minilm) as address:
        with socket.create_connection(address) as sock:
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n")
            t_start_s = time.monotonic()
            health = httpx.get(f"http://{address[0]}:{address[1]}/health", timeout=WAIT_S)
            assert health.status_code == 200 and time.monotonic() - t_start_s < 0.5
            sock.settimeout(WAIT_S)
            assert sock.recv(1) in (b"", b"H")  # closed, or a refusal before closing
            cut_after_s = time.monotonic() - t_start_s
        assert 0.9 <= cut_after_s < 5.0, cut_after_s
