"""Cells of the run report's per-step tables: shares capped at 100% (measured value kept), missing as n/a.

A busy share (device utilisation, the inference worker's busy fraction, a stage's share of latency) cannot
truly exceed 100%, yet a busy fraction summed over worker threads, or sampled over a window slightly shorter
than the step, can read 102%. Printed raw it reads as an over-loaded device; so a table shows 100% with a
mark, and the note under the table gives the measured value. Process CPU (generator, service) is a percentage
of one core, where 250% means two and a half cores: it is a real figure above 100 and is never capped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.figures.bottleneck import Bottleneck
from analysis.model.telemetry import TelemetryStats
from analysis.run.summary import RunSummary
from reports.render import MISSING as NA
from reports.render import num, pair

CAP_PCT = 100.0
CAPPED_MARK = "*"
# Evidence keys that are shares of a whole (capped); the others are process CPU in % of one core.
SHARE_KEYS: frozenset[str] = frozenset({
    "device_busy_pct", "host_cpu_pct", "queue_share_pct", "tokenise_share_pct", "compute_share_pct",
    "client_network_share_pct",
})  # fmt: skip


@dataclass(frozen=True)
class CappedShare:
    """A share shown as 100% in a table, with the value that was measured."""

    step: str
    what: str  # the catalogue key of the figure's name (ev_device_busy_pct, device_util, ...)
    measured_pct: float


@dataclass
class ShareCells:
    """Formats shares for one table and remembers which ones it capped, for the note below it."""

    capped: list[CappedShare] = field(default_factory=list)

    def cell(self, value_pct: float | None, step: str, what: str, unit: str = "", digits: int = 1) -> str:
        """The share as text (`unit` after the number, the mark after both), n/a when not measured."""
        if value_pct is None or value_pct != value_pct:
            return NA
        if value_pct > CAP_PCT:
            capped = CappedShare(step, what, round(float(value_pct), digits))
            if capped not in self.capped:  # a mean and a max of the same samples: said once
                self.capped.append(capped)
            return f"{CAP_PCT:.{digits}f}{unit}{CAPPED_MARK}"
        return num(value_pct, digits) + unit


@dataclass(frozen=True)
class BottleneckRow:
    step: str
    kind: str
    evidence: list[tuple[str, str]]  # (evidence key, "12.3%")


@dataclass(frozen=True)
class TelemetryRow:
    step: str
    device_util: str
    mem_bw: str
    temp_max: str
    power_mean: str
    power_total: str
    mem_used: str
    generator_cpu: str
    service_cpu: str
    service_busy: str


def bottleneck_rows(
    summary: RunSummary, bottlenecks: list[Bottleneck]
) -> tuple[list[BottleneckRow], list[CappedShare]]:
    """One row per step: the named limit and its evidence, shares capped (see the module doc)."""
    shares = ShareCells()
    rows = []
    for step, b in zip(summary.steps, bottlenecks, strict=True):
        label = step.stats.label
        evidence = [
            (key, shares.cell(value, label, f"ev_{key}", "%") if key in SHARE_KEYS else num(value, 1) + "%")
            for key, value in b.evidence.items()
        ]
        rows.append(BottleneckRow(step=label, kind=b.kind, evidence=evidence))
    return rows, shares.capped


def telemetry_rows(summary: RunSummary) -> tuple[list[TelemetryRow], list[CappedShare]]:
    """One row per step of device and process figures; utilisation and busy shares capped."""
    shares = ShareCells()
    rows = []
    for step in summary.steps:
        label = step.stats.label
        m: TelemetryStats = step.telemetry
        cpu = m.generator_cpu_mean_pct  # the load generator's; the run's own when the step has none
        rows.append(TelemetryRow(
            step=label,
            device_util=pair(
                shares.cell(m.device_util_mean_pct, label, "cap_device_util"),
                shares.cell(m.device_util_max_pct, label, "cap_device_util"),
            ),
            mem_bw=shares.cell(m.mem_bw_util_mean_pct, label, "cap_mem_bw"), temp_max=num(m.temp_max_c, 1),
            power_mean=num(m.power_mean_w, 1), power_total=num(m.power_total_mean_w, 1),
            mem_used=pair(num(m.mem_used_max_mb, 0), num(m.mem_max_pct, 1), "%"),
            generator_cpu=num(summary.generator_cpu.mean_pct if cpu is None else cpu, 1),
            service_cpu=num(m.service_cpu_mean_pct, 1),
            service_busy=pair(
                shares.cell(m.service_busy_mean_pct, label, "cap_service_busy"),
                shares.cell(m.service_busy_max_pct, label, "cap_service_busy"),
            ),
        ))  # fmt: skip
    return rows, shares.capped
