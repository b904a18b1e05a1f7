"""Soak runs: latency drift, error-rate trend and service memory growth over time, with a verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from analysis.steps import OUTCOME_OK, PERCENTILE_METHOD
from embedperf.schema import Manifest

SOAK_MIN_DURATION_S = 600.0
DRIFT_MAX_PCT_PER_H = 10.0  # P99 slope above this share of its median per hour is drift
LEAK_MIN_MB_PER_H = 20.0
LEAK_MIN_PCT_PER_H = 5.0
MINUTE_S = 60.0


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


def is_soak(manifest: Manifest) -> bool:
    if manifest.scenario.kind == "soak":
        return True
    if len(manifest.stages) == 1:
        stage = manifest.stages[0]
        end = stage.end_unix_s or manifest.end_unix_s
        return end is not None and end - stage.start_unix_s >= SOAK_MIN_DURATION_S
    return False


def _slope_per_h(t_s: np.ndarray, y: np.ndarray) -> float | None:
    keep = np.isfinite(t_s) & np.isfinite(y)
    if keep.sum() < 3 or np.ptp(t_s[keep]) == 0:
        return None
    return float(np.polyfit(t_s[keep], y[keep], 1)[0] * 3600.0)


class SoakInputs(BaseModel):
    """What the soak trends need from the request rows: per-minute figures and the error rate of each half.

    Computed from rows here (soak_inputs) or out of core (analysis.ooc_tables.soak_inputs).
    """

    t0_unix_s: float
    minutes: list[int]  # minutes from t0 that have ok requests
    p50_ms: list[float]
    p99_ms: list[float]
    error_rate: dict[int, float]  # every minute with requests
    error_rate_first_half: float | None
    error_rate_second_half: float | None


def soak_inputs(rows: pd.DataFrame) -> SoakInputs:
    """rows: steady, non-probe request rows with an `outcome` column, sorted by stage and send time."""
    t_s = rows["t_sent_unix_s"].to_numpy()
    t0 = float(np.nanmin(t_s)) if len(t_s) else 0.0
    minute = np.floor((t_s - t0) / MINUTE_S)
    frame = pd.DataFrame(
        {"minute": minute, "latency_ms": rows["latency_ms"].to_numpy(), "ok": rows["outcome"].to_numpy() == 0}
    )
    ok = frame[frame["ok"]]
    grouped = ok.groupby("minute")["latency_ms"]
    p50 = grouped.quantile(0.5, interpolation=PERCENTILE_METHOD)
    p99 = grouped.quantile(0.99, interpolation=PERCENTILE_METHOD)
    err = 1.0 - frame.groupby("minute")["ok"].mean()
    outcome = rows["outcome"].to_numpy()
    half = len(outcome) // 2
    return SoakInputs(
        t0_unix_s=t0,
        minutes=[int(m) for m in p99.index],
        p50_ms=[float(v) for v in p50.to_numpy()],
        p99_ms=[float(v) for v in p99.to_numpy()],
        error_rate={int(m): float(v) for m, v in err.items()},
        error_rate_first_half=float((outcome[:half] != OUTCOME_OK).mean()) if half else None,
        error_rate_second_half=float((outcome[half:] != OUTCOME_OK).mean()) if half else None,
    )


def soak_trends(rows: pd.DataFrame, rss_t_s: np.ndarray, rss_mb: np.ndarray) -> SoakResult:
    """rows: steady, non-probe request rows with an `outcome` column."""
    return soak_result(soak_inputs(rows), rss_t_s, rss_mb)


def soak_result(inputs: SoakInputs, rss_t_s: np.ndarray, rss_mb: np.ndarray) -> SoakResult:
    t0 = inputs.t0_unix_s
    minutes_s = np.array(inputs.minutes, dtype=np.float64) * MINUTE_S
    p50 = np.array(inputs.p50_ms, dtype=np.float64)
    p99 = np.array(inputs.p99_ms, dtype=np.float64)
    p50_slope = _slope_per_h(minutes_s, p50)
    p99_slope = _slope_per_h(minutes_s, p99)
    p99_median = float(np.median(p99)) if len(p99) else None
    err_first, err_second = inputs.error_rate_first_half, inputs.error_rate_second_half
    rss_slope = _slope_per_h(rss_t_s - t0, rss_mb) if len(rss_mb) else None
    rss_mean = float(np.mean(rss_mb)) if len(rss_mb) else None
    drift = bool(
        p99_slope is not None and p99_median and p99_slope > DRIFT_MAX_PCT_PER_H / 100.0 * p99_median
    )
    leak = bool(
        rss_slope is not None
        and rss_mean
        and rss_slope > max(LEAK_MIN_MB_PER_H, LEAK_MIN_PCT_PER_H / 100.0 * rss_mean)
    )
    error_rise = bool(err_first is not None and err_second is not None and err_second > 2 * err_first + 0.001)
    per_minute = [
        {"minute": m, "p50_ms": lo, "p99_ms": hi, "error_rate": inputs.error_rate.get(m, 0.0)}
        for m, lo, hi in zip(inputs.minutes, inputs.p50_ms, inputs.p99_ms, strict=True)
    ]
    return SoakResult(
        minutes=len(per_minute),
        p50_slope_ms_per_h=p50_slope,
        p99_slope_ms_per_h=p99_slope,
        p99_median_ms=p99_median,
        error_rate_first_half=err_first,
        error_rate_second_half=err_second,
        rss_slope_mb_per_h=rss_slope,
        rss_mean_mb=rss_mean,
        latency_drift=drift,
        memory_leak=leak,
        error_rise=error_rise,
        verdict="degrading" if (drift or leak or error_rise) else "stable",
        per_minute=per_minute,
    )
