"""Capacity search logic: the P99 interval, probe verdicts and the bracket/bisect/confirm sequence."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from analysis.search import ProbeMeasurement, SearchState, judge, quantile_ci, reason_text
from scenarios.models import Search, Slo

SLO = Slo(p99_ms=100.0, error_budget_pct=0.1)


def _spec(**kw: float) -> Search:
    base = {
        "start_rate": 10.0,
        "min_ok_requests": 1000,
        "min_probe_s": 5.0,
        "max_probe_s": 60.0,
        "warmup_s": 1.0,
    }
    base.update(kw)
    return Search.model_validate(base)


def _measure(
    rate: float, latencies: list[float], errors: int = 0, done_fraction: float = 1.0
) -> ProbeMeasurement:
    n = len(latencies)
    duration_s = (n + errors) / rate
    return ProbeMeasurement(
        rate=rate,
        duration_s=duration_s,
        scheduled=n + errors,
        ok=n,
        errors=errors,
        ok_done=int(n * done_fraction),
        ok_latency_ms=latencies,
    )


def test_quantile_interval_covers_the_true_p99_at_the_stated_rate() -> None:
    rng = np.random.default_rng(1)
    true_p99 = -math.log(0.01)  # exponential(1)
    covered = 0
    for _ in range(200):
        _, lower, upper = quantile_ci(rng.exponential(1.0, 2000).tolist(), 0.99, 0.95)
        covered += lower <= true_p99 <= upper
    assert 0.90 <= covered / 200 <= 1.0


def test_quantile_interval_is_unbounded_with_too_few_samples() -> None:
    _, lower, upper = quantile_ci(
        [1.0] * 100, 0.99, 0.95
    )  # 0.99**100 > 0.025: no order statistic is high enough
    assert math.isinf(upper) and lower == 1.0
    _, _, upper = quantile_ci([1.0] * 400, 0.99, 0.95)
    assert upper == 1.0


def test_verdicts_follow_the_interval_errors_and_goodput() -> None:
    spec = _spec()
    assert judge(_measure(100, [10.0] * 2000), SLO, spec)[0] == "pass"
    assert judge(_measure(100, [500.0] * 2000), SLO, spec)[0] == "fail"
    straddle = [50.0] * 1970 + [99.0] * 10 + [101.0] * 20  # P99 right at the SLO: not decidable
    assert judge(_measure(100, straddle), SLO, spec)[0] == "uncertain"
    verdict, code, params, _ = judge(_measure(100, [10.0] * 2000, errors=10), SLO, spec)
    assert verdict == "fail" and "error rate" in reason_text(code, params)
    verdict, code, params, _ = judge(_measure(100, [10.0] * 2000, done_fraction=0.8), SLO, spec)
    assert verdict == "fail" and code == "goodput_short" and "goodput" in reason_text(code, params)


def _simulated_search(limit_rps: float, spec: Search, noise_ms: float = 5.0) -> SearchState:
    """Drive the state machine with a target whose P99 crosses the SLO at limit_rps."""
    rng = random.Random(3)
    state = SearchState(spec, SLO, "constant")
    elapsed = 0.0
    stage = 0
    while (plan := state.next_probe(elapsed)) is not None:
        base = 20.0 if plan.rate <= limit_rps else 400.0
        n = int(plan.rate * (plan.duration_s - spec.warmup_s))
        latencies = [base + rng.random() * noise_ms for _ in range(n)]
        state.add(plan, stage, f"p{stage}", _measure(plan.rate, latencies))
        elapsed += plan.duration_s
        stage += 1
    return state


def test_search_brackets_bisects_and_confirms_within_precision() -> None:
    spec = _spec(precision=0.05)
    state = _simulated_search(137.0, spec)
    rec = state.record
    assert rec.status == "found"
    assert rec.answer_rps is not None and rec.answer_rps <= 137.0
    assert (137.0 - rec.answer_rps) / 137.0 <= 0.05
    phases = [p.phase for p in rec.probes]
    assert phases[0] == "bracket" and "bisect" in phases and phases[-1] == "confirm"
    assert rec.probes[-1].rate == rec.answer_rps and rec.probes[-1].verdict == "pass"
    assert rec.probes[-1].duration_s > rec.probes[-2].duration_s  # the confirming probe runs longer
    low, high = rec.uncertainty_rps
    assert low == rec.answer_rps and high is not None and (high - low) / high <= 0.05
    assert len(rec.brackets) == len(rec.probes)


def test_search_brackets_downwards_when_the_first_probe_fails() -> None:
    state = _simulated_search(
        3.0, _spec(start_rate=40.0, max_probe_s=600.0, min_rate=0.5, max_duration_s=1e6)
    )
    assert state.record.status == "found"
    assert state.record.probes[0].verdict == "fail"
    assert state.record.answer_rps is not None and 3.0 * 0.95 <= state.record.answer_rps <= 3.0


def test_search_reports_when_nothing_or_everything_passes() -> None:
    state = _simulated_search(
        0.1, _spec(start_rate=1.0, min_rate=0.5, max_probe_s=3000.0, max_duration_s=1e6)
    )
    assert state.record.status == "below_min_rate" and state.record.answer_rps is None
    state = _simulated_search(1e9, _spec(start_rate=100.0, max_rate=400.0))
    assert state.record.status == "above_max_rate" and state.record.answer_rps == 400.0


def test_uncertain_probe_is_repeated_once_pooled_then_reported() -> None:
    spec = _spec(start_rate=100.0)
    state = SearchState(spec, SLO, "poisson")
    straddle = [50.0] * 1970 + [99.0] * 10 + [101.0] * 20
    plan = state.next_probe(0.0)
    assert plan is not None
    state.add(plan, 0, "a", _measure(plan.rate, straddle))
    repeat = state.next_probe(10.0)
    assert repeat is not None and repeat.phase == "repeat" and repeat.rate == plan.rate
    probe = state.add(repeat, 1, "b", _measure(repeat.rate, straddle))
    assert probe.ok == 2 * len(straddle)  # judged on both samples
    assert state.next_probe(20.0) is None
    assert state.record.status == "uncertain" and "100" in state.record.note


def test_max_duration_stops_with_the_current_answer() -> None:
    state = _simulated_search(1e9, _spec(start_rate=100.0, max_duration_s=30.0))
    assert state.record.status == "max_duration"
    assert state.record.answer_rps == max(p.rate for p in state.record.probes)


@pytest.mark.parametrize("rate", [1.0, 50.0, 5000.0])
def test_probe_duration_aims_for_enough_samples_within_bounds(rate: float) -> None:
    spec = _spec(min_ok_requests=1000, min_probe_s=5.0, max_probe_s=60.0, warmup_s=1.0)
    state = SearchState(spec, SLO, "constant")
    d = state.probe_duration_s(rate, "bisect")
    assert 5.0 <= d <= 60.0
    assert d == 60.0 or (d - 1.0) * rate >= 1000 or d == 5.0
    assert state.probe_duration_s(rate, "confirm") == pytest.approx(d * spec.confirm_factor)
