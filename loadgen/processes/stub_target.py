"""The dry-run target: a tiny OpenAI-shaped embeddings server with a fixed delay and an injectable stall.

It measures the load generator itself, with no model behind it (the generator's own ceiling, the recorder's
cost, distributed forwarding; the benchmarks and the tests use it): `python -m loadgen.processes.stub_target
--port P --delay-ms 50`, then point a run at it. `POST /_stall?ms=1000` makes every request that is in flight
or arrives during the next second wait until the stall ends, like a service pausing for garbage collection.
`GET /_count` answers how many embeddings requests arrived so far (benchmarks read it to find the steady state
of a generator from outside it). `--workers K` serves at most K requests at a time, each taking the fixed
delay, so its capacity is exactly K / delay (a known limit for the capacity search to find). `--corrupt-above
N` answers each text with its own vector (seeded by the text) and scrambles it when it arrives with more than
N requests in flight, like a batching bug that only shows under load (quality probes must catch it). Like the
reference service, it echoes a request's `X-Request-ID` and names the model of each answer (`X-Served-Model`,
`--served-model`); `--no-timing-headers` leaves out every header a plain embeddings target would not send."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import subprocess
import sys
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import uvicorn

from loadgen.processes.child import stop_child, wait_until_answering
from loadgen.processes.service_proc import free_port

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class StubApp:
    """ASGI app; kept free of frameworks so it answers thousands of requests per second."""

    def __init__(
        self, delay_ms: float = 0.0, dim: int = 8, timing_headers: bool = True, info: bool = True,
        workers: int = 0, fail_every: int = 0, info_devices: tuple[int, ...] = (), corrupt_above: int = 0,
        served_model: str = "stub",
    ) -> None:
        self.corrupt_above = corrupt_above
        self.served_model = served_model.encode()
        self.in_flight = 0
        self.fail_every = fail_every
        self.info_devices = info_devices
        self.delay_s = delay_ms / 1000.0
        self.workers = workers
        self._slots: asyncio.Semaphore | None = None
        self.dim = dim
        self.timing_headers = timing_headers
        self.info = info
        self.stall_until = 0.0
        self.requests = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if path == "/v1/embeddings":
            await self._embeddings(body, send, _request_id(scope))
        elif path == "/_stall":
            ms = float(parse_qs(scope.get("query_string", b"").decode()).get("ms", ["1000"])[0])
            self.stall_until = time.monotonic() + ms / 1000.0
            await _respond(send, 200, b"{}")
        elif path == "/_count":
            await _respond(send, 200, json.dumps({"requests": self.requests}).encode())
        elif path in ("/ready", "/health"):
            await _respond(send, 200, b'{"status":"ok"}')
        elif path == "/info" and self.info:
            await _respond(send, 200, json.dumps(self._info()).encode())
        else:
            await _respond(send, 404, b'{"error":"not found"}')

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"model": self.served_model.decode(), "dimension": self.dim, "device": "cpu"}
        if self.info_devices:
            info["device"] = ",".join(f"npu:{i}" for i in self.info_devices)
            info["devices"] = [{"kind": "npu", "index": i, "name": f"npu:{i}"} for i in self.info_devices]
        return info

    async def _embeddings(self, body: bytes, send: Send, request_id: bytes | None = None) -> None:
        t0 = time.perf_counter()
        self.requests += 1
        try:
            doc = json.loads(body)
            inputs = doc["input"]
        except (ValueError, KeyError):
            await _respond(send, 400, b'{"error":"bad request"}')
            return
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not inputs or any(not isinstance(t, str) or not t for t in inputs):
            await _respond(send, 400, b'{"error":"empty input"}')
            return
        if self.fail_every and self.requests % self.fail_every == 0:
            await _respond(send, 503, b'{"error":"injected failure (--fail-every)"}')
            return
        self.in_flight += 1
        corrupt = 0 < self.corrupt_above < self.in_flight
        try:
            if self.workers > 0:
                if self._slots is None:  # created inside the server's event loop
                    self._slots = asyncio.Semaphore(self.workers)
                async with self._slots:  # FIFO: waiters are woken in arrival order
                    await _sleep_until(time.perf_counter() + self.delay_s)
            else:
                await _sleep_until(t0 + self.delay_s)
        finally:
            self.in_flight -= 1
        while (stall_s := self.stall_until - time.monotonic()) > 0:
            await asyncio.sleep(stall_s)
        if self.corrupt_above > 0:
            vectors = [text_vector(t, self.dim, scrambled=corrupt) for t in inputs]
        else:
            vectors = [[0.1] * self.dim] * len(inputs)
        out = {
            "object": "list", "model": doc.get("model", "stub"),
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": sum(len(t.split()) for t in inputs), "total_tokens": 0},
        }
        headers: list[tuple[bytes, bytes]] = []
        if self.timing_headers:
            total_ms = (time.perf_counter() - t0) * 1000.0
            timing = f"queue;dur=0.1, tokenize;dur=0.2, compute;dur={total_ms:.3f}, post;dur=0.1, total;dur={total_ms:.3f}"
            headers = [
                (b"server-timing", timing.encode()), (b"x-batch-size", str(len(inputs)).encode()),
                (b"x-batch-tokens", str(len(inputs) * 7).encode()), (b"x-served-model", self.served_model),
            ]
            if request_id is not None:
                headers.append((b"x-request-id", request_id))
        await _respond(send, 200, json.dumps(out).encode(), headers)


def _request_id(scope: Scope) -> bytes | None:
    """The client's X-Request-ID (ASGI header names arrive lower-cased)."""
    return dict(scope.get("headers", ())).get(b"x-request-id")


def text_vector(text: str, dim: int, scrambled: bool = False) -> list[float]:
    """The stub's embedding of a text: a fixed pseudo-random vector per text (reversed when scrambled)."""
    rng = random.Random(zlib.crc32(text.encode("utf-8")))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    return vector[::-1] if scrambled else vector


async def _sleep_until(deadline: float) -> None:
    while (remaining_s := deadline - time.perf_counter()) > 0:  # event-loop timers may fire early
        await asyncio.sleep(remaining_s)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    start_headers = [(b"content-type", b"application/json"), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.processes.stub_target", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--no-timing-headers", action="store_true")
    parser.add_argument("--no-info", action="store_true")
    for flag, help_text in (
        ("--workers", "serve at most this many requests at once (0: unlimited)"),
        ("--fail-every", "answer every Nth embeddings request with 503 (0: never)"),
        ("--corrupt-above", "per-text vectors, scrambled above this many in flight"),
    ):
        parser.add_argument(flag, type=int, default=0, help=help_text)
    parser.add_argument(
        "--info-devices", default="", metavar="3,5", help="NPU indices /info lists as the serving devices"
    )
    parser.add_argument("--served-model", default="stub", help="the X-Served-Model of every answer")
    args = parser.parse_args(argv)
    devices = tuple(int(v) for v in args.info_devices.split(",") if v.strip())
    app = StubApp(
        args.delay_ms, args.dim, not args.no_timing_headers, not args.no_info, args.workers, args.fail_every,
        devices, args.corrupt_above, args.served_model,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


@contextlib.contextmanager
def running_stub(*flags: str, ready_timeout_s: float = 20.0) -> Iterator[str]:
    """Run the stub in a subprocess on a free loopback port; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.processes.stub_target", "--port", str(port), *flags],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # started in the repository root
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(proc, f"{url}/ready", "the stub server", ready_timeout_s)
        yield url
    finally:
        stop_child(proc, 10.0)
