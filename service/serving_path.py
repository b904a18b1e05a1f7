"""POST /v1/embeddings and /rerank straight to their handlers: a pure ASGI middleware, innermost of the app's.

Every request of the serving path would otherwise cross FastAPI's exception middlewares, its router and its
dependency resolution, about a quarter of a front end's CPU per request, for routes that take the raw body
and need none of it. The routes stay registered with FastAPI (the OpenAPI document, 405 for other methods);
a serving request below this point is answered by the same handler either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]


class ServingPathMiddleware:
    def __init__(self, app: ASGIApp, handlers: dict[str, Handler]) -> None:
        self.app = app
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = (
            self.handlers.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if handler is None:
            await self.app(scope, receive, send)
            return
        response = await handler(Request(scope, receive, send))
        await response(scope, receive, send)
