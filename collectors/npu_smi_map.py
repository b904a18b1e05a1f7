"""npu-smi field names -> canonical metrics. `NA` / `-` become absent values, never 0.

Field sets differ by chip and driver (910A has no Aivector, 310P has Vectorcore and no HBM, newer
drivers add `NPU Utilization(%)`), so each canonical metric lists its sources in order of preference.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from collectors.npu_smi_parse import NO_VALUE, KvReport

Metrics = dict[str, float]

# canonical metric -> npu-smi keys (normalised whitespace), first present wins.
KV_FIELDS: Mapping[str, tuple[str, ...]] = {
    "aicore_util_pct": ("Aicore Usage Rate(%)",),
    "vector_util_pct": ("Aivector Usage Rate(%)", "Vectorcore Usage Rate(%)"),
    "aicpu_util_pct": ("Aicpu Usage Rate(%)",),
    "ctrlcpu_util_pct": ("Ctrlcpu Usage Rate(%)",),
    "mem_bw_util_pct": (
        "HBM Bandwidth Usage Rate(%)",
        "Memory Bandwidth Usage Rate(%)",
        "DDR Bandwidth Usage Rate(%)",
    ),
    "temp_c": ("Temperature(C)", "NPU Temperature (C)", "Temperature (C)", "AICORE (C)"),
    "power_w": ("NPU Real-time Power(W)", "Real-time Power(W)", "Power Dissipation(W)"),
    "clock_mhz": ("Aicore curFreq(MHZ)",),
}
# (capacity key, usage-rate key): HBM first; DDR only where the chip has no HBM (310/310P).
MEMORY_FIELDS: tuple[tuple[str, str], ...] = (
    ("HBM Capacity(MB)", "HBM Usage Rate(%)"),
    ("Memory Capacity(MB)", "Memory Usage Rate(%)"),
    ("DDR Capacity(MB)", "DDR Usage Rate(%)"),
)
# `npu-smi info watch` header -> canonical metric.
WATCH_COLUMNS: Mapping[str, str] = {
    "Pwr(W)": "power_w",
    "Temp(C)": "temp_c",
    "AI Core(%)": "aicore_util_pct",
    "AI Cpu(%)": "aicpu_util_pct",
    "Ctrl Cpu(%)": "ctrlcpu_util_pct",
    "Memory(%)": "mem_util_pct",
    "Memory BW(%)": "mem_bw_util_pct",
    "NPU Util(%)": "device_util_pct",
}


def to_float(value: str | None) -> float | None:
    """A number, or None for `NA`, `-`, empty and anything that is not a number."""
    if value is None or value.strip() in NO_VALUE:
        return None
    try:
        return float(value.strip())
    except ValueError:
        return None


def _numbers(raw: Iterable[tuple[str, str | None]]) -> Metrics:
    """The (metric, raw value) pairs whose value is a number; `NA`, `-` and the like are left out."""
    return {metric: value for metric, text in raw if (value := to_float(text)) is not None}


def device_name(npu_id: int, chip_id: int) -> str:
    return f"npu{npu_id}.chip{chip_id}"


def _with_device_util(metrics: Metrics, npu_util: float | None) -> Metrics:
    """device_util_pct: NPU Utilization where the driver has it, else the AI core rate."""
    if npu_util is not None:
        metrics["device_util_pct"] = npu_util
    elif "aicore_util_pct" in metrics:
        metrics["device_util_pct"] = metrics["aicore_util_pct"]
    return metrics


def metrics_from_fields(fields: Mapping[str, str]) -> Metrics:
    metrics: Metrics = {}
    for metric, keys in KV_FIELDS.items():
        value = next((v for key in keys if (v := to_float(fields.get(key))) is not None), None)
        if value is not None:
            metrics[metric] = value
    for capacity_key, rate_key in MEMORY_FIELDS:
        total_mb = to_float(fields.get(capacity_key))
        rate_pct = to_float(fields.get(rate_key))
        if capacity_key in fields and total_mb == 0:
            continue  # 910B prints DDR fields as 0: not this chip's memory
        if rate_pct is not None and (total_mb is not None or capacity_key not in fields):
            metrics["mem_util_pct"] = rate_pct
        if total_mb is not None:
            metrics["mem_total_mb"] = total_mb
            if rate_pct is not None:
                metrics["mem_used_mb"] = round(total_mb * rate_pct / 100.0, 1)
        if "mem_util_pct" in metrics or "mem_total_mb" in metrics:
            break
    return _with_device_util(metrics, to_float(fields.get("NPU Utilization(%)")))


def metrics_from_kv(report: KvReport, npu_id: int | None = None) -> dict[str, Metrics]:
    """Device name -> metrics. A single-chip card's MCU block fills in what the chip lacks (310P power)."""
    npu = report.npu_id if report.npu_id is not None else npu_id
    if npu is None or report.error:
        return {}
    blocks = report.chips or ({0: report.card} if report.card else {})
    out: dict[str, Metrics] = {}
    for chip_id, fields in sorted(blocks.items()):
        if metrics := metrics_from_fields(fields):
            out[device_name(npu, chip_id)] = metrics
    if report.mcu and len(out) == 1:
        card_metrics = metrics_from_fields(report.mcu)
        (only,) = out.values()
        for metric in ("power_w", "temp_c"):
            if metric not in only and metric in card_metrics:
                only[metric] = card_metrics[metric]
    return out


def metrics_from_watch_row(row: Mapping[str, str]) -> tuple[str, Metrics] | None:
    """(device, metrics) of one parsed watch row; newer builds have no ChipId column (chip 0)."""
    if (npu_id := to_float(row.get("NpuID(Idx)"))) is None:
        return None
    chip_id = to_float(row.get("ChipId(Idx)")) or 0.0
    metrics = _numbers((metric, row.get(column)) for column, metric in WATCH_COLUMNS.items())
    metrics = _with_device_util(metrics, metrics.pop("device_util_pct", None))
    return device_name(int(npu_id), int(chip_id)), metrics


def metrics_from_info_table(chips: list[dict[str, Any]]) -> dict[str, Metrics]:
    """Metrics of `npu-smi info`: exact HBM (else memory) used/total MB, power, temperature, util."""
    out: dict[str, Metrics] = {}
    for chip in chips:
        util_metric = "device_util_pct" if chip.get("util_kind") == "npu_util" else "aicore_util_pct"
        raw = (("power_w", "power_w"), ("temp_c", "temp_c"), (util_metric, "util_pct"))
        metrics = _numbers((metric, chip.get(key)) for metric, key in raw)
        pair = chip.get("hbm_mb") or chip.get("memory_mb")
        if pair and pair[1] > 0:
            metrics["mem_used_mb"], metrics["mem_total_mb"] = float(pair[0]), float(pair[1])
        out[device_name(chip["npu_id"], chip["chip_id"])] = _with_device_util(
            metrics, metrics.pop("device_util_pct", None)
        )
    return out
