"""Health thresholds per step (temperature, device memory, error rate, mean latency): pass or warn.

The thresholds are the run's own `health:` settings (scenarios.models.Health, stored typed in the
manifest), so an override such as `--set health.max_device_temp_c=70` reaches the verdict.
"""

from __future__ import annotations

from pydantic import BaseModel

from analysis.model.steps import StepStats
from analysis.model.telemetry import TelemetryStats
from scenarios.models import Health


class HealthCheck(BaseModel):
    name: str
    value: float | None
    limit: float
    status: str  # "pass" | "warn" | "n/a"


def _check(name: str, value: float | None, limit: float) -> HealthCheck:
    status = "n/a" if value is None else "pass" if value < limit else "warn"
    return HealthCheck(name=name, value=value, limit=limit, status=status)


def step_health(step: StepStats, tel: TelemetryStats, limits: Health) -> list[HealthCheck]:
    """Error rate is checked as a fraction (like StepStats.error_rate); the setting is a percentage."""
    return [
        _check("temp_c", tel.temp_max_c, limits.max_device_temp_c),
        _check("mem_pct", tel.mem_max_pct, limits.max_device_mem_pct),
        _check("error_rate", step.error_rate, limits.max_error_rate_pct / 100.0),
        _check("mean_latency_ms", step.latency.mean_ms, limits.max_mean_latency_ms),
    ]
