"""Telemetry joined to load steps by time: device, host, generator and service figures per steady window."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

ACCELERATOR_SOURCES = frozenset({"npu_smi", "nvml"})
GENERATOR_DEVICE = "proc:generator"
SERVICE_DEVICE = "proc:service"
HOST_CPU_DEVICE = "cpu"
SERIES_METRICS: tuple[str, ...] = ("device_util_pct", "mem_bw_util_pct", "temp_c", "power_w", "queue_depth")


class TelemetryStats(BaseModel):
    """Means and maxima over one window; None where no source reported the metric."""

    n_samples: int = 0
    n_devices: int = Field(default=0, description="Serving devices with samples in the window.")
    device_util_mean_pct: float | None = None
    device_util_max_pct: float | None = None
    mem_bw_util_mean_pct: float | None = None
    temp_max_c: float | None = Field(default=None, description="The hottest serving device's peak.")
    power_mean_w: float | None = Field(default=None, description="Mean power of one serving device.")
    power_total_mean_w: float | None = Field(default=None, description="Summed over devices, then averaged.")
    mem_used_max_mb: float | None = None
    mem_max_pct: float | None = Field(default=None, description="Peak device memory, % of its total.")
    host_cpu_mean_pct: float | None = None
    generator_cpu_mean_pct: float | None = Field(default=None, description="The load generator's own CPU.")
    generator_cpu_max_pct: float | None = None
    service_cpu_mean_pct: float | None = Field(default=None, description="Service CPU, 100 per core.")
    service_busy_mean_pct: float | None = Field(default=None, description="% of time its worker was busy.")
    service_busy_max_pct: float | None = None
    service_rss_max_mb: float | None = None
    queue_depth_mean: float | None = Field(default=None, description="Requests in the service's queue.")
    queue_depth_max: float | None = None


class TelemetryIndex:
    """Telemetry split once by role, so each step window is a cheap time filter. Device figures cover the
    serving devices only (`serve`, see analysis.figures.devices); every accelerator row stays in
    `all_accelerator` for the per-device table.
    """

    def __init__(self, accelerator: pd.DataFrame, other: pd.DataFrame) -> None:
        """From frames already split by role and sorted by time (the out-of-core reader): no copies."""
        self.all_accelerator = self.accelerator = _with_device_keys(accelerator)
        self.other = other
        self.other_device = self.other["device"].astype(str).to_numpy() if len(self.other) else np.array([])
        self.devices = _distinct(self.accelerator["device"]) if len(self.accelerator) else []

    @classmethod
    def of_frame(cls, telemetry: pd.DataFrame) -> TelemetryIndex:
        """From one frame of every role in any order (the in-memory reference): split, then sorted by time."""
        source = telemetry["source"].astype(str) if len(telemetry) else pd.Series([], dtype=str)
        is_accel = source.isin(list(ACCELERATOR_SOURCES)).to_numpy()
        by_time = (telemetry[rows].sort_values("ts_unix_s", kind="stable") for rows in (is_accel, ~is_accel))
        return cls(*(frame.reset_index(drop=True) for frame in by_time))

    def serve(self, devices: list[str]) -> None:
        """Restrict every device figure to these devices (names as analysis.figures.devices gives them); none of
        them in the telemetry leaves no device figures rather than the figures of the wrong devices."""
        if not len(self.all_accelerator):
            return
        keep = self.all_accelerator["device"].isin(set(devices)).to_numpy()
        # every device serving (the common case): the same rows, not a copy of them
        self.accelerator = (
            self.all_accelerator if keep.all() else self.all_accelerator[keep].reset_index(drop=True)
        )
        self.devices = _distinct(self.accelerator["device"])

    def window_stats(self, t0: float, t1: float) -> TelemetryStats:
        accel, other = window(self.accelerator, t0, t1), window(self.other, t0, t1)
        stats = TelemetryStats(n_samples=len(accel) + len(other))
        if len(accel):
            by_metric = MetricRows(accel)
            stats.n_devices = int(accel["device"].nunique())
            util = by_metric.get("device_util_pct")
            stats.device_util_mean_pct, stats.device_util_max_pct = _mean_max(util)
            stats.mem_bw_util_mean_pct = _mean_max(by_metric.get("mem_bw_util_pct"))[0]
            stats.temp_max_c = _mean_max(by_metric.get("temp_c"))[1]
            power = by_metric.get("power_w")
            if power is not None:
                stats.power_mean_w = float(power["value"].mean())
                per_ts = power.groupby(np.floor(power["ts_unix_s"].to_numpy()))["value"].sum()
                stats.power_total_mean_w = float(per_ts.mean())
            stats.mem_used_max_mb = _mean_max(by_metric.get("mem_used_mb"))[1]
            stats.mem_max_pct = _mem_pct_max(by_metric)
        if len(other):
            device = other["device"].astype(str).to_numpy()
            metric = other["metric"].astype(str).to_numpy()
            value = other["value"].to_numpy()

            def pick(dev: str, met: str) -> np.ndarray:
                return value[(device == dev) & (metric == met)]

            stats.host_cpu_mean_pct = _mean_max(pick(HOST_CPU_DEVICE, "cpu_util_pct"))[0]
            gen = pick(GENERATOR_DEVICE, "cpu_util_pct")
            stats.generator_cpu_mean_pct, stats.generator_cpu_max_pct = _mean_max(gen)
            stats.service_cpu_mean_pct = _mean_max(pick(SERVICE_DEVICE, "cpu_util_pct"))[0]
            stats.service_rss_max_mb = _mean_max(pick(SERVICE_DEVICE, "rss_mb"))[1]
            busy = value[metric == "busy_frac"] * 100.0
            stats.service_busy_mean_pct, stats.service_busy_max_pct = _mean_max(busy)
            stats.queue_depth_mean, stats.queue_depth_max = _mean_max(value[metric == "queue_depth"])
        return stats

    def per_second_series(self, max_points: int = 1500) -> pd.DataFrame:
        """Figures' time series: device metrics averaged over devices (temp max, power summed), one metric at
        a time over boolean masks of the label codes: no copy of the whole telemetry."""
        columns: dict[str, pd.Series] = {}
        for frame in (self.accelerator, self.other):
            if not len(frame):
                continue
            metric, ts, value = frame["metric"], frame["ts_unix_s"].to_numpy(), frame["value"].to_numpy()
            for name in SERIES_METRICS:
                mask = (metric == name).to_numpy()
                if not mask.any():
                    continue
                grouped = pd.Series(value[mask]).groupby(np.floor(ts[mask]))
                how = "max" if name == "temp_c" else "sum" if name == "power_w" else "mean"
                agg = getattr(grouped, how)()
                columns[name] = columns[name].combine_first(agg) if name in columns else agg
        if not columns:
            return pd.DataFrame()
        wide = pd.DataFrame(columns).sort_index()
        if len(wide) > max_points:
            bucket = np.floor((wide.index.to_numpy() - wide.index[0]) / (len(wide) / max_points))
            wide = wide.groupby(bucket).mean().set_index(wide.index.to_series().groupby(bucket).first())
        return wide.sort_index()

    def service_rss_series(self) -> tuple[np.ndarray, np.ndarray]:
        if not len(self.other):
            return np.array([]), np.array([])
        metric = self.other["metric"].astype(str).to_numpy()
        mask = (self.other_device == SERVICE_DEVICE) & (metric == "rss_mb")
        sub = self.other[mask]
        return sub["ts_unix_s"].to_numpy(), sub["value"].to_numpy()


def window(frame: pd.DataFrame, t0: float, t1: float) -> pd.DataFrame:
    """The rows of a frame sorted by time with t0 <= ts_unix_s <= t1 (a view, no copy)."""
    ts = frame["ts_unix_s"].to_numpy()
    return frame.iloc[np.searchsorted(ts, t0, side="left") : np.searchsorted(ts, t1, side="right")]


def _distinct(labels: pd.Series) -> list[str]:
    """Sorted distinct labels, without a string per row (a categorical of 12M rows stays codes)."""
    return sorted({str(v) for v in labels.unique() if v is not None and v == v})


class MetricRows:
    """One metric's rows of a window, selected when asked for: never every metric's copy at once."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.metric = frame["metric"]

    def get(self, name: str) -> pd.DataFrame | None:
        mask = (self.metric == name).to_numpy()
        return self.frame[mask] if mask.any() else None


