"""Capacity: the highest load meeting the SLO, the knee, a Little's-law check, devices for a target QPS.

Throughput here is always goodput (successful requests per second): a step whose error rate is over
the error budget never meets the SLO, is never the knee and never the capacity answer, however
fast its failures came back.

Knee rule: with steps ordered by offered load, the knee is the first step after which the next step
raises goodput by less than KNEE_MAX_QPS_GAIN (10 %) while its P99 rises by more than
KNEE_MIN_P99_RISE (20 %): more load buys little throughput and costs latency. A step over the
error budget may be the "next" step but never the knee. No such step means the knee lies beyond
the tested range.

Lower bound: when no knee was found and the highest-load step still meets the SLO, the load never
reached the limit, so the highest QPS meeting the SLO is only "at least" that much and a device plan
read from it is "at most" that many devices. A knee, or a highest-load step that fails the SLO, means
the limit lies inside the tested range and the figure is the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from analysis.figures.bottleneck import GENERATOR_BUSY_PCT
from analysis.model.steps import StepStats

KNEE_MAX_QPS_GAIN = 0.10
KNEE_MIN_P99_RISE = 0.20
# Little's law (users = answers/s x (latency + think time)): beyond this relative mismatch the
# generator or the think time, not the service, set the load.
LITTLE_MISMATCH = 0.10
DEFAULT_ERROR_BUDGET = 0.001
DEFAULT_HEADROOM = 0.25
# A ramp that never reached its limit is suggested again with its highest load times this factor.
NEXT_LOAD_FACTOR = 2.0
BACKOFF_ERROR_KINDS = frozenset({"connection_refused", "connection_reset", "connection_error", "timeout"})


LittleCause = Literal["errors", "generator", "unexplained"]


class LittleCheck(BaseModel):
    """Closed loop: users ≈ QPS × (mean latency + think time), and what a mismatch is put down to.

    `cause` (flagged checks only): "errors" when failed answers are over the tolerance (refusals come
    back at once and are not the load the law counts on), else "generator" when the generator's CPU
    was busy (bottleneck.GENERATOR_BUSY_PCT), else "unexplained" (think time, or a generator whose
    CPU was not measured). The generator is never blamed on a step where it was idle.
    """

    index: int
    users: float
    expected_users: float = Field(description="QPS x (mean latency of every answer + think time).")
    mismatch: float = Field(description="|expected_users - users| / users; flagged above LITTLE_MISMATCH.")
    flagged: bool
    cause: LittleCause | None = None
    error_rate: float | None = None
    generator_cpu_pct: float | None = None


def _little_cause(step: StepStats, generator_cpu_pct: float | None) -> LittleCause:
    if (step.error_rate or 0.0) > LITTLE_MISMATCH:
        return "errors"
    if generator_cpu_pct is not None and generator_cpu_pct >= GENERATOR_BUSY_PCT:
        return "generator"
    return "unexplained"


class DevicePlan(BaseModel):
    target_qps: float
    headroom: float
    usable_qps_per_replica: float
    replicas: int
    devices_per_replica: int
    devices: int
    devices_upper_bound: bool = False  # read from a lower-bound capacity: `devices` is "at most"


class CapacityResult(BaseModel):
    slo_p99_ms: float | None
    error_budget: float
    steps_meeting_slo: list[int]
    max_step_index: int | None = None
    max_qps_meeting_slo: float | None = None
    max_load_meeting_slo: float | None = Field(default=None, description="That step's load (users or rate).")
    knee_index: int | None = None
    knee_qps: float | None = None
    peak_qps: float | None = Field(default=None, description="The highest goodput of any step, SLO or not.")
    little: list[LittleCheck] = []
    plan: DevicePlan | None = None
    lower_bound: bool = False  # the load never reached the limit: max_qps_meeting_slo is "at least"
    highest_step_index: int | None = None  # the highest-load step with requests: where the load ended
    unconverged_steps: list[int] = []  # adaptive steps whose P99 interval never got narrow enough

    @property
    def uncertain(self) -> bool:
        """The answer rests on a step whose P99 never converged (the capacity step or the knee)."""
        return any(i in self.unconverged_steps for i in (self.max_step_index, self.knee_index) if i is not None)

    def plan_for(self, devices_in_run: int, target_qps: float, headroom: float) -> DevicePlan | None:
        """Devices for target_qps from this capacity (None when no step meets the SLO); the one way every
        plan is made, so a lower-bound capacity always gives an at-most device count."""
        if self.max_qps_meeting_slo is None or self.max_qps_meeting_slo <= 0:
            return None
        qps, lower_bound = self.max_qps_meeting_slo, self.lower_bound
        return device_plan(qps, devices_in_run, target_qps, headroom, capacity_lower_bound=lower_bound)


def within_error_budget(step: StepStats, error_budget: float) -> bool:
    """True when the step has requests and its error rate is at most the budget."""
    return step.error_rate is not None and step.error_rate <= error_budget


def meets_slo(step: StepStats, slo_p99_ms: float | None, error_budget: float) -> bool:
    if step.latency.p99_ms is None or not within_error_budget(step, error_budget):
        return False
    return slo_p99_ms is None or step.latency.p99_ms <= slo_p99_ms


def find_knee(steps: list[StepStats], error_budget: float = DEFAULT_ERROR_BUDGET) -> int | None:
    """The knee rule of the module doc; a step over the error budget is never the knee itself."""
    ordered = sorted((s for s in steps if s.latency.p99_ms is not None and s.qps > 0), key=lambda s: s.load)
    for here, nxt in zip(ordered, ordered[1:], strict=False):
        if not within_error_budget(here, error_budget):
            continue
        qps_gain = (nxt.qps - here.qps) / here.qps
        p99_rise = (nxt.latency.p99_ms or 0.0) / (here.latency.p99_ms or 1e-9) - 1.0
        if qps_gain < KNEE_MAX_QPS_GAIN and p99_rise > KNEE_MIN_P99_RISE:
            return here.index
    return None


def little_cause_text(check: LittleCheck) -> str:
    """What a flagged check is put down to, in one English phrase (the report has its own strings)."""
    if check.cause == "errors":
        return f"errors: {check.error_rate or 0.0:.0%} of answers failed (refusals return at once)"
    if check.cause == "generator":
        return f"generator bottleneck: its CPU at {check.generator_cpu_pct or 0.0:.0f}%"
    if check.generator_cpu_pct is not None:
        return f"not errors, nor the generator (CPU {check.generator_cpu_pct:.0f}%): think time?"
    return "generator or think time? (the generator's CPU was not measured)"


def little_checks(
    steps: list[StepStats], think_s: float, generator_cpu_pct: Mapping[int, float | None] | None = None
) -> list[LittleCheck]:
    """generator_cpu_pct: step index -> the generator's mean CPU over the step (absent: not measured)."""
    checks = []
    for step in steps:
        if not step.users or step.n_requests == 0:
            continue
        if any(kind in BACKOFF_ERROR_KINDS for kind in step.errors_by_kind):
            continue  # users waited in back-off (neither latency nor think time): the law does not apply
        if step.latency.mean_ms is None and step.error_latency.mean_ms is None:
            continue
        mean_ms = (
            (step.latency.mean_ms or 0.0) * step.n_ok
            + (step.error_latency.mean_ms or 0.0) * step.error_latency.n
        ) / max(step.n_ok + step.error_latency.n, 1)
        expected = step.offered_qps * (mean_ms / 1000.0 + think_s)  # every answer, failed ones too
        mismatch = abs(expected - step.users) / step.users
        cpu = (generator_cpu_pct or {}).get(step.index)
        flagged = mismatch > LITTLE_MISMATCH
        checks.append(LittleCheck(
            index=step.index, users=float(step.users), expected_users=expected, mismatch=mismatch,
            flagged=flagged, cause=_little_cause(step, cpu) if flagged else None, error_rate=step.error_rate,
            generator_cpu_pct=cpu,
        ))  # fmt: skip
    return checks


