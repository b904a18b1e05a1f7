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


def findings(
    manifest: Manifest,
    dropped: dict[str, int],
    steps: list[StepStats],
    gaps: dict[str, int],
    run_seconds: float,
    telemetry_sources: set[str],
    generator_cpu_mean_pct: float | None = None,
) -> list[Finding]:
    """generator_cpu_mean_pct: from proc:generator telemetry when the manifest has no summary."""
    out: list[Finding] = []
    if not manifest.complete:
        out.append(Finding(code="incomplete_run", severity="warn"))
    gen = manifest.generator_cpu
    if gen.saturated:
        out.append(
            Finding(
                code="generator_saturated",
                severity="warn",
                params={"max_pct": gen.max_pct, "threshold_pct": gen.threshold_pct},
            )
        )
    mean_pct = gen.mean_pct if gen.mean_pct is not None else generator_cpu_mean_pct
    out.append(Finding(code="shared_host", severity="info", params={"mean_pct": mean_pct}))
    for step in steps:
        ol = step.open_loop
        if ol is not None and step.n_requests and ol.n_late / step.n_requests > LATE_WARN_FRACTION:
            out.append(
                Finding(
                    code="open_loop_late",
                    severity="warn",
                    params={
                        "step": step.label,
                        "late": ol.n_late,
                        "n": step.n_requests,
                        "dropped": ol.n_dropped,
                    },
                )
            )
        for warning in step.warnings:
            out.append(Finding(code=warning, severity="warn", params={"step": step.label, "n": step.n_ok}))
    for collector in manifest.collectors:
        if collector.status != "ok":
            out.append(
                Finding(
                    code="collector_not_ok",
                    severity="warn",
                    params={"name": collector.name, "status": collector.status, "reason": collector.reason},
                )
            )
    if not telemetry_sources:
        out.append(Finding(code="no_telemetry", severity="warn"))
    for source, missing in sorted(gaps.items()):
        if run_seconds > 0 and missing / run_seconds > TELEMETRY_GAP_WARN_FRACTION:
            out.append(
                Finding(
                    code="telemetry_gap", severity="warn", params={"source": source, "missing_s": missing}
                )
            )
    for reason, count in dropped.items():
        if count:
            out.append(Finding(code=f"dropped_{reason}", severity="warn", params={"n": count}))
    return out
