"""Health thresholds per step (temperature, device memory, error rate, mean latency): pass or warn."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from analysis.steps import StepStats
from analysis.telemetry import TelemetryStats


class HealthThresholds(BaseModel):
    """Defaults; a scenario may override any of them under `health:`."""

    model_config = ConfigDict(extra="ignore")

    temp_max_c: float = Field(85.0, description="Device temperature must stay below this.")
    mem_max_pct: float = Field(80.0, description="Device memory use must stay below this share.")
    error_rate_max: float = Field(0.001, description="Error rate (fraction) must stay below this.")
    mean_latency_max_ms: float = Field(300.0, description="Mean latency must stay below this.")


class HealthCheck(BaseModel):
    name: str
    value: float | None
    limit: float
    status: str  # "pass" | "warn" | "n/a"


def thresholds_from_scenario(scenario: dict[str, Any]) -> HealthThresholds:
    raw = scenario.get("health") or {}
    return HealthThresholds.model_validate(raw if isinstance(raw, dict) else {})


def _check(name: str, value: float | None, limit: float) -> HealthCheck:
    if value is None:
        return HealthCheck(name=name, value=None, limit=limit, status="n/a")
    return HealthCheck(name=name, value=value, limit=limit, status="pass" if value < limit else "warn")


def step_health(step: StepStats, tel: TelemetryStats, limits: HealthThresholds) -> list[HealthCheck]:
    return [
        _check("temp_c", tel.temp_max_c, limits.temp_max_c),
        _check("mem_pct", tel.mem_max_pct, limits.mem_max_pct),
        _check("error_rate", step.error_rate, limits.error_rate_max),
        _check("mean_latency_ms", step.latency.mean_ms, limits.mean_latency_max_ms),
    ]
