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
    kind = str(manifest.scenario.get("kind", "")).lower()
    if kind == "soak":
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


def soak_trends(rows: pd.DataFrame, rss_t_s: np.ndarray, rss_mb: np.ndarray) -> SoakResult:
    """rows: steady, non-probe request rows with an `outcome` column."""
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
    minutes_s = p99.index.to_numpy() * MINUTE_S
    p50_slope = _slope_per_h(minutes_s, p50.to_numpy())
    p99_slope = _slope_per_h(minutes_s, p99.to_numpy())
    p99_median = float(np.median(p99.to_numpy())) if len(p99) else None
    outcome = rows["outcome"].to_numpy()
    half = len(outcome) // 2
    err_first = float((outcome[:half] != OUTCOME_OK).mean()) if half else None
    err_second = float((outcome[half:] != OUTCOME_OK).mean()) if half else None
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
        {
            "minute": int(m),
            "p50_ms": float(p50[m]),
            "p99_ms": float(p99[m]),
            "error_rate": float(err.get(m, 0.0)),
        }
        for m in p99.index
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
