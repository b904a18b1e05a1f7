"""Prometheus metrics of one service instance, in its own registry (names are read by the collectors).

Gauges say how processes combine (`multiprocess_mode`): a service of several processes (HTTP front ends and
an engine) exports one set of figures, queue figures from the engine, requests in flight summed over front
ends; in one process the mode is ignored."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

STAGES = ("queue", "tokenize", "compute", "post", "total")
# fmt: off
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.3, 0.5,
                     0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0)
# fmt: on
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512)
BATCH_TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class ServiceMetrics:
    """Every collector the service exports; one instance per app so tests never share state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "embedperf_requests_total",
            "Serving requests (embeddings and rerank) by HTTP status.",
            ["status"],
            registry=r,
        )
        self.route_requests = Counter(
            "embedperf_route_requests_total",
            "Serving requests by route (/v1/embeddings, /rerank) and HTTP status.",
            ["route", "status"],
            registry=r,
        )
        self.stage_duration = Histogram(
            "embedperf_stage_duration_seconds",
            "Per-request time in each server stage.",
            ["stage"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.queue_depth = Gauge(
            "embedperf_queue_depth",
            "Inputs accepted and waiting for a batch.",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.inflight = Gauge(
            "embedperf_inflight_requests",
            "Serving requests (embeddings, rerank) in flight.",
            multiprocess_mode="livesum",
            registry=r,
        )
        self.served_requests = Counter(
            "embedperf_served_requests_total",
            "Embedding requests answered 200, by the model that produced their vectors (main or fallback).",
            ["model"],
            registry=r,
        )
        self.fallback_requests = Counter(
            "embedperf_fallback_requests_total",
            "Embedding requests answered 200 by the fallback model: its rate over embedperf_served_requests_total's "
            "is the fallback's serving share (the alert rules and dashboards read it without knowing model names).",
            registry=r,
        )
        self.batch_size = Histogram(
            "embedperf_batch_size", "Inputs per computed batch.", buckets=BATCH_SIZE_BUCKETS, registry=r
        )
        self.batch_tokens = Histogram(
            "embedperf_batch_tokens",
            "Padded tokens per computed batch.",
            buckets=BATCH_TOKEN_BUCKETS,
            registry=r,
        )
        self.compute_seconds = Counter(
            "embedperf_compute_seconds_total",
            "Seconds the inference workers spent computing, divided by the number of workers: its rate is "
            "the overall busy fraction (per device: embedperf_device_compute_seconds_total).",
            registry=r,
        )
        self.workers = Gauge(
            "embedperf_workers",
            "Inference workers (one per serving device).",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.device_busy = Gauge(
            "embedperf_device_busy_fraction",
            "Share of the last 10 s each serving device's worker spent computing.",
            ["device"],
            multiprocess_mode="livemax",
            registry=r,
        )
        self.device_batches = Counter(
            "embedperf_device_batches_total", "Batches computed per serving device.", ["device"], registry=r
        )
        self.device_compute_seconds = Counter(
            "embedperf_device_compute_seconds_total",
            "Seconds each serving device's worker spent computing.",
            ["device"],
            registry=r,
        )
        self.tokens = Counter("embedperf_tokens_total", "Real (unpadded) tokens computed.", registry=r)
        self.padded_tokens = Counter(
            "embedperf_padded_tokens_total",
            "Tokens computed with padding (inputs x longest per batch): 1 - tokens/padded is the padding waste.",
            registry=r,
        )
        self.bucket_batches = Counter(
            "embedperf_bucket_batches_total",
            "Batches run at a static bucket shape (hit: a captured graph or compiled shape) or eagerly (miss).",
            ["outcome"],
            registry=r,
        )
        self.inputs = Counter("embedperf_inputs_total", "Inputs computed.", registry=r)
        self.cache_hits = Counter("embedperf_cache_hits_total", "Inputs answered from the cache.", registry=r)
        self.cache_misses = Counter(
            "embedperf_cache_misses_total", "Inputs not found in the cache.", registry=r
        )
        self.cache_up = Gauge(
            "embedperf_cache_up",
            "1 while the shared (Redis) cache is reachable, 0 while the service runs without it.",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.cache_errors = Counter(
            "embedperf_cache_errors_total",
            "Shared-cache operations that failed (the request was served without the cache).",
            registry=r,
        )
        self.ready = Gauge(
            "embedperf_ready",
            "1 once the model is loaded and warmed up.",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.shed = Counter(
            "embedperf_shed_total",
            "Requests refused with 429 at admission, by reason (estimated_wait, queue_full, ...).",
            ["reason"],
            registry=r,
        )
        self.abandoned = Counter(
            "embedperf_abandoned_total",
            "Requests whose work was dropped before compute, by reason: disconnected (the client hung up), "
            "cancelled (the request's task was, e.g. at the end of the shutdown grace), deadline.",
            ["reason"],
            registry=r,
        )
        self.stopped_batches = Counter(
            "embedperf_stopped_batches_total",
            "Batches stopped between layers because every request in them had gone (client or deadline).",
            registry=r,
        )
        self.oom_splits = Counter(
            "embedperf_oom_splits_total", "Batches that ran out of device memory and were split.", registry=r
        )
        self.device_errors = Counter(
            "embedperf_device_errors_total", "Batches that failed with a device error.", registry=r
        )
        self.batch_limit = Gauge(
            "embedperf_batch_limit",
            "Effective batch size limit (lowered after out-of-memory).",
            multiprocess_mode="livemax",
            registry=r,
        )
        self.estimated_wait = Gauge(
            "embedperf_estimated_wait_seconds",
            "Estimated queue wait a new request would see.",
            multiprocess_mode="livemax",
            registry=r,
        )
        for stage in STAGES:
            self.stage_duration.labels(stage=stage)

    def render(self) -> bytes:
        """The exposition: this instance's registry, or, in a service of several processes (prometheus_client's
        multiprocess mode, PROMETHEUS_MULTIPROC_DIR set by the supervisor), the figures of all of them."""
        folder = os.environ.get(MULTIPROC_ENV)
        if not folder:
            return generate_latest(self.registry)
        merged = CollectorRegistry()
        MultiProcessCollector(merged, path=folder)
        return generate_latest(merged)
