"""What a soak analysis takes in and gives back: per-minute inputs from the rows and the verdict's figures."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class SoakResult(BaseModel):
    minutes: int
    p50_slope_ms_per_h: float | None
    p99_slope_ms_per_h: float | None
    p99_median_ms: float | None
    error_rate_first_half: float | None
    error_rate_second_half: float | None
    rss_slope_mb_per_h: float | None
    rss_mean_mb: float | None
    latency_drift: bool
    memory_leak: bool
    error_rise: bool
    verdict: str  # "stable" | "degrading"
    per_minute: list[dict[str, Any]] = []


class SoakInputs(BaseModel):
    """What the soak trends need from the request rows: per-minute figures and the error rate of each half
    (analysis.engine.tables.soak_inputs)."""

    t0_unix_s: float
    minutes: list[int]  # minutes from t0 that have ok requests
    p50_ms: list[float]
    p99_ms: list[float]
    error_rate: dict[int, float]  # every minute with requests
    error_rate_first_half: float | None
    error_rate_second_half: float | None
