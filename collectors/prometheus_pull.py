"""Prometheus source: pull the run's window from an existing Prometheus server at stop.

For clusters where Huawei's npu-exporter or NVIDIA's DCGM exporter already run: one
`/api/v1/query_range` (step = interval) over their metric names, mapped onto canonical metrics.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from collectors.base import Source
from collectors.config import CollectorConfig
from embedperf.errors import CollectorError, EmbedperfError
from embedperf.schema import TelemetrySample

QUERY_TIMEOUT_S = 8.0  # within the runner's stop budget
# exporter metric -> canonical metric, in the exporter's units but for SCALES
NPU_EXPORTER: Mapping[str, str] = {
    "npu_chip_info_utilization": "aicore_util_pct",
    "npu_chip_info_overall_utilization": "device_util_pct",
    "npu_chip_info_vector_utilization": "vector_util_pct",
    "npu_chip_info_hbm_bandwidth_utilization": "mem_bw_util_pct",
    "npu_chip_info_hbm_used_memory": "mem_used_mb",
    "npu_chip_info_hbm_total_memory": "mem_total_mb",
    "npu_chip_info_temperature": "temp_c",
    "npu_chip_info_power": "power_w",
}
DCGM: Mapping[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "device_util_pct",
    "DCGM_FI_PROF_DRAM_ACTIVE": "mem_bw_util_pct",
    "DCGM_FI_DEV_FB_USED": "mem_used_mb",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_SM_CLOCK": "clock_mhz",
}
SCALES: Mapping[str, float] = {"DCGM_FI_PROF_DRAM_ACTIVE": 100.0}  # a fraction
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # total = used + free at the same timestamp
QUERY = '{__name__=~"' + "|".join([*NPU_EXPORTER, *DCGM, DCGM_FB_FREE]) + '"}'


def prometheus_data(
    url: str, path: str, params: Mapping[str, str | float], timeout_s: float,
    error: type[EmbedperfError] = CollectorError,
) -> Any:
    """The `data` of a Prometheus HTTP API answer; no answer, or one that is not a success, is `error`."""
    try:
        body = httpx.get(f"{url}{path}", params=params, timeout=timeout_s).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise error(f"Prometheus at {url} does not answer {path}: {exc}; check --prometheus-url") from exc
    if not isinstance(body, dict) or body.get("status") != "success":
        raise error(f"Prometheus at {url} refused {path}: {str(body)[:200]}")
    return body["data"]


def device_of(labels: Mapping[str, str]) -> str | None:
    """`npu<id>.chip<vdie_id or 0>` for npu-exporter series, `gpu<N>` for DCGM ones."""
    name = labels.get("__name__", "")
    if name.startswith("DCGM_"):
        gpu = labels.get("gpu")
        return f"gpu{gpu}" if gpu is not None and gpu.isdigit() else None
    npu = labels.get("id")
    if npu is None or not npu.isdigit():
        return None
    vdie = labels.get("vdie_id", "")
    chip = vdie if re.fullmatch(r"\d{1,3}", vdie) else "0"
    return f"npu{npu}.chip{chip}"


def map_series(result: list[dict[str, Any]], host: str) -> list[TelemetrySample]:
    """query_range `matrix` result -> telemetry rows (NaN points dropped)."""
    rows: list[TelemetrySample] = []
    fb: dict[tuple[str, float], dict[str, float]] = {}
    for series in result:
        labels: dict[str, str] = series.get("metric", {})
        name, device = labels.get("__name__", ""), device_of(labels)
        if device is None:
            continue
        for ts_raw, value_raw in series.get("values", []):
            ts, value = float(ts_raw), float(value_raw)
            if value != value:  # NaN
                continue
            if name in (DCGM_FB_FREE, "DCGM_FI_DEV_FB_USED"):
                fb.setdefault((device, ts), {})[name] = value
            if (metric := NPU_EXPORTER.get(name) or DCGM.get(name)) is not None:
                rows.append(TelemetrySample(ts, host, "prometheus", device, metric, value * SCALES.get(name, 1.0)))
    for (device, ts), pair in fb.items():
        if len(pair) == 2:
            rows.append(TelemetrySample(ts, host, "prometheus", device, "mem_total_mb", sum(pair.values())))
    rows.sort(key=lambda r: (r.ts_unix_s, r.device, r.metric))
    return rows


class PrometheusSource(Source):
    name = "prometheus"
    periodic = False

    def __init__(self, config: CollectorConfig) -> None:
        super().__init__()
        self.url = config.prometheus_url
        self.step_s = config.interval_s
        self.host = config.host_label

    def probe(self) -> str | None:
        return None if self.url else "no --prometheus-url given"

    def start(self) -> None:
        try:
            httpx.get(f"{self.url}/-/ready", timeout=5.0)
        except httpx.HTTPError as exc:
            self.status.event("gap", f"Prometheus at {self.url} not reachable at start: {exc}; will retry at stop")

    def finish(self, start_unix_s: float, end_unix_s: float) -> Iterable[TelemetrySample]:
        window: dict[str, str | float] = {"query": QUERY, "start": start_unix_s, "end": end_unix_s, "step": self.step_s}
        data = prometheus_data(str(self.url), "/api/v1/query_range", window, QUERY_TIMEOUT_S)
        if not (rows := map_series(data["result"], self.host)):
            self.status.event("gap", f"no npu-exporter or DCGM series between {start_unix_s:.0f} and {end_unix_s:.0f}")
        return rows
