"""Layer 2, performance and utilisation: a capacity search at the SLO, the tail and the devices at its answer.

The search (`embedperf search`'s) starts at the target rate and stops at the target plus headroom: the
question is whether the deployment carries the target, not how far beyond. Tail and devices are read at
the answer's probe, throttling over the whole run.
"""

from __future__ import annotations

import math

from analysis.model.steps import LatencyStats
from analysis.run.summary import RunAnalysis, StepReport
from decisions.search.state import COUNT_MARGIN, SearchRecord, read_search
from embedperf.errors import RunFolderError
from scenarios.loader import load_scenario
from study.verify.load import LoadOptions, run_and_analyse, throttling_checks
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check, CheckStatus, LayerResult, at_least, at_most, judged

NO_DEVICE_NOTE = (
    "no serving-device telemetry (a CPU target, or pass --agent / --devices for the service host)"
)
UTILISATION = "serving-device utilisation"


def search_overrides(thresholds: VerifyThresholds) -> dict[str, str]:
    """The search's scenario fields: the SLO, the probe sizes, and a start and top that bracket the target."""
    scenario = load_scenario(thresholds.search_scenario)
    spec = scenario.search
    floor = COUNT_MARGIN * thresholds.search_min_ok_requests / (thresholds.search_max_probe_s - spec.warmup_s)
    wanted = thresholds.search_start_rate or thresholds.target_qps or spec.start_rate
    start = max(wanted, math.ceil(floor * 1.01))
    top = thresholds.search_max_rate or thresholds.capacity_needed_qps or spec.max_rate
    return {
        "search.enabled": "true",
        "slo.p99_ms": str(thresholds.slo_p99_ms),
        "slo.error_budget_pct": str(thresholds.error_budget_pct),
        "search.min_ok_requests": str(thresholds.search_min_ok_requests),
        "search.max_probe_s": str(thresholds.search_max_probe_s),
        "search.precision": str(thresholds.search_precision),
        "search.max_duration_s": str(thresholds.search_max_duration_s),
        "search.start_rate": f"{start:g}",
        "search.max_rate": f"{max(top, start):g}",
    }


def capacity_check(record: SearchRecord, thresholds: VerifyThresholds) -> Check:
    """The answer against the target: pass with headroom, warn without it, fail below the target."""
    answer, name = record.answer_rps, "capacity at the SLO"
    limit = f"P99 <= {record.slo_p99_ms:g} ms, errors <= {record.error_budget_pct:g}%"
    if answer is None:
        measured = f"no probed rate meets it ({record.status}: {record.note})"
        return Check(name=name, status="fail", measured=measured, limit=limit)
    measured = f"{answer:g} req/s ({record.status})"
    target, needed = thresholds.target_qps, thresholds.capacity_needed_qps
    if target is None or needed is None:
        note = "no --target-qps: the capacity is shown, not judged"
        return Check(name=name, status="warn", measured=measured, limit=limit, note=note)
    status: CheckStatus = "pass" if answer >= needed * (1 - 1e-9) else "warn" if answer >= target else "fail"
    note = {
        "pass": "",
        "warn": f"meets {target:g} req/s without the {thresholds.headroom_pct:g}% headroom",
        "fail": f"below the target {target:g} req/s",
    }[status]
    limit = f">= {needed:g} req/s (target {target:g} + {thresholds.headroom_pct:g}%) at {limit}"
    return Check(name=name, status=status, measured=measured, limit=limit, note=note)


def answer_step(record: SearchRecord, analysis: RunAnalysis) -> StepReport | None:
    """The step of the last passing probe at the answer (the confirming one when there is one)."""
    probes = [p for p in record.probes if p.rate == record.answer_rps and p.verdict == "pass"]
    if not probes:
        return None
    return next((s for s in analysis.summary.steps if s.stats.index == probes[-1].stage_index), None)


def _latency(step: StepReport) -> LatencyStats:
    """Open loop: latency from the intended send time, the figure the search judges."""
    open_loop = step.stats.open_loop
    return (
        open_loop.from_intended if open_loop is not None and open_loop.from_intended.n else step.stats.latency
    )


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _ratio(name: str, high_ms: float, low_ms: float, limit: float, over: CheckStatus) -> Check:
    """high / low against limit; `over` is the status above it."""
    ratio = high_ms / low_ms
    return at_most(name, ratio, limit, f"{ratio:.2f} ({high_ms:.1f} / {low_ms:.1f} ms)", over=over)


