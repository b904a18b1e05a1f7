"""Each bottleneck rule fires on the figures that define it, and the evidence carries those figures."""

from __future__ import annotations

import pytest

from analysis.figures.bottleneck import step_bottleneck
from analysis.model.decomposition import Decomposition
from analysis.model.steps import LatencyStats, StepStats
from analysis.model.telemetry import TelemetryStats


def _stats(n_ok: int = 500) -> StepStats:
    return StepStats(
        index=3, label="users=50", users=50, steady_start_unix_s=0.0, steady_end_unix_s=10.0, duration_s=10.0,
        n_requests=n_ok, n_ok=n_ok, n_error=0, n_timeout=0, n_probe=0, n_warmup_trimmed=0, qps=n_ok / 10.0,
        ok_qps=n_ok / 10.0, error_rate=0.0, latency=LatencyStats(n=n_ok, mean_ms=100.0),
    )  # fmt: skip


def _decomposition(**pct: float) -> Decomposition:
    parts = {
        "client_network": 5.0,
        "queue": 5.0,
        "tokenize": 5.0,
        "compute": 80.0,
        "post": 3.0,
        "server_other": 2.0,
    }
    parts.update(pct)
    return Decomposition(n=100, total_ms=100.0, parts_ms=dict(parts), parts_pct=dict(parts))


@pytest.mark.parametrize(
    ("tel", "decomp", "cores", "kind", "key", "value"),
    [
        (TelemetryStats(generator_cpu_mean_pct=97.0, device_util_mean_pct=99.0), _decomposition(), None,
         "generator", "generator_cpu_pct", 97.0),
        (TelemetryStats(device_util_mean_pct=96.0), _decomposition(), None, "device", "device_busy_pct", 96.0),
        (TelemetryStats(device_util_mean_pct=5.0, service_busy_mean_pct=98.0), _decomposition(), None,
         "host_launch", "worker_busy_pct", 98.0),
        (TelemetryStats(device_util_mean_pct=95.0, service_busy_mean_pct=98.0), _decomposition(), None,
         "device", "device_busy_pct", 95.0),
        (TelemetryStats(service_busy_mean_pct=93.0), _decomposition(), None, "device", "device_busy_pct", 93.0),
        (TelemetryStats(device_util_mean_pct=20.0), _decomposition(queue=60.0, compute=25.0), None,
         "queue_idle", "queue_share_pct", 60.0),
        (TelemetryStats(device_util_mean_pct=70.0), _decomposition(tokenize=40.0, compute=45.0), None,
         "tokenise", "tokenise_share_pct", 40.0),
        (TelemetryStats(service_cpu_mean_pct=190.0), _decomposition(), 2, "service_cpu", "service_cpu_pct", 190.0),
        (TelemetryStats(service_cpu_mean_pct=60.0), _decomposition(client_network=70.0, compute=15.0), 2,
         "client_network", "client_network_share_pct", 70.0),
        (TelemetryStats(service_cpu_mean_pct=60.0, device_util_mean_pct=40.0), _decomposition(), 4,
         "none", "device_busy_pct", 40.0),
    ],
)  # fmt: skip
def test_rules(tel, decomp, cores, kind: str, key: str, value: float) -> None:
    found = step_bottleneck(_stats(), tel, decomp, cores)
    assert (found.index, found.kind) == (3, kind)
    assert found.evidence[key] == value


def test_no_successful_request_is_no_data() -> None:
    found = step_bottleneck(_stats(n_ok=0), TelemetryStats(device_util_mean_pct=99.0), None)
    assert found.kind == "no_data"


def test_nothing_measured_is_no_data() -> None:
    assert step_bottleneck(_stats(), TelemetryStats(), None).kind == "no_data"
