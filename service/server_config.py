"""uvicorn's settings for the service app, shared by every layout: uvicorn's h11 protocol, whose documented
`h11_max_incomplete_event_size` bounds the request head (a larger one is answered 400 and its connection
closed as soon as that much has arrived; httptools, uvicorn's other parser, has no such bound), no access log
of its own (the app writes one), and a shutdown grace of its own (--shutdown-grace-s) after which requests
still running are cut off."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from service.settings import ServiceSettings


def uvicorn_config(settings: ServiceSettings, app: FastAPI) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        access_log=False,
        http="h11",
        h11_max_incomplete_event_size=settings.max_header_bytes,
        timeout_keep_alive=max(1, round(settings.keep_alive_timeout_s)),
        timeout_graceful_shutdown=max(1, round(settings.shutdown_grace_s)),
    )
