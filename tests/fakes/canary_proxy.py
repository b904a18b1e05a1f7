"""A candidate made from the reference service: a proxy in front of it that can fail or slow its answers.

Every request is forwarded to the upstream service as is (GET for the pre-flight and /info, POST for
embeddings) and its answer passed back, so the candidate's vectors are the service's. Two switches,
flipped by the test while a canary runs:
- `start_failing(N)`: from the next embeddings request on, one in N is answered 500 instead (5% at
  N = 20): the next one, then every N-th, counted deterministically, so the first window after the
  switch holds a failure whatever its size;
- `slow_factor = F`: each answer is held until F times its upstream time has passed (P99 about F
  times the baseline's).
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORWARDED_HEADERS = ("Content-Type", "Authorization", "X-Request-ID", "Accept")
UPSTREAM_TIMEOUT_S = 30.0


class CandidateProxy:
    """The switches and counters the handler reads (one instance per proxy)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.fail_every = 0
        self.slow_factor = 1.0
        self.posts = 0
        self.failed = 0
        self._since_switch = 0
        self._lock = threading.Lock()

    def start_failing(self, every: int) -> None:
        with self._lock:
            self.fail_every, self._since_switch = every, 0

    def should_fail(self) -> bool:
        with self._lock:
            self.posts += 1
            if not self.fail_every:
                return False
            self._since_switch += 1
            if (self._since_switch - 1) % self.fail_every == 0:
                self.failed += 1
                return True
            return False


@contextmanager
def candidate_proxy(upstream: str) -> Iterator[tuple[str, CandidateProxy]]:
    """Serve on 127.0.0.1 (a free port) for the duration of the block; yields (base URL, switches)."""
    proxy = CandidateProxy(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the service itself

        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if method == "POST" and proxy.should_fail():
                self._answer(
                    500, b'{"error": {"message": "injected fault"}}', {"Content-Type": "application/json"}
                )
                return
            headers = {k: v for k in FORWARDED_HEADERS if (v := self.headers.get(k)) is not None}
            request = urllib.request.Request(
                proxy.upstream + self.path, data=body, headers=headers, method=method
            )
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S) as resp:  # noqa: S310 - loopback
                    status, content, answer_headers = resp.status, resp.read(), dict(resp.headers.items())
            except urllib.error.HTTPError as exc:
                status, content, answer_headers = exc.code, exc.read(), dict(exc.headers.items())
            elapsed_s = time.perf_counter() - started
            if proxy.slow_factor > 1.0:
                time.sleep(elapsed_s * (proxy.slow_factor - 1.0))
            self._answer(status, content, answer_headers)

        def _answer(self, status: int, content: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self._forward("GET")

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self._forward("POST")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