def _with_device_keys(accelerator: pd.DataFrame) -> pd.DataFrame:
    """With several accelerator hosts (agents), a device is `host/device`: npu0 on two hosts are two devices."""
    if not len(accelerator) or "host" not in accelerator or accelerator["host"].nunique() <= 1:
        return accelerator
    keys = accelerator["host"].astype(str) + "/" + accelerator["device"].astype(str)
    return accelerator.assign(device=keys.astype("category"))


def _mean_max(rows: pd.DataFrame | np.ndarray | None) -> tuple[float | None, float | None]:
    """Mean and maximum of some values (a frame's `value` column), None without any."""
    values = rows["value"].to_numpy() if isinstance(rows, pd.DataFrame) else rows
    if values is None or not len(values):
        return None, None
    return float(values.mean()), float(values.max())


def _mem_pct_max(by_metric: MetricRows) -> float | None:
    util = by_metric.get("mem_util_pct")
    if util is not None:
        return float(util["value"].max())
    used, total = by_metric.get("mem_used_mb"), by_metric.get("mem_total_mb")
    if used is None or total is None:
        return None
    total_by_device = total.groupby(total["device"].astype(str))["value"].max()
    used_by_device = used.groupby(used["device"].astype(str))["value"].max()
    pct = (used_by_device / total_by_device).dropna() * 100.0
    return float(pct.max()) if len(pct) else None


