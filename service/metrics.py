"""Prometheus metrics of one service instance, in its own registry (names are read by the collectors).

Gauges say how processes combine (`multiprocess_mode`): a service of several processes (HTTP front ends and
an engine) exports one set of figures, queue figures from the engine, requests in flight summed over front
ends; in one process the mode is ignored."""

from __future__ import annotations

import asyncio
import os
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
NAMESPACE = "embedperf"  # every metric is embedperf_<name>
GaugeMode = Literal["livemax", "livesum"]

STAGES = ("queue", "tokenize", "compute", "post", "total")
# fmt: off
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.3, 0.5,
                     0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0)
# fmt: on
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512)
BATCH_TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class TurnWrites:
    """The request metrics of one turn of the event loop, written together at its end. Each write of a
    multiprocess value takes a lock, a pid check and an mmap write, ~4 CPU-us apiece between requests (cold
    caches): a turn's counts are summed into one write each, its observations written one after another."""

    def __init__(self) -> None:
        self.counts: dict[Counter | Gauge, float] = {}  # what to add to each (a gauge: negative to take away)
        self.observations: list[tuple[Histogram, float]] = []
        self.pending = False

    def inc(self, metric: Counter | Gauge, amount: float = 1.0) -> None:
        self.counts[metric] = self.counts.get(metric, 0.0) + amount
        self._schedule()

    def observe(self, histogram: Histogram, value: float) -> None:
        self.observations.append((histogram, value))
        self._schedule()

    def _schedule(self) -> None:
        if not self.pending:
            self.pending = True
            asyncio.get_running_loop().call_soon(self.write)

    def write(self) -> None:
        """Write what is pending: at the end of the turn, and before this process renders /metrics."""
        counts, observations, self.counts, self.observations = self.counts, self.observations, {}, []
        self.pending = False
        for metric, amount in counts.items():
            if amount:
                metric.inc(amount)
        for histogram, value in observations:
            histogram.observe(value)


class ServiceMetrics:
    """Every collector the service exports; one instance per app so tests never share state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        counter, gauge = self._counter, self._gauge
        self.requests = counter("requests_total", "Serving requests (embeddings and rerank) by HTTP status.", "status")
        self.route_requests = counter(
            "route_requests_total",
            "Serving requests by route (/v1/embeddings, /rerank) and HTTP status.", "route", "status"
        )
        self.stage_duration = self._histogram(
            "stage_duration_seconds", "Per-request time in each server stage.", LATENCY_BUCKETS_S, "stage"
        )
        self.queue_depth = gauge("queue_depth", "Inputs accepted and waiting for a batch.")
        self.inflight = gauge("inflight_requests", "Serving requests (embeddings, rerank) in flight.", mode="livesum")
        self.served_requests = counter(
            "served_requests_total",
            "Embedding requests answered 200, by the model that produced their vectors (main or fallback).",
            "model",
        )
        self.fallback_requests = counter(
            "fallback_requests_total",
            "Embedding requests answered 200 by the fallback model: its rate over "
            "embedperf_served_requests_total's is the fallback's serving share (the alert rules and "
            "dashboards read it without knowing model names).",
        )
        self.batch_size = self._histogram("batch_size", "Inputs per computed batch.", BATCH_SIZE_BUCKETS)
        self.batch_tokens = self._histogram("batch_tokens", "Padded tokens per computed batch.", BATCH_TOKEN_BUCKETS)
        self.compute_seconds = counter(
            "compute_seconds_total",
            "Seconds the inference workers spent computing, divided by the number of workers: its rate is "
            "the overall busy fraction (per device: embedperf_device_compute_seconds_total).",
        )
        self.workers = gauge("workers", "Inference workers (one per serving device).")
        busy_help = "Share of the last 10 s each serving device's worker spent computing."
        self.device_busy = gauge("device_busy_fraction", busy_help, "device")
        batches_help = "Batches computed per serving device."
        self.device_batches = counter("device_batches_total", batches_help, "device")
        self.device_compute_seconds = counter(
            "device_compute_seconds_total", "Seconds each serving device's worker spent computing.", "device"
        )
        self.tokens = counter("tokens_total", "Real (unpadded) tokens computed.")
        self.padded_tokens = counter(
            "padded_tokens_total",
            "Tokens computed with padding (inputs x longest per batch): 1 - tokens/padded is the padding waste.",
        )
        self.bucket_batches = counter(
            "bucket_batches_total",
            "Batches run at a static bucket shape (hit: a captured graph or compiled shape) or eagerly (miss).",
            "outcome",
        )
        self.inputs = counter("inputs_total", "Inputs computed.")
        self.cache_hits = counter("cache_hits_total", "Inputs answered from the cache.")
        self.cache_misses = counter("cache_misses_total", "Inputs not found in the cache.")
        self.cache_up = gauge(
            "cache_up", "1 while the shared (Redis) cache is reachable, 0 while the service runs without it."
        )
        self.cache_errors = counter(
            "cache_errors_total",
            "Shared-cache operations that failed (the request was served without the cache).",
        )
        self.ready = gauge("ready", "1 once the model is loaded and warmed up.")
        self.shed = counter(
            "shed_total",
            "Requests refused with 429 at admission, by reason (estimated_wait, queue_full, ...).",
            "reason",
        )
        self.abandoned = counter(
            "abandoned_total",
            "Requests whose work was dropped before compute, by reason: disconnected (the client hung up), "
            "cancelled (the request's task was, e.g. at the end of the shutdown grace), deadline.",
            "reason",
        )
        self.stopped_batches = counter(
            "stopped_batches_total",
            "Batches stopped between layers because every request in them had gone (client or deadline).",
        )
        self.oom_splits = counter("oom_splits_total", "Batches that ran out of device memory and were split.")
        self.device_errors = counter("device_errors_total", "Batches that failed with a device error.")
        self.batch_limit = gauge("batch_limit", "Effective batch size limit (lowered after out-of-memory).")
        self.estimated_wait = gauge("estimated_wait_seconds", "Estimated queue wait a new request would see.")
        self.stage_seconds = {stage: self.stage_duration.labels(stage=stage) for stage in STAGES}
        self.writes = TurnWrites()  # the front ends' per-request updates

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, namespace=NAMESPACE, registry=self.registry)

    def _gauge(self, name: str, documentation: str, *labels: str, mode: GaugeMode = "livemax") -> Gauge:
        """mode: how the figures of several processes combine (livemax: the engine's; livesum: summed)."""
        return Gauge(name, documentation, labels, namespace=NAMESPACE, registry=self.registry, multiprocess_mode=mode)

    def _histogram(self, name: str, doc: str, buckets: tuple[float, ...], *labels: str) -> Histogram:
        return Histogram(name, doc, labels, namespace=NAMESPACE, registry=self.registry, buckets=buckets)

    def render(self) -> bytes:
        """The exposition: this instance's registry, or, in a service of several processes (prometheus_client's
        multiprocess mode, PROMETHEUS_MULTIPROC_DIR set by the supervisor), the figures of all of them."""
        self.writes.write()
        folder = os.environ.get(MULTIPROC_ENV)
        if not folder:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=folder)
        return generate_latest(merged)
