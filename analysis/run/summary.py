"""The run analysis: every derived figure of one run, as one model (summary.json) plus its tables."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from analysis.engine.figures import ReportFigures
from analysis.engine.minute_series import SoakFindings
from analysis.figures.bootstrap import DEFAULT_N_BOOT
from analysis.figures.capacity import CapacityResult, capacity, meets_slo
from analysis.figures.cost import RunCost, cost_notes, plan_cost, step_cost
from analysis.figures.devices import DeviceRow, ServingResult, deployment_findings, serving_devices
from analysis.figures.health import HealthCheck, step_health
from analysis.figures.quality import Finding, findings
from analysis.figures.soak import is_soak, soak_result
from analysis.model.decomposition import Decomposition
from analysis.model.outage import OutageWindow
from analysis.model.row_figures import RequestTotals, RowFigures
from analysis.model.slowest import SlowRequest
from analysis.model.soak import SoakResult
from analysis.model.steps import PERCENTILE_METHOD, LatencyStats, StepStats
from analysis.model.telemetry import TelemetryIndex, TelemetryStats
from decisions.search.state import SearchSummary, search_summary
from embedperf.schema import (
    CollectorStatus,
    GeneratorCpu,
    HostInfo,
    Manifest,
    RunFolder,
    ServiceInfo,
    StepEnding,
)
from embedperf.verdicts import CapacityVerdict
from scenarios.cost_models import Cost, device_kind
from scenarios.models import Scenario

__all__ = ["RequestTotals", "RunAnalysis", "RunSummary", "write_analysis"]


class StepReport(BaseModel):
    stats: StepStats
    telemetry: TelemetryStats
    decomposition: Decomposition | None
    health: list[HealthCheck]
    meets_slo: bool
    ending: StepEnding | None = None  # adaptive steps (steps.until): why it ended, from the manifest

    @property
    def unconverged(self) -> bool:
        """An adaptive step that reached its longest time before its P99 interval was narrow enough."""
        return self.ending is not None and not self.ending.converged


class RunSummary(BaseModel):
    """Written to RUN_DIR/analysis/summary.json; the report renders from it."""

    run_id: str
    kind: str
    open_loop: bool
    complete: bool
    scenario: Scenario
    target_url: str
    label: str
    service_info: ServiceInfo | None
    host: HostInfo
    versions: dict[str, str]
    git: dict[str, Any]
    start_unix_s: float | None
    end_unix_s: float | None
    generator_cpu: GeneratorCpu
    collectors: list[CollectorStatus]
    slo_p99_ms: float | None
    error_budget: float
    slo_verdict: str  # a CapacityVerdict; "none" in summaries written before the vocabulary
    percentile_method: str
    devices_in_run: int
    steps: list[StepReport]
    capacity: CapacityResult
    soak: SoakResult | None
    findings: list[Finding]
    dropped_rows: dict[str, int]
    warmup_trimmed_rows: int
    notes: list[str]
    totals: RequestTotals = RequestTotals()
    outage_windows: list[OutageWindow] = []
    connection_backoffs: dict[str, int] | None = None  # per stage index, from the manifest
    serving_rule: str = "none"  # explicit | service_info | busy | none (see analysis.figures.devices)
    serving_devices: list[str] = []
    device_table: list[DeviceRow] = []
    # runs of 10 minutes or more: drift, memory growth and thermal throttling from per-minute series
    soak_minutes: SoakFindings | None = None
    search: SearchSummary | None = None  # the capacity search's answer (decisions.search.state), for search runs
    slowest_requests: list[SlowRequest] = []  # the steady state's slowest ok requests, with their IDs
    cost: RunCost | None = None  # the scenario's or the command's prices applied; None: no prices


# RunSummary's fields that are the manifest's own, copied as they are
FROM_MANIFEST: tuple[str, ...] = (
    "run_id", "kind", "complete", "scenario", "target_url", "label", "service_info", "host", "versions",
    "git", "generator_cpu", "collectors", "notes",
)  # fmt: skip


@dataclass
class RunAnalysis:
    """The summary plus what the figures draw (aggregates, never the request rows; never serialised)."""

    summary: RunSummary
    manifest: Manifest
    folder: RunFolder
    telemetry: TelemetryIndex
    figures: ReportFigures


@dataclass(frozen=True)
class Settings:
    """The analysis options every entry point takes (SLO and plan overrides, bootstrap size)."""

    slo_p99_ms: float | None = None
    error_budget: float | None = None
    target_qps: float | None = None
    headroom: float = 0.25
    n_boot: int = DEFAULT_N_BOOT
    cost: Cost | None = None  # prices laid over the scenario's cost block (scenarios.cost_models)


def _backoffs(manifest: Manifest) -> dict[str, int] | None:
    raw = getattr(manifest, "connection_backoffs", None)
    if not isinstance(raw, dict):
        return None
    return {str(k): int(v) for k, v in raw.items() if isinstance(v, int | float)}


def _slo_verdict(meeting: list[bool], slo_p99_ms: float | None) -> CapacityVerdict:
    """No SLO given or no step to judge: no verdict, which is not a pass."""
    if slo_p99_ms is None or not meeting:
        return "no_verdict"
    return "pass" if all(meeting) else "partial" if any(meeting) else "fail"


def _serving(manifest: Manifest, index: TelemetryIndex, stats: list[StepStats]) -> ServingResult:
    windows = [(s.steady_start_unix_s, s.steady_end_unix_s) for s in stats]
    starts = [s.start_unix_s for s in manifest.stages]
    ends = [s.end_unix_s or s.start_unix_s for s in manifest.stages]
    span = (min(starts), max(ends)) if starts else None
    result = serving_devices(index.all_accelerator, manifest.serving_devices, windows, span)
    if result.rule != "none":
        index.serve(result.devices)
    return result


def is_open_loop(manifest: Manifest) -> bool:
    return manifest.kind == "open_loop" or any(s.rate is not None for s in manifest.stages)


def run_window(manifest: Manifest, t_done_max_unix_s: float | None) -> tuple[float | None, float | None]:
    first = min(manifest.stages, key=lambda s: s.index, default=None)
    t0 = manifest.start_unix_s if manifest.start_unix_s is not None else first.start_unix_s if first else None
    return t0, manifest.end_unix_s if manifest.end_unix_s is not None else t_done_max_unix_s


def summarise(
    manifest: Manifest, rows: RowFigures, index: TelemetryIndex, gaps: dict[str, int], sources: set[str],
    settings: Settings = Settings(),
) -> tuple[RunSummary, ServingResult]:  # fmt: skip
    """The summary from the row figures and the telemetry, however each was read."""
    slo = manifest.slo
    slo_p99_ms = settings.slo_p99_ms if settings.slo_p99_ms is not None else slo.p99_ms
    # the scenario's error budget is a percentage, the summary's a fraction
    error_budget = slo.error_budget_pct / 100.0 if settings.error_budget is None else settings.error_budget
    stats = rows.stats
    serving = _serving(manifest, index, stats)
    endings = {stage.index: stage.ending for stage in manifest.stages}
    tels = [index.window_stats(step.steady_start_unix_s, step.steady_end_unix_s) for step in stats]
    steps = [
        StepReport(
            stats=step, telemetry=tel, decomposition=rows.decomposition.get(step.index),
            health=step_health(step, tel, manifest.health), ending=endings.get(step.index),
            meets_slo=meets_slo(step, slo_p99_ms, error_budget),
        )
        for step, tel in zip(stats, tels, strict=True)
    ]  # fmt: skip
    # serving devices: those in the telemetry, else the indices the run was told (no device telemetry)
    devices = len(index.devices) if index.devices else max(len(serving.indices), 1)
    cap = capacity(
        stats, slo_p99_ms, error_budget,
        think_s=0.0,  # users send back to back (loadgen.wiring.users); no scenario has think time
        devices_in_run=devices, target_qps=settings.target_qps, headroom=settings.headroom,
        generator_cpu_pct={s.stats.index: s.telemetry.generator_cpu_mean_pct for s in steps},
    )  # fmt: skip
    run_t0, run_t1 = run_window(manifest, rows.t_done_max_unix_s)
    run_seconds = (run_t1 - run_t0) if run_t0 is not None and run_t1 is not None else 0.0
    known_cpu = [c for c in (s.telemetry.generator_cpu_mean_pct for s in steps) if c is not None]
    generator_cpu_pct = float(np.mean(known_cpu)) if known_cpu else None
    soak = None
    if is_soak(manifest) and rows.soak is not None:
        rss_t, rss = index.service_rss_series()
        soak = soak_result(rows.soak, rss_t, rss)
    summary = RunSummary(
        **{name: getattr(manifest, name) for name in FROM_MANIFEST},
        open_loop=is_open_loop(manifest), start_unix_s=run_t0, end_unix_s=run_t1,
        slo_p99_ms=slo_p99_ms, error_budget=error_budget,
        slo_verdict=_slo_verdict([s.meets_slo for s in steps], slo_p99_ms),
        percentile_method=PERCENTILE_METHOD, devices_in_run=devices, steps=steps, capacity=cap, soak=soak,
        findings=[
            *findings(manifest, rows.dropped, stats, gaps, run_seconds, sources, generator_cpu_pct),
            *deployment_findings(serving, manifest.agents),
        ],
        dropped_rows=rows.dropped, warmup_trimmed_rows=sum(rows.warmup_trimmed.values()), totals=rows.totals,
        outage_windows=rows.outage_windows, connection_backoffs=_backoffs(manifest),
        serving_rule=serving.rule, serving_devices=serving.devices, device_table=serving.table,
        search=search_summary(manifest), slowest_requests=rows.slowest,
    )  # fmt: skip
    summary.capacity.unconverged_steps = [s.stats.index for s in steps if s.unconverged]
    summary.cost = run_cost(summary, rows, settings)
    return summary, serving


def run_cost(summary: RunSummary, rows: RowFigures, settings: Settings) -> RunCost | None:
    """Every step's cost and the plan's (analysis.figures.cost), or None when no price is given."""
    recorded = summary.scenario.cost
    prices = settings.cost.over(recorded) if settings.cost is not None else recorded
    if prices is None or not prices.priced:
        return None
    given = (("scenario", recorded is not None), ("options", settings.cost is not None))
    info = summary.service_info
    kind = device_kind(
        summary.serving_devices, [d.kind for d in info.devices] if info else [], info.device if info else None
    )
    devices = summary.devices_in_run
    per_step = ((s, rows.embeddings.get(s.stats.index, float(s.stats.n_ok))) for s in summary.steps)
    steps = [step_cost(s.stats, s.telemetry, n, prices, kind, devices) for s, n in per_step]
    # the plan the analysis made (--target-qps), else one for the scenario's slo.target_qps
    plan, target = summary.capacity.plan, summary.scenario.slo.target_qps
    if plan is None and target is not None:
        plan = summary.capacity.plan_for(summary.devices_in_run, target, settings.headroom)
    at = next((s for s in summary.steps if s.stats.index == summary.capacity.max_step_index), None)
    at_capacity = (at.stats, at.telemetry) if at else None
    return RunCost(
        prices=prices, source="+".join(name for name, yes in given if yes), device_kind=kind, devices=devices,
        steps=steps,
        plan=plan_cost(plan, prices, kind, at_capacity, summary.capacity.uncertain) if plan else None,
        notes=cost_notes(prices, kind, steps, [s.telemetry for s in summary.steps]),
    )  # fmt: skip


STEP_COLUMNS: tuple[str, ...] = (
    "index", "label", "users", "rate", "duration_s", "n_requests", "n_ok", "n_error", "n_timeout", "qps",
    "error_rate", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p99_ci_low_ms", "p99_ci_high_ms",
    "p99_dependence", "p999_ms", "max_ms", "device_util_mean_pct", "mem_bw_util_mean_pct", "temp_max_c", "power_mean_w",
    "generator_cpu_mean_pct", "meets_slo", "goodput_qps", "offered_qps", "errors_by_kind", "fallback_share",
    "unavailable_s", "tokens_per_s", "documents_per_s",
)  # fmt: skip
# qps is goodput (successful requests per second); offered_qps counts failed requests too.
# Only a run with prices (summary.cost) has these: no price, no cost column.
COST_COLUMNS: tuple[str, ...] = ("cost_per_hour", "cost_per_1m_embeddings", "cost_per_1m_tokens", "currency")


def step_row(step: StepReport) -> dict[str, Any]:
    """A steps.csv row: past the derived columns, the field of the column's name of the step's latency,
    telemetry or stats."""
    s = step.stats
    row = {
        "p99_ci_low_ms": s.p99_ci_ms[0], "p99_ci_high_ms": s.p99_ci_ms[1], "meets_slo": step.meets_slo,
        "errors_by_kind": ";".join(f"{kind}:{n}" for kind, n in s.errors_by_kind.items()),
    }  # fmt: skip
    owner: dict[str, BaseModel] = dict.fromkeys(LatencyStats.model_fields, s.latency)
    owner |= dict.fromkeys(TelemetryStats.model_fields, step.telemetry)
    return row | {c: getattr(owner.get(c, s), c) for c in STEP_COLUMNS if c not in row}


def cost_row(summary: RunSummary, index: int) -> dict[str, Any]:
    cost = summary.cost
    step = cost.step(index) if cost is not None else None
    if cost is None or step is None:
        return {}
    return {"cost_per_hour": step.hourly, "cost_per_1m_embeddings": step.per_1m_embeddings,
            "cost_per_1m_tokens": step.per_1m_tokens, "currency": cost.prices.currency}


def write_analysis(folder: RunFolder, summary: RunSummary) -> Path:
    """RUN_DIR/analysis/{summary.json, steps.csv, decomposition.csv}; all rebuildable from the run."""
    out = folder.analysis
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2), encoding="utf-8")
    with (out / "steps.csv").open("w", newline="", encoding="utf-8") as fh:
        columns = [*STEP_COLUMNS, *(COST_COLUMNS if summary.cost is not None else ())]
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for step in summary.steps:
            writer.writerow(step_row(step) | cost_row(summary, step.stats.index))
    with (out / "decomposition.csv").open("w", newline="", encoding="utf-8") as fh2:
        rows = csv.writer(fh2)
        rows.writerow(["index", "label", "component", "mean_ms", "pct"])
        for step in summary.steps:
            dec, s = step.decomposition, step.stats
            if dec is not None:
                parts = dec.parts_ms.items()
                rows.writerows([s.index, s.label, name, ms, dec.parts_pct[name]] for name, ms in parts)
    return out
