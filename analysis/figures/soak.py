"""Soak runs: latency drift, error-rate trend and service memory growth over time, with a verdict."""

from __future__ import annotations

import numpy as np

from analysis.model.soak import SoakInputs, SoakResult
from embedperf.schema import Manifest

SOAK_MIN_DURATION_S = 600.0
DRIFT_MAX_PCT_PER_H = 10.0  # P99 slope above this share of its median per hour is drift
LEAK_MIN_MB_PER_H = 20.0
LEAK_MIN_PCT_PER_H = 5.0
MINUTE_S = 60.0


def is_soak(manifest: Manifest) -> bool:
    if manifest.scenario.kind == "soak":
        return True
    if len(manifest.stages) == 1:
        stage = manifest.stages[0]
        end = stage.end_unix_s or manifest.end_unix_s
        return end is not None and end - stage.start_unix_s >= SOAK_MIN_DURATION_S
    return False


def slope_per_h(t_s: np.ndarray, y: np.ndarray) -> float | None:
    """Least-squares slope of y per hour over the finite points (None with fewer than 3, or one instant)."""
    keep = np.isfinite(t_s) & np.isfinite(y)
    if keep.sum() < 3 or np.ptp(t_s[keep]) == 0:
        return None
    return float(np.polyfit(t_s[keep], y[keep], 1)[0] * 3600.0)


def drifts(p99_slope_ms_per_h: float | None, p99_median_ms: float | None) -> bool:
    """The P99 rises by more than DRIFT_MAX_PCT_PER_H of its median an hour."""
    if p99_slope_ms_per_h is None or not p99_median_ms:
        return False
    return p99_slope_ms_per_h > DRIFT_MAX_PCT_PER_H / 100.0 * p99_median_ms


def grows(rss_slope_mb_per_h: float | None, rss_mean_mb: float | None) -> bool:
    """Service memory grows faster than LEAK_MIN_MB_PER_H and LEAK_MIN_PCT_PER_H of its mean an hour."""
    if rss_slope_mb_per_h is None or not rss_mean_mb:
        return False
    return rss_slope_mb_per_h > max(LEAK_MIN_MB_PER_H, LEAK_MIN_PCT_PER_H / 100.0 * rss_mean_mb)


def soak_result(inputs: SoakInputs, rss_t_s: np.ndarray, rss_mb: np.ndarray) -> SoakResult:
    t0 = inputs.t0_unix_s
    minutes_s = np.array(inputs.minutes, dtype=np.float64) * MINUTE_S
    p50, p99 = (np.array(values, dtype=np.float64) for values in (inputs.p50_ms, inputs.p99_ms))
    p99_slope = slope_per_h(minutes_s, p99)
    p99_median = float(np.median(p99)) if len(p99) else None
    err_first, err_second = inputs.error_rate_first_half, inputs.error_rate_second_half
    rss_slope = slope_per_h(rss_t_s - t0, rss_mb) if len(rss_mb) else None
    rss_mean = float(np.mean(rss_mb)) if len(rss_mb) else None
    drift, leak = drifts(p99_slope, p99_median), grows(rss_slope, rss_mean)
    error_rise = bool(err_first is not None and err_second is not None and err_second > 2 * err_first + 0.001)
    per_minute = [
        {"minute": m, "p50_ms": lo, "p99_ms": hi, "error_rate": inputs.error_rate.get(m, 0.0)}
        for m, lo, hi in zip(inputs.minutes, inputs.p50_ms, inputs.p99_ms, strict=True)
    ]
    return SoakResult(
        minutes=len(per_minute), p50_slope_ms_per_h=slope_per_h(minutes_s, p50), p99_slope_ms_per_h=p99_slope,
        p99_median_ms=p99_median, error_rate_first_half=err_first, error_rate_second_half=err_second,
        rss_slope_mb_per_h=rss_slope, rss_mean_mb=rss_mean, latency_drift=drift, memory_leak=leak,
        error_rise=error_rise, verdict="degrading" if (drift or leak or error_rise) else "stable",
        per_minute=per_minute,
    )  # fmt: skip
