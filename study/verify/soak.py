"""Layer 3, stability: a soak at constant load, judged window by window, and what the service counted meanwhile.

The soak is a closed-loop scenario's payload at fixed users in equal windows (one step each), so drift is
the last window against the first at any length. The target's /metrics counters and /info (a restart) are
read before and after; runs of ten minutes or more also carry the analysis' per-minute trends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from analysis.run.summary import RunAnalysis, StepReport
from embedperf.errors import ConfigError
from embedperf.files import write_atomically
from scenarios.loader import load_scenario
from study.verify.load import LoadOptions, run_and_analyse, throttling_checks
from study.verify.target import (
    DEVICE_ERRORS,
    FALLBACK,
    OOM_SPLITS,
    SERVED,
    InfoSnapshot,
    MetricsSnapshot,
    TargetClient,
)
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import Check, LayerResult, at_most, judged

SOAK_FILE = "verify-soak.yaml"
FALLBACK_SHARE = "fallback share"
NO_COUNTS_NOTE = "no X-Served-Model, no counters"
NO_RSS_NOTE = "the service process is not on this host (or --no-collectors): its memory was not sampled"


def write_soak_scenario(thresholds: VerifyThresholds, out_dir: Path) -> Path:
    """The soak as a scenario file: the chosen scenario's payload, soak_windows equal steps at fixed users."""
    base = load_scenario(thresholds.soak_scenario)
    if base.is_open_loop:
        raise ConfigError(
            f"soak_scenario {thresholds.soak_scenario!r} is open loop; the soak holds users: pick a closed-loop "
            "scenario such as soak"
        )
    users = thresholds.soak_users or base.steps[0].users
    raw: dict[str, Any] = base.model_dump(mode="json", exclude={"profiles", "profile", "steps"})
    raw["kind"] = "soak"
    raw["description"] = f"embedperf verify soak: {users} users for {thresholds.soak_s:g} s"
    raw["steps"] = [
        {
            "label": f"w{i + 1}",
            "users": users,
            "duration_s": thresholds.soak_window_s,
            "warmup_s": thresholds.soak_warmup_s if i == 0 else 0.0,
        }
        for i in range(thresholds.soak_windows)
    ]
    path = out_dir / SOAK_FILE
    write_atomically(path, yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    load_scenario(str(path))  # refuses here, before any load, what the run would refuse
    return path


def error_check(steps: list[StepReport], thresholds: VerifyThresholds) -> Check:
    failed = sum(s.stats.n_error + s.stats.n_timeout for s in steps)
    counted = sum(s.stats.n_ok for s in steps) + failed
    rate_pct = 100.0 * failed / counted if counted else 0.0
    return Check(
        name="error rate",
        status="pass" if counted and rate_pct <= thresholds.error_budget_pct else "fail",
        measured=f"{rate_pct:.3f}% ({failed} of {counted} requests)" if counted else "no requests answered",
        limit=f"<= {thresholds.error_budget_pct:g}%",
    )


def drift_check(steps: list[StepReport], analysis: RunAnalysis, thresholds: VerifyThresholds) -> Check:
    """Last window's P99 against the first's; a per-minute P99 slope flagged by the run analysis fails too."""
    first, last = steps[0].stats.latency.p99_ms, steps[-1].stats.latency.p99_ms
    if not first or last is None:
        return Check(name="latency drift", status="fail", measured="a window without ok answers")
    ratio = last / first
    trend = analysis.summary.soak_minutes
    sloped = trend is not None and trend.latency_drift
    note = f"the per-minute P99 rises {trend.p99_slope_ms_per_h:.1f} ms/h" if sloped and trend else ""
    return Check(
        name="latency drift",
        status="fail" if ratio > thresholds.max_p99_drift_ratio or sloped else "pass",
        measured=f"P99 {first:.1f} -> {last:.1f} ms (x{ratio:.2f}, first to last window)",
        limit=f"<= x{thresholds.max_p99_drift_ratio:g}",
        note=note,
    )


def memory_check(steps: list[StepReport], analysis: RunAnalysis, thresholds: VerifyThresholds) -> Check:
    first, last = steps[0].telemetry.service_rss_max_mb, steps[-1].telemetry.service_rss_max_mb
    if not first or last is None:
        return Check(name="service memory growth", status="warn", measured="not measured", note=NO_RSS_NOTE)
    growth_pct = (last / first - 1.0) * 100.0
    trend = analysis.summary.soak_minutes
    leaking = trend is not None and trend.memory_growth
    return Check(
        name="service memory growth",
        status="fail" if growth_pct > thresholds.max_memory_growth_pct or leaking else "pass",
        measured=f"RSS {first:.0f} -> {last:.0f} MB ({growth_pct:+.1f}%, first to last window)",
        limit=f"<= +{thresholds.max_memory_growth_pct:g}%",
        note=f"the per-minute RSS rises {trend.rss_slope_mb_per_h:.1f} MB/h" if leaking and trend else "",
    )


def restart_check(at_start: InfoSnapshot, after: InfoSnapshot, thresholds: VerifyThresholds) -> Check:
    if (same := at_start.same_process(after)) is None:
        return Check(
            name="restarts", status="warn", measured="not checked", note="/info names no pid or start time"
        )
    measured = "none (same pid and start time as when verify began)"
    if not same:
        measured = f"restarted: pid {at_start.pid} -> {after.pid}, "
        measured += f"started {at_start.started_unix_s} -> {after.started_unix_s}"
    return at_most("restarts", 0 if same else 1, thresholds.max_restarts, measured)


def counter_checks(
    before: MetricsSnapshot | None, after: MetricsSnapshot | None, thresholds: VerifyThresholds
) -> list[Check]:
    """Out-of-memory splits and device errors counted by the target during the soak."""
    checks: list[Check] = []
    for name, counter, limit in (
        ("out-of-memory splits", OOM_SPLITS, thresholds.max_oom_splits),
        ("device errors", DEVICE_ERRORS, thresholds.max_device_errors),
    ):
        grown = before.increase(after, counter) if before is not None and after is not None else None
        if grown is None:
            note = f"the target's /metrics has no {counter}"
            checks.append(Check(name=name, status="warn", measured="not counted", note=note))
        else:
            checks.append(at_most(name, grown, limit, f"{grown:.0f} during the soak"))
    return checks


def fallback_check(
    steps: list[StepReport],
    info: InfoSnapshot,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
    thresholds: VerifyThresholds,
) -> Check:
    """The share of answers a fallback model served: from the answers' X-Served-Model, else the counters."""
    named = sum(sum(s.stats.served_models.values()) for s in steps)
    if info.fallback_model is None:
        return Check(
            name=FALLBACK_SHARE, status="pass", measured="0% (the target declares no fallback model)"
        )
    if named:
        served = sum(s.stats.served_models.get(info.fallback_model, 0) for s in steps)
        share, source = 100.0 * served / named, f"{served} of {named} answers named {info.fallback_model}"
    else:
        fell = before.increase(after, FALLBACK) if before and after else None
        total = before.increase(after, SERVED) if before and after else None
        if fell is None or not total:
            return Check(name=FALLBACK_SHARE, status="warn", measured="not measured", note=NO_COUNTS_NOTE)
        share, source = 100.0 * fell / total, f"{fell:.0f} of {total:.0f} answers (/metrics)"
    return at_most(FALLBACK_SHARE, share, thresholds.max_fallback_share_pct, f"{share:.2f}% ({source})", "%")


def run_soak_layer(
    client: TargetClient,
    at_start: InfoSnapshot,
    thresholds: VerifyThresholds,
    options: LoadOptions,
    out_dir: Path,
) -> LayerResult:
    scenario = write_soak_scenario(thresholds, out_dir)
    before = client.metrics(thresholds.metrics_path)
    analysis = run_and_analyse(str(scenario), client.base_url, options, "verify-soak", {}, thresholds.soak_s)
    after_info = client.info(thresholds.info_path)
    after = client.metrics(thresholds.metrics_path)
    steps = sorted(analysis.summary.steps, key=lambda s: s.stats.index)
    if len(steps) < 2:
        return judged(
            3, [Check(name="soak windows", status="fail", measured=f"{len(steps)} window(s) with answers")]
        )
    checks = [
        error_check(steps, thresholds),
        drift_check(steps, analysis, thresholds),
        memory_check(steps, analysis, thresholds),
        restart_check(at_start, after_info, thresholds),
        *counter_checks(before, after, thresholds),
        fallback_check(steps, after_info, before, after, thresholds),
        *throttling_checks(analysis.folder, thresholds),
    ]
    evidence = {
        "soak run": str(analysis.folder.root),
        "soak": f"{len(steps)} windows of {thresholds.soak_window_s:g} s",
        "P99 per window (ms)": ", ".join(
            f"{s.stats.latency.p99_ms:.1f}" if s.stats.latency.p99_ms else "n/a" for s in steps
        ),
    }
    return judged(3, checks, evidence)