def device_plan(
    max_qps: float, devices_in_run: int, target_qps: float, headroom: float,
    capacity_lower_bound: bool = False,
) -> DevicePlan:  # fmt: skip
    """Replicas of the measured configuration: ceil(target / (max_qps_meeting_slo × (1 − headroom))).

    A lower-bound max_qps (the load never reached the limit) makes the device count an upper bound."""
    usable = max_qps * (1.0 - headroom)
    replicas = math.ceil(target_qps / usable) if usable > 0 else 0
    per_replica = max(devices_in_run, 1)
    return DevicePlan(
        target_qps=target_qps, headroom=headroom, usable_qps_per_replica=usable, replicas=replicas,
        devices_per_replica=per_replica, devices=replicas * per_replica,
        devices_upper_bound=capacity_lower_bound,
    )  # fmt: skip


def higher_load_override(step: StepStats) -> str:
    """The `--set` override that reruns `step` (a scenario step index) at NEXT_LOAD_FACTOR times its load."""
    if step.rate is not None:
        return f"steps.{step.index}.rate={step.rate * NEXT_LOAD_FACTOR:g}"
    return f"steps.{step.index}.users={math.ceil((step.users or 1) * NEXT_LOAD_FACTOR)}"


def capacity(
    steps: list[StepStats], slo_p99_ms: float | None, error_budget: float = DEFAULT_ERROR_BUDGET,
    think_s: float = 0.0, devices_in_run: int = 1, target_qps: float | None = None,
    headroom: float = DEFAULT_HEADROOM, generator_cpu_pct: Mapping[int, float | None] | None = None,
) -> CapacityResult:  # fmt: skip
    meeting = [s for s in steps if meets_slo(s, slo_p99_ms, error_budget)]
    best = max(meeting, key=lambda s: s.qps) if meeting else None
    knee = find_knee(steps, error_budget)
    knee_step = next((s for s in steps if s.index == knee), None)
    # the highest-load step that was measured (has requests): where the tested range ends
    top = max((s for s in steps if s.n_requests > 0), key=lambda s: (s.load, s.index), default=None)
    result = CapacityResult(
        slo_p99_ms=slo_p99_ms, error_budget=error_budget, steps_meeting_slo=[s.index for s in meeting],
        max_step_index=best.index if best else None, max_qps_meeting_slo=best.qps if best else None,
        max_load_meeting_slo=best.load if best else None, knee_index=knee,
        knee_qps=knee_step.qps if knee_step else None, peak_qps=max((s.qps for s in steps), default=None),
        little=little_checks(steps, think_s, generator_cpu_pct),
        # no knee, and the highest load still meets the SLO: the capacity found is only a lower bound
        lower_bound=knee is None and top is not None and meets_slo(top, slo_p99_ms, error_budget),
        highest_step_index=top.index if top else None,
    )  # fmt: skip
    if target_qps is not None:
        result.plan = result.plan_for(devices_in_run, target_qps, headroom)
    return result
