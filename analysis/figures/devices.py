"""Serving devices: which accelerators in the telemetry serve the target, and a table of every device seen.

A host often has 8 NPUs and the target uses one or two. Per-step device figures and the capacity
plan count the serving devices only; the idle neighbours stay in telemetry.parquet and in the
per-device table, so a busy neighbour is still visible. The first rule that applies wins:
explicit indices (`--devices`, `target.devices`), the target's /info, devices busy under load.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from analysis.figures.quality import Finding, finding
from collectors.agent_pull import seconds_ranges
from embedperf.schema import AgentRecord, ServingDevices, ServingRule

# A device counts as busy when its mean utilisation under load is this many points above idle.
BUSY_MIN_RISE_PCT = 10.0
# Clock offset to an agent above which the report warns (device figures join load steps by time).
AGENT_OFFSET_WARN_S = 0.050
# A device under this mean utilisation during load is idle: its level is the host's idle floor.
IDLE_MAX_PCT = 10.0
UTIL_METRICS: tuple[str, ...] = ("device_util_pct", "aicore_util_pct")
_INDEX_RE = re.compile(r"(?:^|/)(?:npu|gpu)(\d+)(?:\.chip\d+)?$")


class DeviceRow(BaseModel):
    """One accelerator seen in the telemetry, over the run's steady load windows."""

    device: str
    host: str
    serving: bool
    util_idle_pct: float | None = Field(default=None, description="Mean outside load (of 2 samples or more).")
    util_load_mean_pct: float | None = None
    util_load_max_pct: float | None = None
    power_mean_w: float | None = Field(default=None, description="The device's mean power under load.")
    temp_max_c: float | None = None
    mem_used_max_mb: float | None = None


class ServingResult(BaseModel):
    """The rule used, the serving devices (telemetry names) and every device seen."""

    rule: ServingRule
    indices: list[int]
    devices: list[str]
    table: list[DeviceRow]


def device_index(device: str) -> int | None:
    """npu4.chip0 -> 4, gpu1 -> 1, host/npu4.chip0 -> 4; None for cpu and process rows."""
    match = _INDEX_RE.search(device)
    return int(match.group(1)) if match else None


def _in_windows(ts: np.ndarray, windows: list[tuple[float, float]]) -> np.ndarray:
    inside = np.zeros(len(ts), dtype=bool)
    for t0, t1 in windows:
        inside |= (ts >= t0) & (ts <= t1)
    return inside


def _util(frame: pd.DataFrame) -> pd.DataFrame:
    """device_util_pct where a device reports it, else its AI-core rate."""
    metric = frame["metric"]  # compared as labels: no string per row
    util = frame[(metric == UTIL_METRICS[0]).to_numpy()]
    reported = {str(d) for d in util["device"].unique()}
    fallback = frame[((metric == UTIL_METRICS[1]) & ~frame["device"].isin(reported)).to_numpy()]
    return pd.concat([util, fallback]) if len(fallback) else util


def _busy(rows: list[DeviceRow]) -> list[str]:
    """Rule 3: utilisation under load clearly above the device's idle level.

    Idle level: the device's own mean outside the load stages when the telemetry has such samples;
    else the quietest device's mean under load when that device is itself idle (below IDLE_MAX_PCT,
    the host's idle floor); else 0.
    """
    loads = [r.util_load_mean_pct for r in rows if r.util_load_mean_pct is not None]
    if not loads:
        return []
    floor = min(loads) if min(loads) < IDLE_MAX_PCT else 0.0
    idle = (floor if r.util_idle_pct is None else r.util_idle_pct for r in rows)
    return [r.device for r, base in zip(rows, idle, strict=True)
            if r.util_load_mean_pct is not None and r.util_load_mean_pct - base >= BUSY_MIN_RISE_PCT]