def tail_checks(step: StepReport, thresholds: VerifyThresholds) -> tuple[list[Check], dict[str, str]]:
    lat = _latency(step)
    figures = ("P50", lat.p50_ms), ("P95", lat.p95_ms), ("P99", lat.p99_ms), ("P99.9", lat.p999_ms)
    shown = " / ".join(f"{name} {_ms(value)}" for name, value in (*figures, ("max", lat.max_ms)))
    evidence = {"latency at the answer (ms)": f"{shown} over {lat.n} ok answers"}
    checks: list[Check] = []
    if lat.p50_ms and lat.p99_ms is not None:
        checks.append(_ratio("tail: P99 / P50", lat.p99_ms, lat.p50_ms, thresholds.max_p99_p50_ratio, "fail"))
    if lat.p999_ms is not None and lat.p99_ms:
        checks.append(
            _ratio("spikes: P99.9 / P99", lat.p999_ms, lat.p99_ms, thresholds.max_p999_p99_ratio, "warn")
        )
    else:
        evidence["P99.9"] = f"not judged: it needs 1,000 ok answers at the answer, the probe had {lat.n}"
    return checks, evidence


def device_checks(
    step: StepReport, analysis: RunAnalysis, thresholds: VerifyThresholds
) -> tuple[list[Check], dict[str, str]]:
    """Utilisation, memory bandwidth and memory at the answer; temperature over the whole run."""
    tel = step.telemetry
    busy_pct, power_w = tel.service_busy_mean_pct, tel.power_total_mean_w
    evidence = {
        "service busy at the answer": f"{busy_pct:.1f}%" if busy_pct is not None else "n/a",
        "power at the answer": f"{power_w:.0f} W (all serving devices)" if power_w else "n/a",
        "serving devices": ", ".join(analysis.summary.serving_devices) or "none known",
    }
    checks: list[Check] = []
    if tel.device_util_mean_pct is None:
        checks.append(Check(name=UTILISATION, status="warn", measured="not measured", note=NO_DEVICE_NOTE))
    elif thresholds.min_device_util_pct > 0:
        util, measured = tel.device_util_mean_pct, f"{tel.device_util_mean_pct:.1f}% mean at the answer"
        checks.append(at_least(UTILISATION, util, thresholds.min_device_util_pct, measured, "%"))
    if (bw := tel.mem_bw_util_mean_pct) is not None:
        limit, measured = thresholds.max_mem_bw_util_pct, f"{bw:.1f}% mean at the answer"
        checks.append(at_most("memory bandwidth", bw, limit, measured, "% (not saturated)"))
    for name, field, limit, unit in (
        ("device temperature", "temp_max_c", thresholds.max_temp_c, " C"),
        ("device memory", "mem_max_pct", thresholds.max_device_mem_pct, "%"),
    ):
        values = [v for s in analysis.summary.steps if (v := getattr(s.telemetry, field)) is not None]
        if values:
            checks.append(
                at_most(name, max(values), limit, f"{max(values):.0f}{unit} max over the search", unit)
            )
    return checks + throttling_checks(analysis.folder, thresholds), evidence


def run_perf_layer(host: str, thresholds: VerifyThresholds, options: LoadOptions) -> LayerResult:
    analysis = run_and_analyse(
        thresholds.search_scenario, host, options, "verify-search", search_overrides(thresholds),
        thresholds.search_max_duration_s,
    )
    if (record := read_search(analysis.manifest)) is None:
        raise RunFolderError(f"the search left no result in {analysis.folder.manifest}: it did not finish")
    evidence = {
        "search run": str(analysis.folder.root),
        "probes": "; ".join(
            f"{p.rate:g} req/s {p.verdict} ({p.reason})" if p.reason else f"{p.rate:g} req/s {p.verdict}"
            for p in record.probes
        ),  # fmt: skip
        "rule": record.rule,
    }
    checks = [capacity_check(record, thresholds)]
    if (step := answer_step(record, analysis)) is not None:
        tail, tail_evidence = tail_checks(step, thresholds)
        devices, device_evidence = device_checks(step, analysis, thresholds)
        checks += tail + devices
        evidence.update(tail_evidence | device_evidence)
    return judged(2, checks, evidence)
