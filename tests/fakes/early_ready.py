"""A service whose readiness lies: /health and /ready answer 200 from its first moment, while /v1/embeddings
answers 503 ("model loading") to its first --refuse-first requests and only then embeds.

The model "loads" after a number of refused requests, not after a time, so whoever polls it sees the lie
however slow the host is. `python tests/fakes/early_ready.py --port P [--refuse-first 3]` (no imports from
the project: it runs as a plain script). It echoes X-Request-ID and has no /metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
DIM = 8


class EarlyReadyApp:
    """ASGI app: ready at once, embeddings only after `refuse_first` refusals."""

    def __init__(self, refuse_first: int) -> None:
        self.refuse_first = refuse_first
        self.refused = 0
        self.started_unix_s = time.time()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request_id = next((bytes(v) for k, v in scope.get("headers", ()) if k == b"x-request-id"), b"fake-id")
        path = scope["path"]
        if path in ("/health", "/ready"):
            await _respond(send, 200, {"status": "ok"}, request_id)
        elif path == "/info":
            info = {
                "model": "early-ready",
                "dimension": DIM,
                "pid": os.getpid(),
                "started_unix_s": self.started_unix_s,
            }
            await _respond(send, 200, info, request_id)
        elif path == "/v1/embeddings":
            await self._embeddings(body, send, request_id)
        else:
            await _respond(send, 404, {"error": "not found"}, request_id)

    async def _embeddings(self, body: bytes, send: Send, request_id: bytes) -> None:
        if self.refused < self.refuse_first:
            self.refused += 1
            await _respond(send, 503, {"error": "model loading"}, request_id)
            return
        try:
            inputs = json.loads(body)["input"]
        except (ValueError, KeyError):
            await _respond(send, 400, {"error": "bad request"}, request_id)
            return
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not inputs or any(not isinstance(t, str) or not t for t in inputs):
            await _respond(send, 400, {"error": "empty input"}, request_id)
            return
        data = [{"object": "embedding", "index": i, "embedding": [0.1] * DIM} for i in range(len(inputs))]
        answer = {
            "object": "list",
            "data": data,
            "model": "early-ready",
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
        await _respond(send, 200, answer, request_id)


async def _respond(send: Send, status: int, body: Any, request_id: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"x-request-id", request_id)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/fakes/early_ready.py", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--refuse-first", type=int, default=3, help="embeddings requests answered 503 first")
    args = parser.parse_args(argv)
    uvicorn.run(EarlyReadyApp(args.refuse_first), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
