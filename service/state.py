"""What one service instance owns (settings, model, batcher, caches, limits, metrics) and its start-up."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from embedperf.errors import ConfigError
from service.access_log import AccessLog
from service.admission import SERVING_PATHS
from service.batch_job import BatcherConfig
from service.batcher import Batcher
from service.cache import EmbeddingCache, ResultCache
from service.cache_redis import RedisCache
from service.fallback import Fallback
from service.limits import ConcurrencyLimit, RateLimit
from service.metrics import ServiceMetrics
from service.model import EmbeddingModel, load_model
from service.request_record import RequestRecord
from service.settings import DEFAULT_MODEL_NAME, ServiceSettings
from service.workers import WorkerPool, build_pool, primary_device

log = logging.getLogger("service.app")
DEFAULT_MODEL_ALIASES = ("sentence-transformers/all-MiniLM-L6-v2",)  # the Hugging Face id of the default
WARMUP_TEXTS = ["warm-up: the quick brown fox jumps over the lazy dog", "预热：深度学习模型推理性能测试"]
WARMUP_DEADLINE_MS = 120_000.0  # the first batch builds graphs and allocators: give it time
FULL_GC_EVERY_MIDDLE = 100  # middle-generation collections between full ones (Python's default: 10)


@dataclass
class ServiceState:
    """Everything one app instance owns; created by create_app, filled in by the lifespan (`prepare`)."""

    settings: ServiceSettings
    model: EmbeddingModel | None
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    batcher: Batcher | None = None
    pool: WorkerPool | None = None
    ready: bool = False
    failure: str | None = None
    started_unix_s: float = field(default_factory=time.time)
    weights: dict[str, str] | None = None
    freeze_heap: bool = False  # the service process (not an app embedded in tests) freezes its start-up heap

    def __post_init__(self) -> None:
        s = self.settings
        self.cache = ResultCache(EmbeddingCache(s.cache_size), None, self.metrics)  # Redis joins in prepare
        self.concurrency = ConcurrencyLimit(s.max_concurrency)
        self.rate = RateLimit(s.rate_limit_qps)
        self.access_log = AccessLog(s.access_log)
        self.fallback_id = s.fallback_model_id()  # None without a fallback

    def batcher_config(self) -> BatcherConfig:
        s = self.settings
        return BatcherConfig(
            batching=s.batching,
            max_batch_size=s.max_batch_size,
            max_batch_tokens=s.max_batch_tokens,
            max_wait_ms=s.max_wait_ms,
            sort_by_length=s.sort_by_length,
            overlap_tokenize=s.overlap_tokenize,
            queue_size=s.queue_size,
            long_input=s.long_input,
            admit_wait_share=s.admit_wait_share,
            workers=len(s.device_specs()),
            max_request_tokens=s.max_request_tokens,
            model_id=s.model_name,
        )

    def serving_batcher(self) -> Batcher | None:
        """The batcher once the service is ready, else None (requests are then answered 503)."""
        return self.batcher if self.ready else None

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
        """Count a finished serving request (embeddings or rerank) by status, refusals by the middlewares
        included, and by route; an answered one by the model that served it."""
        if record.path in SERVING_PATHS and record.method == "POST":
            self.metrics.requests.labels(status=str(record.status)).inc()
            self.metrics.route_requests.labels(route=record.path, status=str(record.status)).inc()
            if record.status == 200 and record.model is not None:
                self.metrics.served_requests.labels(model=record.model).inc()
                if record.model == self.fallback_id:
                    self.metrics.fallback_requests.inc()

    def device_healthy(self) -> bool:
        return self.batcher is None or self.batcher.health.healthy()

    async def prepare(self) -> None:
        """Load (if not given), start the batcher, run a warm-up batch, then report ready."""
        s = self.settings
        if s.api_key_list():
            log.info(
                "auth: on (%d API key(s)); every endpoint but /health and /ready needs a Bearer key",
                len(s.api_key_list()),
            )
        else:
            log.info("auth: off (no API keys set); anyone who can reach the port can call every endpoint")
        try:
            if self.model is None:
                path = Path(s.model) if s.model else None
                self.model = await asyncio.to_thread(
                    load_model, path, primary_device(s), s.precision, s.threads, None, s.int8_exclude
                )
            self.pool = await asyncio.to_thread(build_pool, s, self.model, self.metrics, load_model)
            if s.warmup and len(self.pool) > 1:  # the batcher's warm-up below reaches only one worker
                await asyncio.to_thread(self.pool.warm_up, WARMUP_TEXTS)
            fallback = await asyncio.to_thread(load_fallback, s, self.model)
            if s.cache:
                shared = RedisCache(
                    s.cache,
                    cache_namespace(s),
                    self.model.dimension,
                    s.cache_ttl_s,
                    s.cache_retry_max_s,
                    self.metrics,
                )
                await shared.connect()
                self.cache.shared = shared
            self.batcher = Batcher(
                self.pool, self.batcher_config(), self.metrics, self.pool.bind_thread, fallback
            )
            self.batcher.start()
            if s.warmup:
                warmup_texts = (WARMUP_TEXTS * s.max_batch_size)[: min(s.queue_size, s.max_batch_size)]
                await self.batcher.submit(warmup_texts, deadline_ms=max(s.deadline_ms, WARMUP_DEADLINE_MS))
                if fallback is not None:
                    await asyncio.to_thread(
                        fallback.encoder.embed_token_ids, fallback.encoder.tokenize(WARMUP_TEXTS)
                    )
            if self.freeze_heap:
                freeze_startup_heap()
            self.ready = True
            self.metrics.ready.set(1)
            log.info("ready: %s on %s (%s)", self.model.name, self.model.device, s.precision)
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.exception("the service could not get ready")

    async def close(self, grace_s: float) -> None:
        """Finish what is queued (the server has stopped taking requests), within grace_s, and let go."""
        if self.batcher is not None:
            await asyncio.to_thread(self.batcher.stop, grace_s)
        if self.cache.shared is not None:
            await self.cache.shared.close()
        self.metrics.ready.set(0)
        self.access_log.close()


def load_fallback(settings: ServiceSettings, model: EmbeddingModel) -> Fallback | None:
    """The lighter model of --fallback-model / --fallback-precision, on the first serving device, or None.

    Its vectors must have the main model's dimension: clients store them side by side."""
    fallback_id = settings.fallback_model_id()
    if fallback_id is None:
        return None
    path = Path(settings.fallback_model) if settings.fallback_model else model.path
    precision = settings.fallback_precision or settings.precision
    lighter = load_model(path, primary_device(settings), precision, settings.threads, fallback_id)
    if lighter.dimension != model.dimension:
        raise ConfigError(
            f"the fallback model {fallback_id} gives {lighter.dimension}-dimensional vectors, the main model "
            f"{model.dimension}; choose a fallback of the same dimension"
        )
    log.info(
        "fallback: %s while the device is >= %.0f %% busy over %.0f s",
        fallback_id,
        settings.fallback_busy_threshold * 100,
        settings.fallback_window_s,
    )
    return Fallback(fallback_id, lighter, settings.fallback_busy_threshold, settings.fallback_window_s)


def freeze_startup_heap() -> None:
    """Move the objects alive after loading and warm-up (the model, tokeniser, libraries) out of the GC's reach.

    A full collection otherwise walks ~400k long-lived objects and stalls every thread holding the GIL for
    ~0.2 s, which shows up as the P99 of /health and of every request; the rest (requests in flight) is
    walked every ~30 s instead of every ~3 s once full collections wait for ten times more middle ones.
    """
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
