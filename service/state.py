"""What one HTTP front end owns (settings, engine link, caches, limits, metrics) and its start-up.

The engine behind it is either in this process (service/local_engine.py) or an engine process reached over a
socket (service/engine_client.py); the routes see the same surface (service/engine_view.py) either way."""

from __future__ import annotations

import gc
import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelcore.model_folder import DEFAULT_MODEL_NAME
from service.access_log import AccessLog
from service.admission import SERVING_PATHS
from service.batch_errors import BatcherError
from service.cache import EmbeddingCache, RedisCache, ResultCache
from service.engine_view import BatcherView, Engine, ModelView
from service.metrics import ServiceMetrics
from service.request_io import ConcurrencyLimit, RateLimit
from service.request_record import RequestRecord
from service.settings import ServiceSettings

log = logging.getLogger("service.app")
DEFAULT_MODEL_ALIASES = ("sentence-transformers/all-MiniLM-L6-v2",)  # the Hugging Face id of the default
FULL_GC_EVERY_MIDDLE = 100  # middle-generation collections between full ones (Python's default: 10)


@dataclass
class ServiceState:
    """Everything one app instance owns; created by create_app, filled in by the lifespan (`prepare`)."""

    settings: ServiceSettings
    engine: Engine
    metrics: ServiceMetrics
    ready: bool = False
    failure: str | None = None
    started_unix_s: float = field(default_factory=time.time)
    weights: dict[str, str] | None = None
    freeze_heap: bool = False  # a service process (not an app embedded in tests) freezes its start-up heap

    def __post_init__(self) -> None:
        s = self.settings
        self.cache = ResultCache(EmbeddingCache(s.cache_size), None, self.metrics)  # Redis joins in prepare
        self.concurrency = ConcurrencyLimit(s.max_concurrency)
        self.rate = RateLimit(s.rate_limit_qps)
        self.access_log = AccessLog(s.access_log)
        self.fallback_id = s.fallback_model_id()  # None without a fallback
        self.request_counters: dict[tuple[str, int, str | None], list[Any]] = {}  # count_request's, by key

    @property
    def model(self) -> ModelView | None:
        return self.engine.model

    @property
    def batcher(self) -> BatcherView | None:
        return self.engine.batcher

    def serving_batcher(self) -> BatcherView | None:
        """The batcher once the service is ready, else None (requests are then answered 503)."""
        return self.engine.batcher if self.ready else None

    def served_names(self) -> set[str]:
        """The model ids clients may name: the served name, the loaded model's name, and documented aliases."""
        names = {self.settings.model_name}
        if self.model is not None:
            names.add(self.model.name)
        if self.settings.model:
            names.add(Path(self.settings.model).name)
        if DEFAULT_MODEL_NAME in names and not self.settings.model:
            names |= set(DEFAULT_MODEL_ALIASES)
        return names

    def count_request(self, record: RequestRecord) -> None:
        """Count a finished serving request, refusals by the middlewares included."""
        if record.path in SERVING_PATHS and record.method == "POST":
            key = (record.path, record.status, record.model if record.status == 200 else None)
            if (counters := self.request_counters.get(key)) is None:  # a few keys: routes x statuses x models
                counters = self.request_counters[key] = self._counters_of(*key)
            for counter in counters:
                self.metrics.writes.inc(counter)

    def _counters_of(self, route: str, status: int, model: str | None) -> list[Any]:
        m = self.metrics
        counters = [m.requests.labels(status=str(status)), m.route_requests.labels(route=route, status=str(status))]
        if model is not None:
            counters.append(m.served_requests.labels(model=model))
            if model == self.fallback_id:
                counters.append(m.fallback_requests)
        return counters

    def device_healthy(self) -> bool:
        batcher = self.engine.batcher
        return batcher is None or batcher.health.healthy()

    async def prepare(self) -> None:
        """Start (or reach) the engine, connect the shared cache, then report ready."""
        s = self.settings
        keys = len(s.api_key_list())
        on = f"on ({keys} API key(s)); every endpoint but /health and /ready needs a Bearer key"
        off = "off (no API keys set); anyone who can reach the port can call every endpoint"
        log.info("auth: %s", on if keys else off)
        try:
            await self.engine.start()
            model = self.engine.model
            assert model is not None
            if s.cache:
                namespace, ttl_s, retry_max_s = cache_namespace(s), s.cache_ttl_s, s.cache_retry_max_s
                shared = RedisCache(s.cache, namespace, model.dimension, ttl_s, retry_max_s, self.metrics)
                await shared.connect()
                self.cache.shared = shared
            if self.freeze_heap:
                freeze_startup_heap()
            self.ready = True
            self.metrics.ready.set(1)
            log.info("ready: %s on %s (%s)", model.name, model.device, s.precision)
        except BatcherError as exc:  # the engine process said why (the supervisor reports it and exits)
            self.failure = str(exc)
            log.error("the service could not get ready: %s", exc)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.exception("the service could not get ready")

    async def close(self, grace_s: float) -> None:
        """Finish what is queued (the server has stopped taking requests), within grace_s, and let go."""
        await self.engine.stop(grace_s)
        if self.cache.shared is not None:
            await self.cache.shared.close()
        self.metrics.ready.set(0)
        self.access_log.close()


def freeze_startup_heap() -> None:
    """Move the objects alive after loading and warm-up (the model, tokeniser, libraries) out of the GC's
    reach. A full collection otherwise walks ~400k long-lived objects and stalls every thread holding the GIL
    for ~0.2 s, which shows up as the P99 of /health and of every request; the rest (requests in flight) is
    walked every ~30 s instead of every ~3 s once full collections wait for ten times more middle ones."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_GC_EVERY_MIDDLE))


def cache_namespace(settings: ServiceSettings) -> str:
    """Shared-cache keys differ whenever the vectors would: model, precision and the int8 layer choice."""
    variant: str = settings.precision
    if settings.precision == "int8" and settings.int8_exclude:
        variant += "-x" + hashlib.sha256(settings.int8_exclude.encode()).hexdigest()[:8]
    return f"embedperf:{settings.model or settings.model_name}:{variant}"
