"""Capacity: SLO, knee rule, Little's law and the device plan."""

from __future__ import annotations

import math

import pytest

from analysis.figures.capacity import (
    CapacityResult,
    capacity,
    device_plan,
    find_knee,
    higher_load_override,
    little_cause_text,
    little_checks,
)
from analysis.model.steps import LatencyStats, StepStats


def step(index: int, users: int, qps: float, p99: float, mean: float, error_rate: float = 0.0) -> StepStats:
    n = int(qps * 60)
    return StepStats(
        index=index, label=f"u{users}", users=users, steady_start_unix_s=0.0, steady_end_unix_s=60.0,
        duration_s=60.0, n_requests=n, n_ok=n, n_error=int(n * error_rate), n_timeout=0, n_probe=0,
        n_warmup_trimmed=0, qps=qps, ok_qps=qps, error_rate=error_rate, goodput_qps=qps,
        offered_qps=qps / (1.0 - error_rate), latency=LatencyStats(n=n, mean_ms=mean, p50_ms=mean, p99_ms=p99),
    )  # fmt: skip


RAMP = [
    step(0, 1, 40.0, 50.0, 25.0),
    step(1, 10, 250.0, 100.0, 40.0),
    step(2, 50, 400.0, 280.0, 125.0, error_rate=0.0005),
    step(3, 100, 420.0, 800.0, 238.0, error_rate=0.004),
]


def test_highest_load_meeting_slo_and_knee() -> None:
    result = capacity(RAMP, slo_p99_ms=300.0, error_budget=0.001)
    assert result.steps_meeting_slo == [0, 1, 2]
    assert result.max_qps_meeting_slo == 400.0
    assert result.max_load_meeting_slo == 50.0
    assert result.knee_index == 2  # 400 -> 420 QPS (+5 %) while P99 280 -> 800
    assert result.peak_qps == 420.0


def test_error_budget_excludes_a_step() -> None:
    result = capacity(RAMP, slo_p99_ms=1000.0, error_budget=0.001)
    assert 3 not in result.steps_meeting_slo


def test_no_knee_while_throughput_still_scales() -> None:
    assert find_knee(RAMP[:3]) is None


def test_little_law_flags_a_generator_bottleneck() -> None:
    checks = little_checks([RAMP[1], step(5, 100, 250.0, 100.0, 40.0)], think_s=0.0)
    assert checks[0].flagged is False and checks[0].expected_users == pytest.approx(10.0)
    assert checks[1].flagged is True  # 100 users but QPS x latency = 10


def test_little_law_names_errors_not_an_idle_generator() -> None:
    """u50 answered 80% refusals while the generator used 3% CPU: errors are the cause, not the generator."""
    refused = step(2, 50, 100.0, 20.0, 5.0, error_rate=0.8)  # 500 answers/s x 5 ms = 2.5 "users"
    short = step(3, 100, 250.0, 100.0, 40.0)
    checks = little_checks([refused, short, step(4, 100, 250.0, 100.0, 40.0)], 0.0, {2: 3.0, 3: 97.0, 4: 3.0})
    assert [c.flagged for c in checks] == [True, True, True]
    assert [c.cause for c in checks] == ["errors", "generator", "unexplained"]
    assert "errors: 80% of answers failed" in little_cause_text(checks[0])
    assert "generator" not in little_cause_text(checks[0])
    assert "generator bottleneck" in little_cause_text(checks[1])
    assert "think time" in little_cause_text(checks[2]) and "bottleneck" not in little_cause_text(checks[2])


def test_think_time_counts_in_little_law() -> None:
    (check,) = little_checks([step(0, 10, 4.0, 60.0, 500.0)], think_s=2.0)
    assert check.expected_users == pytest.approx(10.0)


def test_device_plan_formula() -> None:
    plan = device_plan(max_qps=400.0, devices_in_run=8, target_qps=1000.0, headroom=0.25)
    assert plan.replicas == math.ceil(1000.0 / (400.0 * 0.75)) == 4
    assert plan.devices == 32
    result = capacity(RAMP, 300.0, 0.001, devices_in_run=8, target_qps=1000.0, headroom=0.25)
    assert result.plan is not None and result.plan.devices == 32


def test_a_ramp_that_never_reached_the_limit_is_a_lower_bound() -> None:
    """No knee and the highest load (step 2: P99 280 ms, errors 0.05 %) meets the SLO: "at least"."""
    result = capacity(RAMP[:3], 300.0, 0.001, target_qps=1000.0)
    assert result.knee_index is None and result.highest_step_index == 2
    assert result.lower_bound is True and result.max_qps_meeting_slo == 400.0
    assert result.plan is not None and result.plan.devices_upper_bound is True  # at most that many devices


@pytest.mark.parametrize(
    ("steps", "slo_p99_ms", "error_budget", "why"),
    [
        (RAMP, 300.0, 0.001, "knee at step 2, last step over the error budget"),
        (RAMP, 1000.0, 0.01, "knee at step 2, although the last step meets the SLO"),
        (RAMP[:3], 200.0, 0.001, "no knee, but the last step's P99 280 ms is over the SLO"),
        (RAMP[:3], 300.0, 0.0001, "no knee, but the last step's errors are over the budget"),
    ],
)
def test_a_ramp_that_reached_the_limit_is_the_plain_figure(
    steps: list[StepStats], slo_p99_ms: float, error_budget: float, why: str
) -> None:
    result = capacity(steps, slo_p99_ms, error_budget, target_qps=1000.0)
    assert result.max_qps_meeting_slo is not None, why
    assert result.lower_bound is False, why
    assert result.plan is not None and result.plan.devices_upper_bound is False, why


def test_highest_step_is_by_load_not_by_position() -> None:
    """Steps listed out of load order: the highest load (step 1, 50 users, P99 over the SLO) decides."""
    shuffled = [RAMP[0], RAMP[2], RAMP[1]]
    assert capacity(shuffled, 200.0, 0.001).lower_bound is False
    assert capacity(shuffled, 300.0, 0.001).lower_bound is True


def test_no_step_meeting_the_slo_is_neither_a_figure_nor_a_lower_bound() -> None:
    result = capacity(RAMP[:3], 10.0, 0.001, target_qps=1000.0)
    assert result.max_qps_meeting_slo is None and result.lower_bound is False and result.plan is None


def test_the_suggested_next_ramp_doubles_the_highest_load() -> None:
    assert higher_load_override(RAMP[2]) == "steps.2.users=100"
    rated = RAMP[1].model_copy(update={"users": None, "rate": 12.5})
    assert higher_load_override(rated) == "steps.1.rate=25"


def test_a_capacity_written_before_the_flag_loads_as_not_a_lower_bound() -> None:
    old = capacity(RAMP, 300.0, 0.001, target_qps=1000.0).model_dump()
    del old["lower_bound"], old["highest_step_index"], old["plan"]["devices_upper_bound"]
    loaded = CapacityResult.model_validate(old)
    assert (
        loaded.lower_bound is False and loaded.plan is not None and loaded.plan.devices_upper_bound is False
    )
