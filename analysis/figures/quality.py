"""Data-quality findings, said plainly: saturation, lateness, telemetry gaps, dropped rows, incompleteness."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from analysis.model.steps import StepStats
from embedperf.schema import Manifest

TELEMETRY_GAP_WARN_FRACTION = 0.05
LATE_WARN_FRACTION = 0.01


class Finding(BaseModel):
    """One finding; `code` selects the sentence in reports/i18n.py, `params` fill it."""

    code: str
    severity: str  # "warn" | "info"
    params: dict[str, Any] = {}


def finding(code: str, severity: str = "warn", /, **params: Any) -> Finding:
    """A Finding whose params are the keyword arguments."""
    return Finding(code=code, severity=severity, params=params)


def findings(
    manifest: Manifest, dropped: dict[str, int], steps: list[StepStats], gaps: dict[str, int],
    run_seconds: float, telemetry_sources: set[str], generator_cpu_mean_pct: float | None = None,
) -> list[Finding]:  # fmt: skip
    """generator_cpu_mean_pct: from proc:generator telemetry when the manifest has no summary."""
    out: list[Finding] = []
    if not manifest.complete:
        out.append(finding("incomplete_run"))
    gen = manifest.generator_cpu
    if gen.saturated:
        out.append(finding("generator_saturated", max_pct=gen.max_pct, threshold_pct=gen.threshold_pct))
    mean_pct = gen.mean_pct if gen.mean_pct is not None else generator_cpu_mean_pct
    out.append(finding("shared_host", "info", mean_pct=mean_pct))
    for step in steps:
        ol = step.open_loop
        if ol is not None and step.n_requests and ol.n_late / step.n_requests > LATE_WARN_FRACTION:
            late = {"late": ol.n_late, "n": step.n_requests, "dropped": ol.n_dropped}
            out.append(finding("open_loop_late", step=step.label, **late))
        out += [finding(warning, step=step.label, n=step.n_ok) for warning in step.warnings]
    failing = [c for c in manifest.collectors if c.status != "ok"]
    out += [finding("collector_not_ok", name=c.name, status=c.status, reason=c.reason) for c in failing]
    if not telemetry_sources:
        out.append(finding("no_telemetry"))
    for source, missing in sorted(gaps.items()):
        if run_seconds > 0 and missing / run_seconds > TELEMETRY_GAP_WARN_FRACTION:
            out.append(finding("telemetry_gap", source=source, missing_s=missing))
    return out + [finding(f"dropped_{reason}", n=count) for reason, count in dropped.items() if count]
