"""uvicorn's settings for the service app, shared by every layout: stock HTTP (httptools) with the request head
bounded (service/http_protocol.py), no access log of its own (the app writes one), and a shutdown grace of its
own (--shutdown-grace-s) after which requests still running are cut off."""

from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from service.http_protocol import bounded_protocol
from service.settings import ServiceSettings


def uvicorn_config(settings: ServiceSettings, app: FastAPI) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        access_log=False,
        http=bounded_protocol(settings.max_header_bytes, settings.header_timeout_s),
        timeout_keep_alive=max(1, round(settings.keep_alive_timeout_s)),
        timeout_graceful_shutdown=max(1, round(settings.shutdown_grace_s)),
    )
