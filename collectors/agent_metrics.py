"""The agent's Prometheus exposition (`/metrics`): the newest value of every canonical metric, and device health.

One gauge per canonical metric, named `embedperf_<metric>` (embedperf_temp_c, embedperf_mem_used_mb, ...)
with `host`, `device` and `source` labels, so the shipped dashboard and alert rules (deploy/) read the same
figures a run records. `embedperf_device_healthy` is 1 while a device reports and its own health check
says OK (npu-smi's Health column), 0 once it does not: the device-error alert fires on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from collectors.base import Source
from embedperf.schema import CANONICAL_METRICS

METRIC_PREFIX = "embedperf_"
HEALTH_METRIC = "embedperf_device_healthy"
LABELS = ["host", "device", "source"]


def metrics_text(host_label: str, latest: Mapping[tuple[str, str, str], float], sources: Iterable[Source]) -> bytes:
    """Exposition of `latest` ((source, device, metric) -> value) and of each source's device health."""
    registry = CollectorRegistry()
    gauges: dict[str, Gauge] = {}
    for (source_name, device, metric), value in sorted(latest.items()):
        if metric not in CANONICAL_METRICS:
            continue
        if metric not in gauges:
            gauges[metric] = Gauge(
                f"{METRIC_PREFIX}{metric}",
                f"{metric} (embedperf canonical metric)",
                LABELS,
                registry=registry,
            )
        gauges[metric].labels(host=host_label, device=device, source=source_name).set(value)
    health = Gauge(
        HEALTH_METRIC,
        "1 while the device reports and its own health check says OK (npu-smi Health), 0 otherwise.",
        LABELS,
        registry=registry,
    )
    for source in sources:
        for device, healthy in sorted(source.device_health().items()):
            health.labels(host=host_label, device=device, source=source.name).set(1.0 if healthy else 0.0)
    return generate_latest(registry)
