"""The run analysis: every derived figure of one run, as one model (summary.json) plus its tables."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from analysis.bootstrap import DEFAULT_N_BOOT
from analysis.capacity import DEFAULT_ERROR_BUDGET, CapacityResult, capacity, meets_slo, think_time_s
from analysis.decomposition import Decomposition, decompose
from analysis.health import HealthCheck, step_health, thresholds_from_scenario
from analysis.load import RunData, load_run
from analysis.quality import Finding, findings
from analysis.soak import SoakResult, is_soak, soak_trends
from analysis.steps import (
    OUTCOME_OK,
    PERCENTILE_METHOD,
    PreparedRequests,
    StepStats,
    prepare_requests,
    step_stats,
)
from analysis.telemetry import TelemetryIndex, TelemetryStats, telemetry_gaps
from embedperf.schema import CollectorStatus, GeneratorCpu, RunFolder


class StepReport(BaseModel):
    stats: StepStats
    telemetry: TelemetryStats
    decomposition: Decomposition | None
    health: list[HealthCheck]
    meets_slo: bool


class RunSummary(BaseModel):
    """Written to RUN_DIR/analysis/summary.json; the report renders from it."""

    run_id: str
    kind: str
    open_loop: bool
    complete: bool
    scenario: dict[str, Any]
    target_url: str
    label: str
    service_info: dict[str, Any] | None
    host: dict[str, Any]
    versions: dict[str, str]
    git: dict[str, Any]
    start_unix_s: float | None
    end_unix_s: float | None
    generator_cpu: GeneratorCpu
    collectors: list[CollectorStatus]
    slo_p99_ms: float | None
    error_budget: float
    slo_verdict: str  # "pass" | "partial" | "fail" | "none"
    percentile_method: str
    devices_in_run: int
    steps: list[StepReport]
    capacity: CapacityResult
    soak: SoakResult | None
    findings: list[Finding]
    dropped_rows: dict[str, int]
    warmup_trimmed_rows: int
    notes: list[str]


@dataclass
class RunAnalysis:
    """The summary plus the in-memory rows the figures need (never serialised)."""

    summary: RunSummary
    data: RunData
    prepared: PreparedRequests
    telemetry: TelemetryIndex


def _slo_from_manifest(slo: dict[str, Any]) -> tuple[float | None, float]:
    p99 = slo.get("p99_ms")
    budget = slo.get("error_budget")
    return (
        float(p99) if p99 is not None else None,
        float(budget) if budget is not None else DEFAULT_ERROR_BUDGET,
    )


def _slo_verdict(meeting: list[bool], slo_p99_ms: float | None) -> str:
    if slo_p99_ms is None or not meeting:
        return "none"
    if all(meeting):
        return "pass"
    return "partial" if any(meeting) else "fail"


def _devices_in_run(index: TelemetryIndex, service_info: dict[str, Any] | None) -> int:
    if index.devices:
        return len(index.devices)
    if service_info and isinstance(service_info.get("devices"), list):
        return max(len(service_info["devices"]), 1)
    return 1


def analyse(
    data: RunData,
    slo_p99_ms: float | None = None,
    error_budget: float | None = None,
    target_qps: float | None = None,
    headroom: float = 0.25,
    n_boot: int = DEFAULT_N_BOOT,
) -> RunAnalysis:
    manifest = data.manifest
    manifest_p99, manifest_budget = _slo_from_manifest(manifest.slo)
    slo_p99_ms = slo_p99_ms if slo_p99_ms is not None else manifest_p99
    error_budget = error_budget if error_budget is not None else manifest_budget
    open_loop = manifest.kind == "open_loop" or any(s.rate is not None for s in manifest.stages)
    prepared = prepare_requests(data.requests, manifest.stages)
    index = TelemetryIndex(data.telemetry)
    limits = thresholds_from_scenario(manifest.scenario)
    stages = sorted(manifest.stages, key=lambda s: s.index)
    stats = [step_stats(prepared, stage, open_loop, n_boot=n_boot) for stage in stages]
    steps: list[StepReport] = []
    for stage_stats in stats:
        rows = prepared.rows.iloc[prepared.slices[stage_stats.index]]
        ok_rows = rows[(rows["outcome"].to_numpy() == OUTCOME_OK) & ~rows["probe"].to_numpy()]
        tel = index.window_stats(stage_stats.steady_start_unix_s, stage_stats.steady_end_unix_s)
        steps.append(
            StepReport(
                stats=stage_stats,
                telemetry=tel,
                decomposition=decompose(ok_rows),
                health=step_health(stage_stats, tel, limits),
                meets_slo=meets_slo(stage_stats, slo_p99_ms, error_budget),
            )
        )
    devices = _devices_in_run(index, manifest.service_info)
    cap = capacity(
        stats,
        slo_p99_ms,
        error_budget,
        think_s=think_time_s(manifest.scenario),
        devices_in_run=devices,
        target_qps=target_qps,
        headroom=headroom,
    )
    run_t0, run_t1 = _run_window(data, stages)
    gaps = telemetry_gaps(data.telemetry, run_t0, run_t1)
    sources = set(data.telemetry["source"].astype(str).unique()) if len(data.telemetry) else set()
    run_seconds = (run_t1 - run_t0) if run_t0 is not None and run_t1 is not None else 0.0
    soak = None
    if is_soak(manifest) and len(prepared.rows):
        steady = prepared.rows[~prepared.rows["probe"].to_numpy()]
        rss_t, rss = index.service_rss_series()
        soak = soak_trends(steady, rss_t, rss)
    summary = RunSummary(
        run_id=manifest.run_id,
        kind=manifest.kind,
        open_loop=open_loop,
        complete=manifest.complete,
        scenario=manifest.scenario,
        target_url=manifest.target_url,
        label=manifest.label,
        service_info=manifest.service_info,
        host=manifest.host,
        versions=manifest.versions,
        git=manifest.git,
        start_unix_s=manifest.start_unix_s if manifest.start_unix_s is not None else run_t0,
        end_unix_s=manifest.end_unix_s if manifest.end_unix_s is not None else run_t1,
        generator_cpu=manifest.generator_cpu,
        collectors=manifest.collectors,
        slo_p99_ms=slo_p99_ms,
        error_budget=error_budget,
        slo_verdict=_slo_verdict([s.meets_slo for s in steps], slo_p99_ms),
        percentile_method=PERCENTILE_METHOD,
        devices_in_run=devices,
        steps=steps,
        capacity=cap,
        soak=soak,
        findings=findings(manifest, prepared, stats, gaps, run_seconds, sources, _generator_cpu(steps)),
        dropped_rows=prepared.dropped,
        warmup_trimmed_rows=sum(prepared.warmup_trimmed.values()),
        notes=manifest.notes,
    )
    return RunAnalysis(summary=summary, data=data, prepared=prepared, telemetry=index)


def _generator_cpu(steps: list[StepReport]) -> float | None:
    values = [
        s.telemetry.generator_cpu_mean_pct for s in steps if s.telemetry.generator_cpu_mean_pct is not None
    ]
    return float(np.mean(values)) if values else None


def _run_window(data: RunData, stages: list[Any]) -> tuple[float | None, float | None]:
    manifest = data.manifest
    t0 = (
        manifest.start_unix_s
        if manifest.start_unix_s is not None
        else (stages[0].start_unix_s if stages else None)
    )
    t1 = manifest.end_unix_s
    if t1 is None and len(data.requests):
        done = data.requests["t_done_unix_s"].to_numpy()
        t1 = float(np.nanmax(done)) if np.isfinite(done).any() else None
    return t0, t1


def analyse_folder(folder: RunFolder, slo_p99_ms: float | None = None, **kwargs: Any) -> RunAnalysis:
    return analyse(load_run(folder), slo_p99_ms=slo_p99_ms, **kwargs)


STEP_COLUMNS: tuple[str, ...] = (
    "index", "label", "users", "rate", "duration_s", "n_requests", "n_ok", "n_error", "n_timeout",
    "qps", "error_rate", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_ci_low_ms",
    "p99_ci_high_ms", "p999_ms", "max_ms", "device_util_mean_pct", "mem_bw_util_mean_pct",
    "temp_max_c", "power_mean_w", "generator_cpu_mean_pct", "meets_slo",
)  # fmt: skip


def step_row(step: StepReport) -> dict[str, Any]:
    s, lat, tel = step.stats, step.stats.latency, step.telemetry
    return {
        "index": s.index, "label": s.label, "users": s.users, "rate": s.rate, "duration_s": s.duration_s,
        "n_requests": s.n_requests, "n_ok": s.n_ok, "n_error": s.n_error, "n_timeout": s.n_timeout,
        "qps": s.qps, "error_rate": s.error_rate, "mean_ms": lat.mean_ms, "p50_ms": lat.p50_ms,
        "p90_ms": lat.p90_ms, "p95_ms": lat.p95_ms, "p99_ms": lat.p99_ms, "p99_ci_low_ms": s.p99_ci_ms[0],
        "p99_ci_high_ms": s.p99_ci_ms[1], "p999_ms": lat.p999_ms, "max_ms": lat.max_ms,
        "device_util_mean_pct": tel.device_util_mean_pct, "mem_bw_util_mean_pct": tel.mem_bw_util_mean_pct,
        "temp_max_c": tel.temp_max_c, "power_mean_w": tel.power_mean_w,
        "generator_cpu_mean_pct": tel.generator_cpu_mean_pct, "meets_slo": step.meets_slo,
    }  # fmt: skip


def write_analysis(folder: RunFolder, summary: RunSummary) -> Path:
    """RUN_DIR/analysis/{summary.json, steps.csv, decomposition.csv}; all rebuildable from the run."""
    out = folder.analysis
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2), encoding="utf-8")
    with (out / "steps.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(STEP_COLUMNS))
        writer.writeheader()
        for step in summary.steps:
            writer.writerow(step_row(step))
    with (out / "decomposition.csv").open("w", newline="", encoding="utf-8") as fh2:
        rows = csv.writer(fh2)
        rows.writerow(["index", "label", "component", "mean_ms", "pct"])
        for step in summary.steps:
            if step.decomposition is None:
                continue
            for name, value in step.decomposition.parts_ms.items():
                rows.writerow(
                    [step.stats.index, step.stats.label, name, value, step.decomposition.parts_pct[name]]
                )
    return out
