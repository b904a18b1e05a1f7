"""Prometheus metrics of one service instance, in its own registry (names are read by the collectors)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

STAGES = ("queue", "tokenize", "compute", "post", "total")
LATENCY_BUCKETS_S = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.5,
    5.0,
    10.0,
    30.0,
)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512)
BATCH_TOKEN_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class ServiceMetrics:
    """Every collector the service exports; one instance per app so tests never share state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "embedperf_requests_total", "Embedding requests by HTTP status.", ["status"], registry=r
        )
        self.stage_duration = Histogram(
            "embedperf_stage_duration_seconds",
            "Per-request time in each server stage.",
            ["stage"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.queue_depth = Gauge(
            "embedperf_queue_depth", "Inputs accepted and waiting for a batch.", registry=r
        )
        self.inflight = Gauge("embedperf_inflight_requests", "Embedding requests in flight.", registry=r)
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
            "Seconds the inference worker spent computing; its rate is the device busy fraction.",
            registry=r,
        )
        self.tokens = Counter("embedperf_tokens_total", "Real (unpadded) tokens computed.", registry=r)
        self.inputs = Counter("embedperf_inputs_total", "Inputs computed.", registry=r)
        self.cache_hits = Counter("embedperf_cache_hits_total", "Inputs answered from the cache.", registry=r)
        self.cache_misses = Counter(
            "embedperf_cache_misses_total", "Inputs not found in the cache.", registry=r
        )
        self.ready = Gauge("embedperf_ready", "1 once the model is loaded and warmed up.", registry=r)
        for stage in STAGES:
            self.stage_duration.labels(stage=stage)

    def render(self) -> bytes:
        return generate_latest(self.registry)
