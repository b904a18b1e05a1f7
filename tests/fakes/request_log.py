"""An access log for test targets: one JSON line per embeddings request, with the X-Request-ID it carried.

Wraps any ASGI app (the loadgen stub) as the reference service's access log would: a test finds a
request from a report in it by its ID. Lines are appended and flushed as each answer goes out.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestLog:
    """ASGI middleware: `{"request_id": ..., "status": ..., "answered_id": ...}` per POST to `path`."""

    def __init__(self, app: App, log_path: Path, path: str = "/v1/embeddings") -> None:
        self.app = app
        self.log_path = log_path
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        sent_id = _header(scope.get("headers", ()), b"x-request-id")
        line: dict[str, Any] = {"request_id": sent_id, "status": None, "answered_id": None}

        async def logged_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                line["status"] = message["status"]
                line["answered_id"] = _header(message.get("headers", ()), b"x-request-id")
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")

        await self.app(scope, receive, logged_send)


def _header(headers: Any, name: bytes) -> str | None:
    for key, value in headers:
        if bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None


def logged_ids(log_path: Path) -> list[str]:
    """The request IDs of every JSON line of a log (other lines, and lines without an ID, are skipped).

    A line may carry a logger's prefix before its JSON object, as the service's access log may.
    """
    ids: list[str] = []
    for text in log_path.read_text(encoding="utf-8", errors="replace").splitlines():
        start = text.find("{")
        if start < 0:
            continue
        try:
            doc = json.loads(text[start:])
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("request_id"), str):
            ids.append(doc["request_id"])
    return ids
