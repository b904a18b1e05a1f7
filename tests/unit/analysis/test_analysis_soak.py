"""Soak trends: drift and a memory leak are detected; a flat run is stable."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.oracles.in_memory.figures import soak_trends


def rows(drift_ms_per_h: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 3600, 30_000))
    latency = rng.lognormal(np.log(20.0), 0.2, len(t)) + drift_ms_per_h * t / 3600.0
    return pd.DataFrame(
        {"t_sent_unix_s": t, "latency_ms": latency, "outcome": np.zeros(len(t), dtype=np.int8)}
    )


def test_flat_run_is_stable() -> None:
    ts = np.arange(0, 3600, 1.0)
    result = soak_trends(rows(0.0), ts, np.full(len(ts), 900.0))
    assert result.verdict == "stable"
    assert result.minutes == 60
    assert abs(result.p99_slope_ms_per_h or 0.0) < 3.0


def test_drift_and_leak_are_detected() -> None:
    ts = np.arange(0, 3600, 1.0)
    result = soak_trends(rows(20.0), ts, 900.0 + 200.0 * ts / 3600.0)
    assert result.latency_drift and result.memory_leak
    assert result.rss_slope_mb_per_h is not None and abs(result.rss_slope_mb_per_h - 200.0) < 1.0
    assert result.verdict == "degrading"
