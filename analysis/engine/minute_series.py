"""Time series of a long run computed out of core: per-minute soak series and findings, figure series.

Everything here is a GROUP BY over the Parquet files (DuckDB, see analysis/engine/requests.py), so a 24 h soak
of 100M rows gives 1,440 points per series in bounded memory. The soak findings follow
analysis/figures/soak.py (P99 drift, service memory growth) and add thermal throttling: a device whose clock
or power falls while its temperature rises.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
from pydantic import BaseModel, Field

from analysis.engine import requests as ooc
from analysis.figures.soak import MINUTE_S, drifts, grows, slope_per_h
from analysis.model.telemetry import ACCELERATOR_SOURCES, SERVICE_DEVICE

# Grouped quantiles hold every group's values and a hash table at once: a quarter of a selection pass.
SERIES_PASS_DIVISOR = 4
THROTTLE_TEMP_RISE_C = 5.0  # last quarter vs first quarter of the run
THROTTLE_DROP_FRACTION = 0.05  # clock or power this much lower in the last quarter


class MinutePoint(BaseModel):
    """One minute of the steady run; telemetry fields are None where no source reported them."""

    minute: int
    qps: float
    goodput_qps: float
    error_rate: float
    p50_ms: float | None
    p99_ms: float | None
    device_util_pct: float | None = None
    temp_max_c: float | None = Field(default=None, description="The hottest serving device's peak.")
    power_w: float | None = Field(default=None, description="The serving devices' means, summed.")
    clock_mhz: float | None = None
    service_rss_mb: float | None = None


class SoakFindings(BaseModel):
    p99_slope_ms_per_h: float | None
    p99_median_ms: float | None
    rss_slope_mb_per_h: float | None
    rss_mean_mb: float | None
    latency_drift: bool
    memory_growth: bool
    thermal_throttling: bool
    temp_rise_c: float | None
    clock_change_pct: float | None
    power_change_pct: float | None


def _buckets(
    con: duckdb.DuckDBPyConnection, rows: str, time_col: str, ok: str, t0: float, bucket_s: float,
    extent: tuple[float, float, int],
) -> list[tuple[Any, ...]]:  # fmt: skip
    """(bucket, rows, ok rows, [P50, P99] of the ok latencies) per bucket_s of `time_col` from t0 over `rows`
    (`view WHERE ...`), in as many queries as keep one query's latencies within ooc.PASS_VALUES (DuckDB holds
    them at once); extent: the first and last time and the row count."""
    k = f"floor(({time_col} - ?) / ?)::BIGINT"
    query = f"""SELECT {k} AS k, count(*), count(*) FILTER ({ok}),
                    quantile_cont(latency_ms, [0.5, 0.99]) FILTER ({ok})
                FROM {rows} AND {time_col} >= ? AND {time_col} < ? AND {k} BETWEEN ? AND ?
                GROUP BY k ORDER BY k"""
    first, last = (int(np.floor((float(t) - t0) / bucket_s)) for t in extent[:2])
    n_slices = max(1, int(np.ceil(extent[2] / (ooc.PASS_VALUES / SERIES_PASS_DIVISOR))))
    per_slice = max(1, int(np.ceil((last - first + 1) / n_slices)))
    out: list[tuple[Any, ...]] = []
    for lo in range(first, last + 1, per_slice):
        window = [t0 + (lo - 1) * bucket_s, t0 + (lo + per_slice + 1) * bucket_s]
        out += con.execute(query, [t0, bucket_s, *window, t0, bucket_s, lo, lo + per_slice - 1]).fetchall()
    return out


def request_minutes(con: duckdb.DuckDBPyConnection) -> tuple[float | None, list[MinutePoint]]:
    """Per-minute QPS, goodput, error rate and P50/P99 of the `prepared` view's steady, non-probe rows."""
    extent = "SELECT min(t_sent_unix_s), max(t_sent_unix_s), count(*) FROM prepared WHERE NOT probe"
    [(t_min, t_max, n_rows)] = con.execute(extent).fetchall()
    if t_min is None:
        return None, []
    t0 = float(t_min)
    rows = "prepared WHERE NOT probe AND t_sent_unix_s IS NOT NULL"
    buckets = _buckets(con, rows, "t_sent_unix_s", "outcome = 0", t0, MINUTE_S, (t0, t_max, int(n_rows)))
    return t0, [
        MinutePoint(
            minute=int(m), qps=n / MINUTE_S, goodput_qps=n_ok / MINUTE_S, error_rate=1.0 - n_ok / n,
            p50_ms=q[0] if q else None, p99_ms=q[1] if q else None,
        )
        for m, n, n_ok, q in buckets
    ]  # fmt: skip


