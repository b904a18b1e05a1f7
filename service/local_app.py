"""The app over an engine in the same process: `embedperf serve --http-workers 0` (one process, for debugging)
and the in-process tests. Loads torch; the front ends of the split layout never import it."""

from __future__ import annotations

from fastapi import FastAPI

from modelcore.model import EmbeddingModel
from service.app import build_app
from service.local_engine import LocalEngine
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.state import ServiceState


def create_app(settings: ServiceSettings, model: EmbeddingModel | None = None, freeze_heap: bool = False) -> FastAPI:
    """The service as an ASGI app; with model=None the lifespan loads settings.model in the background.
    freeze_heap: once ready, take the start-up heap out of the GC's reach (not in a host such as a test)."""
    metrics = ServiceMetrics()
    engine = LocalEngine(settings, model, metrics)
    return build_app(ServiceState(settings=settings, engine=engine, metrics=metrics, freeze_heap=freeze_heap))