def device_table(
    accelerator: pd.DataFrame, windows: list[tuple[float, float]], load_span: tuple[float, float] | None
) -> list[DeviceRow]:
    """Per device (names from TelemetryIndex, host-prefixed with several hosts): idle and under-load
    utilisation, power, temperature, memory (serving unmarked yet). windows: the steady load windows;
    load_span: first stage start to last stage end (idle is outside)."""
    if not len(accelerator):
        return []
    rows = []
    host, device_col = accelerator["host"], accelerator["device"]
    pairs = sorted(
        (str(h), str(d)) for h in host.unique() for d in device_col[(host == h).to_numpy()].unique()
    )  # a handful of hosts and devices, found without a copy of the rows
    for host_name, device in pairs:  # one device at a time: no copy of the whole telemetry, no string per row
        group = accelerator[((host == host_name) & (device_col == device)).to_numpy()]
        g_loaded = group[_in_windows(group["ts_unix_s"].to_numpy(), windows)]
        ts = group["ts_unix_s"].to_numpy()
        g_idle = group[(ts < load_span[0]) | (ts > load_span[1])] if load_span else group.iloc[:0]
        util_load, util_idle = _util(g_loaded)["value"], _util(g_idle)["value"]
        metric = g_loaded["metric"]
        power, temp, mem = (
            g_loaded[(metric == m).to_numpy()]["value"] for m in ("power_w", "temp_c", "mem_used_mb")
        )
        rows.append(DeviceRow(
            device=device, host=host_name, serving=False,
            util_idle_pct=float(util_idle.mean()) if len(util_idle) >= 2 else None,
            util_load_mean_pct=float(util_load.mean()) if len(util_load) else None,
            util_load_max_pct=float(util_load.max()) if len(util_load) else None,
            power_mean_w=float(power.mean()) if len(power) else None,
            temp_max_c=float(temp.max()) if len(temp) else None,
            mem_used_max_mb=float(mem.max()) if len(mem) else None,
        ))  # fmt: skip
    return rows


def serving_devices(
    accelerator: pd.DataFrame, recorded: ServingDevices, windows: list[tuple[float, float]],
    load_span: tuple[float, float] | None,
) -> ServingResult:  # fmt: skip
    """Apply the rules: the manifest's explicit or /info indices, else the devices busy under load."""
    table = device_table(accelerator, windows, load_span)
    rule: ServingRule = recorded.rule
    if rule in ("explicit", "service_info"):
        wanted = set(recorded.indices)
        serving = [r.device for r in table if device_index(r.device) in wanted]
        indices = sorted(wanted)
    else:
        serving = _busy(table)
        rule = "busy" if serving else "none"
        indices = sorted({i for i in (device_index(d) for d in serving) if i is not None})
    chosen = set(serving)
    for row in table:
        row.serving = row.device in chosen
    return ServingResult(rule=rule, indices=indices, devices=sorted(chosen), table=table)


def deployment_findings(serving: ServingResult, agents: list[AgentRecord]) -> list[Finding]:
    """What a reviewer must know about devices and remote hosts: how the serving devices were found,
    clock offsets to agents above AGENT_OFFSET_WARN_S, and the seconds an agent did not cover."""
    out: list[Finding] = []
    table = serving.table
    if serving.rule == "busy":
        idle = [r.device for r in table if not r.serving]
        out.append(finding("serving_busy", "info", devices=", ".join(serving.devices), idle=len(idle)))
    elif serving.rule in ("explicit", "service_info") and table and not serving.devices:
        indices, seen = ", ".join(map(str, serving.indices)), ", ".join(r.device for r in table)
        out.append(finding("serving_not_seen", indices=indices, seen=seen))
    elif serving.rule == "none" and len(table) > 1:
        out.append(finding("serving_unknown", n=len(table)))
    for agent in agents:
        host = agent.host or agent.url
        if agent.offset_s is not None and abs(agent.offset_s) > AGENT_OFFSET_WARN_S:
            uncertainty_ms = (agent.offset_uncertainty_s or 0.0) * 1000.0
            offset = {"offset_ms": agent.offset_s * 1000.0, "uncertainty_ms": uncertainty_ms}
            out.append(finding("agent_clock_offset", host=host, **offset))
        if agent.missing_s:
            gap = {"missing_s": len(agent.missing_s), "seconds": seconds_ranges(agent.missing_s)}
            out.append(finding("agent_gap", host=host, **gap))
    return out