def prepare_telemetry_minutes(con: duckdb.DuckDBPyConnection, t0: float) -> None:
    """Per-minute telemetry of every device from the `tel` view into small temp tables (`tel_minutes`,
    `rss_minutes`), before the telemetry is loaded for the step figures, so DuckDB's aggregation and those
    frames never hold memory at the same time; add_telemetry_minutes then picks the serving devices."""
    sources = ", ".join(f"'{s}'" for s in sorted(ACCELERATOR_SOURCES))
    minute = f"floor((ts_unix_s - {t0!r}) / {MINUTE_S!r})::BIGINT"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE tel_minutes AS
            SELECT {minute} AS minute, device, metric, avg(value) AS mean, max(value) AS peak FROM tel
            WHERE ts_unix_s >= {t0!r} AND source IN ({sources})
              AND metric IN ('device_util_pct', 'temp_c', 'power_w', 'clock_mhz')
            GROUP BY ALL"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE rss_minutes AS
            SELECT {minute} AS minute, avg(value) AS rss FROM tel
            WHERE ts_unix_s >= {t0!r} AND device = '{SERVICE_DEVICE}' AND metric = 'rss_mb' GROUP BY ALL"""
    )


def add_telemetry_minutes(
    con: duckdb.DuckDBPyConnection, points: list[MinutePoint], serving: list[str] | None = None
) -> None:
    """Each point's serving-device figures and service RSS, from prepare_telemetry_minutes' tables."""
    if not points:
        return
    device_filter = f"WHERE device IN ({', '.join(repr(d) for d in serving)})" if serving else ""
    rows = con.execute(
        f"""WITH per_minute AS (
                SELECT minute,
                    avg(mean) FILTER (metric = 'device_util_pct') AS util,
                    max(peak) FILTER (metric = 'temp_c') AS temp,
                    sum(mean) FILTER (metric = 'power_w') AS power,
                    avg(mean) FILTER (metric = 'clock_mhz') AS clock
                FROM tel_minutes {device_filter} GROUP BY minute)
            SELECT coalesce(p.minute, r.minute), util, temp, power, clock, rss
            FROM per_minute p FULL JOIN rss_minutes r ON p.minute = r.minute"""
    ).fetchall()
    by_minute = {int(r[0]): r[1:] for r in rows}
    for point in points:
        values = by_minute.get(point.minute)
        if values is not None:
            point.device_util_pct, point.temp_max_c, point.power_w, point.clock_mhz, point.service_rss_mb = (
                values
            )


def _series(points: list[MinutePoint], name: str) -> np.ndarray:
    values = [getattr(p, name) for p in points]
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _quarter_change(values: np.ndarray) -> tuple[float, float] | None:
    """(first-quarter mean, last-quarter mean) of the finite values; None with fewer than 8."""
    finite = values[np.isfinite(values)]
    if len(finite) < 8:
        return None
    quarter = len(finite) // 4
    return float(finite[:quarter].mean()), float(finite[-quarter:].mean())


def soak_findings(points: list[MinutePoint]) -> SoakFindings:
    minutes_s = np.array([p.minute for p in points], dtype=np.float64) * MINUTE_S
    p99 = _series(points, "p99_ms")
    rss = _series(points, "service_rss_mb")
    p99_slope = slope_per_h(minutes_s, p99)
    p99_median = float(np.nanmedian(p99)) if np.isfinite(p99).any() else None
    rss_slope = slope_per_h(minutes_s, rss)
    rss_mean = float(np.nanmean(rss)) if np.isfinite(rss).any() else None
    temp = _quarter_change(_series(points, "temp_max_c"))
    changes: dict[str, float | None] = {}
    for name in ("clock_mhz", "power_w"):
        pair = _quarter_change(_series(points, name))
        changes[name] = (pair[1] / pair[0] - 1.0) * 100.0 if pair and pair[0] else None
    temp_rise = temp[1] - temp[0] if temp else None
    dropping = any(c is not None and c <= -THROTTLE_DROP_FRACTION * 100.0 for c in changes.values())
    return SoakFindings(
        p99_slope_ms_per_h=p99_slope, p99_median_ms=p99_median, rss_slope_mb_per_h=rss_slope,
        rss_mean_mb=rss_mean,
        latency_drift=drifts(p99_slope, p99_median), memory_growth=grows(rss_slope, rss_mean),
        thermal_throttling=bool(temp_rise is not None and temp_rise >= THROTTLE_TEMP_RISE_C and dropping),
        temp_rise_c=temp_rise, clock_change_pct=changes["clock_mhz"], power_change_pct=changes["power_w"],
    )  # fmt: skip


# Figure series: what reports/figures.py draws, without the rows
class RequestSeries(BaseModel):
    """QPS and ok-latency P50/P99 per time bucket (seconds from t0), at most max_points buckets."""

    bucket_s: float
    t_s: list[float]
    qps: list[float]
    p50_ms: list[float | None]
    p99_ms: list[float | None]


def request_series(con: duckdb.DuckDBPyConnection, t0: float, max_points: int) -> RequestSeries:
    """The time-series figure's request panels from the `tagged` view (every row, by completion time);
    QPS is goodput (ok rows per second), as in the throughput figure."""
    [(t_min, t_max, n_rows)] = con.execute(
        "SELECT min(t_done_unix_s), max(t_done_unix_s), count(*) FROM tagged WHERE isfinite(t_done_unix_s)"
    ).fetchall()
    if t_min is None:
        return RequestSeries(bucket_s=1.0, t_s=[], qps=[], p50_ms=[], p99_ms=[])
    bucket_s = max(1.0, float(np.ceil((float(t_max) - t0) / max_points)))
    ok, extent = "coalesce(ok, false)", (t_min, t_max, int(n_rows))
    rows = _buckets(con, "tagged WHERE isfinite(t_done_unix_s)", "t_done_unix_s", ok, t0, bucket_s, extent)
    return RequestSeries(
        bucket_s=bucket_s, t_s=[float(k * bucket_s) for k, *_ in rows],
        qps=[n_ok / bucket_s for _, _, n_ok, _ in rows],
        p50_ms=[q[0] if q else None for *_, q in rows], p99_ms=[q[1] if q else None for *_, q in rows],
    )  # fmt: skip


def batch_histograms(con: duckdb.DuckDBPyConnection) -> dict[int, dict[int, int]]:
    """Rows per server batch size per step (the batch-distribution figure)."""
    out: dict[int, dict[int, int]] = {}
    for stage, size, n in con.execute(
        "SELECT stage, batch_size, count(*) FROM prepared WHERE batch_size IS NOT NULL GROUP BY ALL ORDER BY ALL"
    ).fetchall():
        out.setdefault(int(stage), {})[int(size)] = int(n)
    return out


def top_errors(con: duckdb.DuckDBPyConnection, limit: int = 10) -> list[tuple[str, int]]:
    """Most frequent `status error` texts of failed steady rows (the report's error table)."""
    rows = con.execute(
        """SELECT trim(coalesce(status_code::VARCHAR, '') || ' ' || coalesce(error, '')) AS text, count(*) AS n
           FROM prepared WHERE NOT probe AND outcome <> 0 GROUP BY text ORDER BY n DESC, text LIMIT ?""",
        [limit],
    ).fetchall()
    return [(str(text), int(n)) for text, n in rows]
