"""`embedperf capacity`: print the capacity plan of a run (max QPS under an SLO, knee, devices for a target).

Exit 0 when some step meets the SLO (the plan), 1 when none does or the run has no successful request
(the SLO failed: one line says why), 2 on a usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.figures.capacity import (
    DEFAULT_HEADROOM,
    KNEE_MAX_QPS_GAIN,
    KNEE_MIN_P99_RISE,
    LITTLE_MISMATCH,
    DevicePlan,
    device_plan,
    higher_load_override,
    little_cause_text,
    within_error_budget,
)
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunSummary
from decisions.search.state import devices_serving, headline, read_search
from embedperf.options import add_shared_option
from embedperf.schema import Manifest, resolve_run_folder
from scenarios.cost_options import add_cost_options, cost_from_options


def plan_lines(manifest: Manifest, target_qps: float | None, headroom: float) -> list[str]:
    """`embedperf capacity` on a search run: the searched answer, and devices for a target from it."""
    record = read_search(manifest)
    if record is None:
        return []
    devices = devices_serving(manifest)
    lines = [f"  capacity search: {headline(record, devices)}"]
    if target_qps is not None and record.answer_rps is not None:
        plan = device_plan(record.answer_rps, devices, target_qps, headroom)
        lines.append(f"  from the searched answer, {_plan_text(plan)}")
    return lines


def _plan_text(plan: DevicePlan) -> str:
    """'for T QPS with H headroom: R replica(s) x D device(s) = N device(s)', "at most" where it is."""
    most = "at most " if plan.devices_upper_bound else ""
    return (
        f"for {plan.target_qps:g} QPS with {plan.headroom:.0%} headroom: {most}{plan.replicas} replica(s) x "
        f"{plan.devices_per_replica} device(s) = {most}{plan.devices} device(s)"
    )


def no_success_line(summary: RunSummary) -> str | None:
    """One line for a run without a single successful request (nothing to plan from), else None."""
    totals = summary.totals
    if totals.n_ok > 0:
        return None
    if totals.n_requests == 0:
        return f"no requests were recorded in {summary.run_id}; see the Locust output and manifest notes"
    common = totals.most_common_error or "unknown"
    return (
        f"no successful requests: {totals.n_failed} of {totals.n_requests} failed, most common error: "
        f"{common} ({totals.errors_by_kind.get(common, 0)}); the target was down or refused the requests, "
        "so there is no capacity to plan from"
    )


def lower_bound_lines(summary: RunSummary) -> list[str]:
    """The capacity of a load that never reached the limit: "at least", why, and how to find the limit."""
    cap = summary.capacity
    top = next((s.stats for s in summary.steps if s.stats.index == cap.highest_step_index), None)
    where = (f"its highest load, step {top.label}, still" if top else "its highest load") + " meets the SLO"
    load = "the ramp" if summary.search is None else "the search"
    lines = [
        f"  highest QPS meeting the SLO: at least {cap.max_qps_meeting_slo:.1f} "
        f"(load {cap.max_load_meeting_slo:g}; {load} never reached the limit: no knee, and {where})"
    ]
    if top is not None and summary.search is None:
        lines.append(
            f"    for the limit: rerun with more load (e.g. --set {higher_load_override(top)}) "
            "or run `embedperf search`"
        )
    else:
        lines.append("    for the limit: search again with a higher --max-rate")
    return lines


def no_step_meets_line(summary: RunSummary) -> str | None:
    """One line when steps succeeded but none met the SLO (exit 1), naming why the lightest step failed."""
    cap = summary.capacity
    if cap.max_qps_meeting_slo is not None or summary.totals.n_ok == 0:
        return None
    head = f"no step meets the SLO ({_slo_text(summary)})"
    measured = [s.stats for s in summary.steps if s.stats.n_requests > 0]
    lowest = min(measured, key=lambda s: s.load) if measured else None
    if lowest is None:
        return f"{head}: no step has requests"
    if not within_error_budget(lowest, cap.error_budget):
        rate = f"{lowest.error_rate:.3%}" if lowest.error_rate is not None else "unknown"
        why = f"its error rate {rate} is over the budget; see the errors by kind in the report"
    else:
        why = f"its P99 {lowest.latency.p99_ms or 0.0:.1f} ms is over the SLO; pass a looser --slo-p99-ms"
    return (
        f"{head}: capacity under this SLO is below the lowest tested load, step {lowest.label} "
        f"(load {lowest.load:g}): {why}, or rerun with a lighter first step"
    )


def _slo_text(summary: RunSummary) -> str:
    cap = summary.capacity
    slo = f"P99 <= {cap.slo_p99_ms:g} ms" if cap.slo_p99_ms is not None else "no latency SLO"
    return f"{slo}, error rate <= {cap.error_budget:.3%}"


def format_plan(summary: RunSummary) -> str:
    cap = summary.capacity
    lines = [f"capacity plan for {summary.run_id}", f"  SLO: {_slo_text(summary)}"]
    lines.append("  step            load  goodput  offered    P99 ms   errors    meets SLO")
    for step in summary.steps:
        s = step.stats
        p99 = f"{s.latency.p99_ms:9.1f}" if s.latency.p99_ms is not None else "        -"
        err = f"{s.error_rate:8.3%}" if s.error_rate is not None else "       -"
        lines.append(
            f"  {s.label:<12} {s.load:7g} {s.goodput_qps:8.1f} {s.offered_qps:8.1f} {p99} {err}    "
            f"{'yes' if step.meets_slo else 'no'}"
        )
    lines.append("  (goodput: successful requests/s; offered: all requests/s, failed ones included)")
    if cap.max_qps_meeting_slo is not None and cap.lower_bound:
        lines += lower_bound_lines(summary)
    elif cap.max_qps_meeting_slo is not None:
        lines.append(
            f"  highest QPS meeting the SLO: {cap.max_qps_meeting_slo:.1f} (load {cap.max_load_meeting_slo:g})"
        )  # no step meeting the SLO: main's last line says so (exit 1)
    knee = next((s.stats for s in summary.steps if s.stats.index == cap.knee_index), None)
    lines += [
        f"  knee: {knee.label} ({knee.qps:.1f} QPS)" if knee else "  knee: not reached in the tested range",
        f"    (rule: next step adds < {KNEE_MAX_QPS_GAIN:.0%} QPS while P99 rises > {KNEE_MIN_P99_RISE:.0%})",
    ]
    for check in cap.little:
        flag = f"  <- {little_cause_text(check)}" if check.flagged else ""
        lines.append(
            f"  Little's law step {check.index}: users {check.users:g} vs QPS x latency "
            f"{check.expected_users:.1f} ({check.mismatch:.1%}, limit {LITTLE_MISMATCH:.0%}){flag}"
        )
    plan = cap.plan
    if plan is not None:
        lines.append(f"  {_plan_text(plan)} (usable {plan.usable_qps_per_replica:.1f} QPS per replica)")
        if plan.devices_upper_bound:
            lines.append("    (at most: the capacity is a lower bound, so fewer devices may serve the target)")
    lines += convergence_lines(summary)
    lines += cost_lines(summary)
    if summary.generator_cpu.saturated:
        lines.append("  WARNING: the load generator was CPU-saturated; the service may have more capacity")
    lines.append("  figures hold for this host and configuration only")
    return "\n".join(lines)


def convergence_lines(summary: RunSummary) -> list[str]:
    """Adaptive steps (steps.until): how each ended; an answer resting on one that never converged is uncertain."""
    lines = []
    for step in summary.steps:
        e = step.ending
        if e is None:
            continue
        bounded = e.p99_ci_low_ms is not None and e.p99_ci_high_ms is not None
        ci = f"{e.p99_ci_low_ms:.1f} .. {e.p99_ci_high_ms:.1f} ms" if bounded else "unbounded"
        how = "converged" if e.converged else "max time, never converged"
        lines.append(f"  step {step.stats.label}: {how} ({e.n_ok} ok, P99 95% interval {ci}, aim {e.target_rel_width:.0%})")
    if summary.capacity.uncertain:
        lines.append(
            "  UNCERTAIN: the capacity rests on a step whose P99 never converged; rerun it longer or with a wider --until"
        )
    return lines


def cost_lines(summary: RunSummary) -> list[str]:
    """Cost per million embeddings per step and the plan's monthly cost; nothing when no price was given."""
    cost = summary.cost
    if cost is None:
        return []
    currency = cost.prices.currency
    labels = {s.stats.index: s.stats.label for s in summary.steps}
    lines = [f"  cost ({currency}, prices from the {cost.source.replace('+', ' and the ')}):"]
    for step in cost.steps:
        emb = f"{step.per_1m_embeddings:.4g}" if step.per_1m_embeddings is not None else "-"
        tok = f"{step.per_1m_tokens:.4g}" if step.per_1m_tokens is not None else "-"
        label = labels.get(step.index, step.index)
        lines.append(f"    {label}: {emb} per 1M embeddings, {tok} per 1M input tokens")
    plan = cost.plan
    if plan is not None:
        most = "at most " if plan.upper_bound else ""
        spent = {"devices": plan.monthly_devices, "hosts": plan.monthly_hosts, "energy": plan.monthly_energy}
        parts = ", ".join(f"{name} {value:,.0f}" for name, value in spent.items() if value is not None)
        lines.append(
            f"    monthly for {plan.target_qps:g} QPS with {plan.headroom:.0%} headroom ({most}{plan.devices} device(s)): "
            f"{most}{plan.monthly:,.0f} {currency} ({parts})"
        )
    lines += [f"    note: {note}" for note in cost.notes]
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="embedperf capacity", description=__doc__)
    parser.add_argument("run_dir", nargs="?", type=Path, help="run folder")
    parser.add_argument("--latest", action="store_true", help="use the newest run under --runs-dir")
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    add_shared_option(parser, "slo_p99_ms", default_text="the run's slo.p99_ms")
    add_shared_option(parser, "target_qps", default_text="none: no device plan")
    add_shared_option(parser, "headroom_pct", DEFAULT_HEADROOM * 100.0)
    add_shared_option(parser, "error_budget_pct", default_text="the run's slo.error_budget_pct")
    add_cost_options(parser, after_the_fact=True)
    args = parser.parse_args(argv)
    headroom = args.headroom_pct / 100.0
    folder = resolve_run_folder(args.run_dir, args.latest, args.runs_dir)
    analysis = analyse_folder(
        folder, slo_p99_ms=args.slo_p99_ms, target_qps=args.target_qps, headroom=headroom, n_boot=200,
        error_budget=None if args.error_budget_pct is None else args.error_budget_pct / 100.0,
        cost=cost_from_options(args),
    )  # fmt: skip
    reason = no_success_line(analysis.summary)
    if reason is not None:
        print(f"embedperf capacity: {reason}")
        return 1
    print(format_plan(analysis.summary))
    for line in plan_lines(analysis.manifest, args.target_qps, headroom):  # runs of `embedperf search`
        print(line)
    failed = no_step_meets_line(analysis.summary)
    if failed is not None:
        print(f"embedperf capacity: {failed}")
        return 1
    return 0
