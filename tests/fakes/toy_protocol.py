"""A target protocol from outside the project: how a user adds one without touching embedperf.

`embedperf run smoke --host URL --protocol tests.fakes.toy_protocol:PROTOCOL` imports this module in every
process of the run and speaks to the toy server below: `POST /toy/embed` with `{"texts": [...]}`, answered
with JSON lines, one vector per line (a wire format no built-in protocol reads). Run the server with
`python -m tests.fakes.toy_protocol --port P`, or in-process with `serving_toy()`.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols.base import Expectations, TargetProtocol, json_text
from loadgen.traffic.protocols.checks import check_vectors
from scenarios.models import Target, Task

TOY_PATH = "/toy/embed"
TOY_DIM = 8


class ToyProtocol(TargetProtocol):
    name = "toy"
    label = "toy JSON-lines embeddings"

    def path(self, task: Task, model: str, prefix: str = "") -> str:
        return prefix + TOY_PATH

    def request_body(self, payload: RequestPayload, task: Task, target: Target) -> str:
        return json_text({"texts": payload.inputs})

    def check_answer(
        self, body: bytes, payload: RequestPayload, task: Task, target: Target, expect: Expectations
    ) -> tuple[str, int | None]:
        try:
            vectors = [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError:
            return "a line of the answer is not JSON", None
        return check_vectors(vectors, len(payload.inputs), expect), None


PROTOCOL = ToyProtocol()


class _ToyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a load generator expects
    requests_seen = 0
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        texts = json.loads(raw).get("texts") if self.path == TOY_PATH else None
        if not isinstance(texts, list):
            self._send(404, b"no such route\n")
            return
        with self.lock:
            type(self).requests_seen += 1
        lines = [
            json.dumps([round(0.01 * (len(t) % 50) + 0.001 * j, 4) for j in range(TOY_DIM)]) for t in texts
        ]
        self._send(200, ("\n".join(lines) + "\n").encode(), "application/x-ndjson")

    def do_GET(self) -> None:  # noqa: N802
        self._send(404, b"no such route\n")

    def _send(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@contextmanager
def serving_toy() -> Iterator[tuple[str, type[_ToyHandler]]]:
    """The toy server on 127.0.0.1 (a free port) in a thread: (base URL, its handler class with the count)."""
    handler = type("ToyHandler", (_ToyHandler,), {"requests_seen": 0, "lock": threading.Lock()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.toy_protocol", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    ThreadingHTTPServer(("127.0.0.1", args.port), _ToyHandler).serve_forever()


if __name__ == "__main__":
    main()
