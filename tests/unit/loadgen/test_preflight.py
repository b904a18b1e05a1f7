"""Pre-flight: URL normalisation and one real request, each mistake one clear line (TargetError, exit 2)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from embedperf.errors import TargetError
from loadgen.lifecycle.preflight import check_target, normalise_base_url
from scenarios.models import Scenario

EMBEDDINGS = json.dumps({"data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}]}).encode()


def scenario(**target: object) -> Scenario:
    return Scenario.model_validate(
        {"name": "t", "kind": "ramp", "steps": [{"users": 1, "duration_s": 1}], "target": target}
    )


class _Fixed(BaseHTTPRequestHandler):
    status = 200
    body = EMBEDDINGS
    seen: list[tuple[str, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[ThreadingHTTPServer] = []

    def start(status: int = 200, body: bytes = EMBEDDINGS) -> tuple[str, type[_Fixed]]:
        handler = type("Handler", (_Fixed,), {"status": status, "body": body, "seen": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()  # quick shutdown()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", handler

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("http://127.0.0.1:8086/", "http://127.0.0.1:8086"),
        ("http://127.0.0.1:8086/v1", "http://127.0.0.1:8086"),
        ("http://127.0.0.1:8086/v1/", "http://127.0.0.1:8086"),
        ("https://gw.example/team/v1", "https://gw.example/team"),
        ("  http://h:1  ", "http://h:1"),
    ],
)
def test_base_url_normalised_like_the_openai_client(given: str, base: str) -> None:
    assert normalise_base_url(given) == base
    assert (
        normalise_base_url(given) + "/v1/embeddings"
        == given.strip().rstrip("/").removesuffix("/v1") + "/v1/embeddings"
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("127.0.0.1:8086", "has no scheme; use http://127.0.0.1:8086"),
        ("localhost:8086", "has no scheme"),
        ("ftp://h:1", "scheme 'ftp' is not supported"),
        ("http://h:99999", "Port out of range"),
        ("http://h:1/?x=1", "drop the query"),
    ],
)
def test_bad_urls_are_refused_with_what_to_type(given: str, says: str) -> None:
    with pytest.raises(TargetError) as info:
        normalise_base_url(given)
    assert says in str(info.value) and info.value.exit_code == 2


def test_good_target_returns_normalised_base_and_sends_the_key(serve, monkeypatch) -> None:
    url, handler = serve()
    monkeypatch.setenv("EMBEDPERF_TARGET_API_KEY", "k1")
    checked = check_target(scenario(), url + "/v1/")
    assert checked.base_url == url and checked.target.path == "/v1/embeddings"
    assert handler.seen == [("/v1/embeddings", "Bearer k1")]


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (401, b'{"error":"bad key"}', "the target needs an API key (HTTP 401"),
        (403, b"{}", "pass --api-key KEY or set EMBEDPERF_TARGET_API_KEY"),
        (404, b'{"detail":"Not Found"}', "404 Not Found: wrong path"),
        (500, b"boom", "answered HTTP 500 to one request (application/json: boom)"),
        (200, b'{"hello": "world"}', "answered 200 but not with embeddings (answer has no `data` list)"),
        (200, b"<html>", "not with embeddings (invalid JSON in a 200 answer)"),
    ],
)
def test_each_wrong_answer_is_one_clear_line(serve, status: int, body: bytes, says: str) -> None:
    url, _ = serve(status, body)
    with pytest.raises(TargetError) as info:
        check_target(scenario(), url)
    message = str(info.value)
    assert says in message and "\n" not in message


def test_a_refused_key_is_told_apart_from_no_key(serve, monkeypatch) -> None:
    url, _ = serve(401, b'{"error":"bad key"}')
    monkeypatch.delenv("EMBEDPERF_TARGET_API_KEY", raising=False)
    with pytest.raises(TargetError, match="needs an API key .* none was sent: pass --api-key KEY") as info:
        check_target(scenario(), url)
    assert "refused" not in str(info.value)
    monkeypatch.setenv("EMBEDPERF_TARGET_API_KEY", "wrong")
    with pytest.raises(TargetError, match=r"the target refused the API key \(HTTP 401"):
        check_target(scenario(), url)


def test_unreachable_target(serve) -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(TargetError) as info:
            check_target(scenario(), f"http://127.0.0.1:{port}")
    assert "cannot reach the target" in str(info.value) and "connection refused" in str(info.value)


def test_wrong_dimension_is_left_to_the_run(serve) -> None:
    url, _ = serve()
    assert check_target(scenario(dimension=16), url).base_url == url  # the run records it per request
