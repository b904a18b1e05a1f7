"""API keys: with --api-keys set, every endpoint but the probes answers 401 without a valid Bearer key.

A pure ASGI middleware, so a refused request costs no routing and no body read. /health and /ready stay
open for load balancers and orchestrators; /metrics, /info, /openapi.json and the serving routes need a key
(a Prometheus scrape sends it as `authorization: {credentials: KEY}`).
"""

from __future__ import annotations

import hmac
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from service.http_errors import send_refusal
from service.openai_api import ApiError

OPEN_PATHS = frozenset({"/health", "/ready"})  # probes: answered without a key


def key_is_valid(authorization: bytes, keys: list[bytes]) -> bool:
    """Whether an Authorization header value is 'Bearer <one of keys>', compared in constant time."""
    scheme, _, token = authorization.partition(b" ")
    supplied = token.strip()
    valid = False
    for key in keys:  # compare against every key, so the time taken says nothing about which one matched
        valid |= hmac.compare_digest(supplied, key)
    return scheme.lower() == b"bearer" and valid


class ApiKeyMiddleware:
    """Refuses requests without a valid key with a JSON 401 (WWW-Authenticate: Bearer), probes excepted."""

    def __init__(self, app: ASGIApp, keys: list[str]) -> None:
        self.app = app
        self.keys = [key.encode() for key in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        authorization = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        if key_is_valid(authorization, self.keys):
            await self.app(scope, receive, send)
            return
        error = ApiError(
            401,
            "missing or invalid API key; send 'Authorization: Bearer <key>'",
            "invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await send_refusal(send, scope, error, time.perf_counter())
