"""Capacity: SLO, knee rule, Little's law and the device plan."""

from __future__ import annotations

import math

import pytest

from analysis.capacity import capacity, device_plan, find_knee, little_checks, think_time_s
from analysis.steps import LatencyStats, StepStats


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


def test_think_time_counts_in_little_law() -> None:
    assert think_time_s({"wait_time_s": [1.0, 3.0]}) == 2.0
    assert think_time_s({}) == 0.0
    (check,) = little_checks([step(0, 10, 4.0, 60.0, 500.0)], think_s=2.0)
    assert check.expected_users == pytest.approx(10.0)


def test_device_plan_formula() -> None:
    plan = device_plan(max_qps=400.0, devices_in_run=8, target_qps=1000.0, headroom=0.25)
    assert plan.replicas == math.ceil(1000.0 / (400.0 * 0.75)) == 4
    assert plan.devices == 32
    result = capacity(RAMP, 300.0, 0.001, devices_in_run=8, target_qps=1000.0, headroom=0.25)
    assert result.plan is not None and result.plan.devices == 32
