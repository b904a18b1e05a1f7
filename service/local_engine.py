"""The engine in this process: the model (and its replicas and fallback), the batcher and its warm-up.

The engine process (service/engine_process.py) runs it behind its socket; the one-process layout
(`--http-workers 0`, and the in-process tests) runs it beside the routes."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from embedperf.errors import ConfigError
from modelcore.devices import version_matrix
from modelcore.graphs import BucketRunner, bucket_shapes
from modelcore.model import EmbeddingModel, load_model
from service.batch_job import BatcherConfig
from service.batcher import Batcher
from service.degrade import Fallback
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.sleep_compute import SleepCompute
from service.workers import WorkerPool, bind_device, build_pool, primary_device

log = logging.getLogger("service.engine")
WARMUP_TEXTS = ["warm-up: the quick brown fox jumps over the lazy dog", "预热：深度学习模型推理性能测试"]
WARMUP_DEADLINE_MS = 120_000.0  # the first batch builds graphs and allocators: give it time


def batcher_config(settings: ServiceSettings, own_process: bool = False) -> BatcherConfig:
    """The batcher's settings; `own_process`: the engine runs in a process of its own (no event loop to yield to)."""
    # the fields settings hold under the same name (but `workers`: there, CPU threads of an engine process)
    same_name = {f.name for f in dataclasses.fields(BatcherConfig)} - {"workers"}
    return BatcherConfig(
        **settings.model_dump(include=same_name),
        workers=len(settings.device_specs()),
        model_id=settings.model_name,
        yield_to_event_loop=not own_process,
    )


@dataclass(eq=False)
class LocalEngine:
    """Loads the model unless given one, builds one worker per serving device, starts the batcher, warms up."""

    settings: ServiceSettings
    model: EmbeddingModel | None
    metrics: ServiceMetrics
    own_process: bool = False
    batcher: Batcher | None = field(default=None, init=False)
    pool: WorkerPool | None = field(default=None, init=False)
    fallback: Fallback | None = field(default=None, init=False)
    runners: list[BucketRunner] = field(default_factory=list, init=False)

    async def start(self) -> None:
        s = self.settings
        if self.model is None:
            self.model = await asyncio.to_thread(load_main_model, s)
        model = self.model
        self.pool = await asyncio.to_thread(build_pool, s, model, self.metrics, load_model)
        if s.compute_sleep_ms:
            for worker in self.pool.workers:
                worker.encoder = SleepCompute(worker.encoder, s.compute_sleep_ms, model.dimension)
            log.warning("--compute-sleep-ms %g: batches sleep instead of computing", s.compute_sleep_ms)
        if s.warmup and len(self.pool) > 1:  # the batcher's warm-up below reaches only one worker
            await asyncio.to_thread(self.pool.warm_up, WARMUP_TEXTS)
        if (s.graphs_on() or s.compile) and not s.compute_sleep_ms:
            await asyncio.to_thread(self._use_buckets, model)
        self.fallback = await asyncio.to_thread(load_fallback, s, model)
        steer = self.pool.share is not None and s.overlap_tokenize  # the first worker widens: it goes first
        config = dataclasses.replace(batcher_config(s, self.own_process), first_worker_first=steer)
        self.batcher = Batcher(self.pool, config, self.metrics, self.pool.bind_thread, self.fallback)
        self.batcher.start()
        if s.warmup:
            warmup_texts = (WARMUP_TEXTS * s.max_batch_size)[: min(s.queue_size, s.max_batch_size)]
            await self.batcher.submit(warmup_texts, deadline_ms=max(s.deadline_ms, WARMUP_DEADLINE_MS))
            if self.fallback is not None:
                encoder = self.fallback.encoder
                await asyncio.to_thread(encoder.embed_token_ids, encoder.tokenize(WARMUP_TEXTS))

    def _use_buckets(self, model: EmbeddingModel) -> None:
        """Static-shape buckets on every replica (captured as graphs, or compiled), each on its device."""
        s = self.settings
        assert self.pool is not None
        shapes = bucket_shapes(s.max_batch_size, model.max_tokens, s.max_batch_tokens)
        replicas = {id(w.encoder): w for w in self.pool.workers if isinstance(w.encoder, EmbeddingModel)}
        for worker in replicas.values():
            bind_device(worker.spec)
            runner = worker.encoder.use_buckets(shapes, capture=s.graphs_on(), compile_cpu=s.compile)  # type: ignore[attr-defined]
            self.runners.append(runner)
        shown = (len(shapes), len(replicas), s.graphs_on(), s.compile)
        log.info("%d bucket shapes on %d replica(s): graphs %s, compile %s", *shown)

    async def stop(self, grace_s: float) -> None:
        """Finish what is queued (nothing new is submitted any more), within grace_s, and let go."""
        if self.batcher is not None:
            await asyncio.to_thread(self.batcher.stop, grace_s)

    def device_busy_fractions(self) -> dict[str, float]:
        return self.pool.busy_fractions() if self.pool else {}

    def versions(self) -> dict[str, object]:
        return dict(version_matrix(self.model.device if self.model else None))

    def process_id(self) -> int:
        return os.getpid()

    def unavailable_reason(self) -> str | None:
        return None  # in this process: it is up as long as the routes are


def load_main_model(s: ServiceSettings) -> EmbeddingModel:
    """The served model (--model, --precision, --int8-exclude) on the first serving device."""
    path = Path(s.model) if s.model else None
    return load_model(path, primary_device(s), s.precision, s.engine_threads(), None, s.int8_exclude)


def load_fallback(settings: ServiceSettings, model: EmbeddingModel) -> Fallback | None:
    """The lighter model of --fallback-model / --fallback-precision, on the first serving device, or None. Its
    vectors must have the main model's dimension: clients store them side by side."""
    fallback_id = settings.fallback_model_id()
    if fallback_id is None:
        return None
    path = Path(settings.fallback_model) if settings.fallback_model else model.path
    precision = settings.fallback_precision or settings.precision
    lighter = load_model(path, primary_device(settings), precision, settings.engine_threads(), fallback_id)
    if lighter.dimension != model.dimension:
        raise ConfigError(
            f"the fallback model {fallback_id} gives {lighter.dimension}-dimensional vectors, the main model "
            f"{model.dimension}; choose a fallback of the same dimension"
        )
    shown = (fallback_id, settings.fallback_busy_threshold * 100, settings.fallback_window_s)
    log.info("fallback: %s while the device is >= %.0f %% busy over %.0f s", *shown)
    return Fallback(fallback_id, lighter, settings.fallback_busy_threshold, settings.fallback_window_s)
