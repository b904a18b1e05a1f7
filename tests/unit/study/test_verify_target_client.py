"""The verify prober and the child-start poll: one HTTP client for many requests (building one loads the
CA bundle, ~40 ms of CPU), each request on a fresh connection."""

from __future__ import annotations

import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loadgen.processes.child import wait_until_answering
from study.verify.target import TargetClient

NOT_READY_POLLS = 4


class Ready(BaseHTTPRequestHandler):
    """503 for the first NOT_READY_POLLS requests, then 200; counts requests and connections."""

    requests = 0
    ports: set[int] = set()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).requests += 1
        type(self).ports.add(self.client_address[1])
        status = 503 if type(self).requests <= NOT_READY_POLLS else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Ready.requests, Ready.ports = 0, set()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def contexts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every SSL context built (what an httpx client costs)."""
    built: list[int] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    return built


def test_the_verify_client_builds_one_stack_for_every_request(server: str, contexts: list[int]) -> None:
    with TargetClient(server, "m") as client:
        answers = [client.get("/ready") for _ in range(10)]
    assert [a.status for a in answers] == [503] * NOT_READY_POLLS + [200] * (10 - NOT_READY_POLLS)
    assert len(contexts) == 1
    assert len(Ready.ports) == 10  # a connection per request: no probe rides on an old one


def test_waiting_for_a_child_builds_one_stack_for_every_poll(
    server: str, contexts: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("loadgen.processes.child.POLL_INTERVAL_S", 0.01)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        wait_until_answering(child, f"{server}/ready", "the child", 20.0, lambda: "")
    finally:
        child.kill()
        child.wait()
    assert Ready.requests == NOT_READY_POLLS + 1
    assert len(contexts) == 1
