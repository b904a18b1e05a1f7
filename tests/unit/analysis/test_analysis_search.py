"""Capacity search logic: the P99 interval, probe verdicts, feasibility and the bracket/bisect/confirm sequence."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from decisions.search.state import (
    ProbeMeasurement,
    SearchRecord,
    SearchState,
    feasibility,
    headline,
    judge,
    quantile_ci,
    reason_text,
    samples_to_bound,
)
from embedperf.errors import ConfigError
from scenarios.models import Search, Slo

SLO = Slo(p99_ms=100.0, error_budget_pct=0.1)


def _spec(**kw: float) -> Search:
    base: dict[str, float] = {
        "start_rate": 20.0,
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


def _straddle(n: int) -> list[float]:
    """n latencies whose P99 sits on the SLO (100 ms) in any amount: 1% above it, 0.5% just below."""
    above, near = round(0.01 * n), round(0.005 * n)
    return [50.0] * (n - above - near) + [99.0] * near + [101.0] * above


Target = Callable[[float, int], list[float]]


def _scripted(pass_below: float, fail_above: float, then_fail: tuple[float, ...] = ()) -> Target:
    """A target that passes below one rate, fails above another and sits on the SLO in between;
    at a rate in then_fail it sits on the SLO once, then fails."""
    seen: set[float] = set()

    def latencies(rate: float, n: int) -> list[float]:
        if rate < pass_below:
            return [20.0 + (i % 7) for i in range(n)]
        if rate > fail_above or (rate in then_fail and rate in seen):
            return [400.0] * n
        seen.add(rate)
        return _straddle(n)

    return latencies


def _run(spec: Search, target: Target) -> SearchRecord:
    state = SearchState(spec, SLO, "poisson")
    elapsed, stage = 0.0, 0
    while (plan := state.next_probe(elapsed)) is not None:
        n = int(plan.rate * (plan.duration_s - spec.warmup_s))
        state.add(plan, stage, f"p{stage}", _measure(plan.rate, target(plan.rate, n)))
        elapsed += plan.duration_s
        stage += 1
    return state.record


def _sequence(record: SearchRecord) -> list[tuple[str, float, str]]:
    return [(p.phase, p.rate, p.verdict) for p in record.probes]


def test_quantile_interval_covers_the_true_p99_at_the_stated_rate() -> None:
    rng = random.Random(1)
    true_p99 = -math.log(0.01)  # exponential(1)
    covered = 0
    for _ in range(200):
        _, lower, upper = quantile_ci([rng.expovariate(1.0) for _ in range(2000)], 0.99, 0.95)
        covered += lower <= true_p99 <= upper
    assert 0.90 <= covered / 200 <= 1.0


def test_quantile_interval_is_unbounded_with_too_few_samples() -> None:
    # 0.99**100 > 0.025: no order statistic is high enough
    _, lower, upper = quantile_ci([1.0] * 100, 0.99, 0.95)
    assert math.isinf(upper) and lower == 1.0
    _, _, upper = quantile_ci([1.0] * 400, 0.99, 0.95)
    assert upper == 1.0


@pytest.mark.parametrize("confidence", [0.6, 0.9, 0.95, 0.99])
def test_samples_to_bound_is_the_fewest_samples_with_a_finite_upper_end(confidence: float) -> None:
    n = samples_to_bound(0.99, confidence)
    assert math.isinf(quantile_ci([1.0] * (n - 1), 0.99, confidence)[2])
    assert math.isfinite(quantile_ci([1.0] * n, 0.99, confidence)[2])
    if confidence == 0.95:
        assert n == 368  # 1 - 0.99^n >= 0.975


def test_verdicts_follow_the_interval_errors_and_goodput() -> None:
    spec = _spec()
    assert judge(_measure(100, [10.0] * 2000), SLO, spec)[0] == "pass"
    assert judge(_measure(100, [500.0] * 2000), SLO, spec)[0] == "fail"
    assert judge(_measure(100, _straddle(2000)), SLO, spec)[0] == "uncertain"  # P99 at the SLO: not decidable
    verdict, code, params, _ = judge(_measure(100, [10.0] * 2000, errors=10), SLO, spec)
    assert verdict == "fail" and "error rate" in reason_text(code, params)
    verdict, code, params, _ = judge(_measure(100, [10.0] * 2000, done_fraction=0.8), SLO, spec)
    assert verdict == "fail" and code == "goodput_short" and "goodput" in reason_text(code, params)


def test_an_unfinished_request_never_helps_a_probe_pass() -> None:
    fast = _measure(100, [10.0] * 2000)
    assert judge(fast, SLO, _spec())[0] == "pass"
    # 60 requests still unanswered when the (short) drain ended, 50 ms after their intended start
    stuck = fast.model_copy(update={"scheduled": 2060, "unfinished_ms": [50.0] * 60})
    verdict, _, _, (_, lower, _) = judge(stuck, SLO, _spec())
    assert verdict == "fail" and lower > SLO.p99_ms


def test_search_brackets_bisects_and_confirms_within_precision() -> None:
    spec = _spec(precision=0.05)
    rec = _run(spec, _scripted(137.0, 137.0))
    assert rec.status == "found"
    assert rec.answer_rps is not None and rec.answer_rps <= 137.0
    assert (137.0 - rec.answer_rps) / 137.0 <= 0.05
    phases = [p.phase for p in rec.probes]
    assert phases[0] == "bracket" and "bisect" in phases and phases[-1] == "confirm"
    assert rec.probes[-1].rate == rec.answer_rps and rec.probes[-1].verdict == "pass"
    assert rec.confirm_stage_index == rec.probes[-1].stage_index
    assert (
        rec.answer_p99_ms == rec.probes[-1].p99_ms and rec.answer_p99_upper_ms == rec.probes[-1].p99_upper_ms
    )
    low, high = rec.uncertainty_rps
    assert low == rec.answer_rps and high is not None and (high - low) / high <= 0.05
    assert len(rec.brackets) == len(rec.probes)


def test_a_rate_at_the_slo_narrows_the_bracket_instead_of_ending_the_search() -> None:
    # The field report's sequence: 80 pass, 160 uncertain then failing on the pooled repeat, 120 pass,
    # 140 at the SLO (its repeat too), where that search stopped. Now it goes on: 130 and 135 pass, the
    # bracket [135, 140] is within 5%, and 135 is confirmed.
    rec = _run(_spec(start_rate=80.0, precision=0.05), _scripted(137.0, 165.0, then_fail=(160.0,)))
    assert _sequence(rec) == [
        ("bracket", 80.0, "pass"),
        ("bracket", 160.0, "uncertain"),
        ("repeat", 160.0, "fail"),
        ("bisect", 120.0, "pass"),
        ("bisect", 140.0, "uncertain"),
        ("repeat", 140.0, "uncertain"),
        ("bisect", 130.0, "pass"),
        ("bisect", 135.0, "pass"),
        ("confirm", 135.0, "pass"),
    ]
    assert rec.status == "at_slo" and rec.outcome == "answer"
    assert rec.answer_rps == 135.0 and rec.uncertainty_rps == (135.0, 140.0)
    assert rec.note.startswith("at 140 req/s the P99 is at the SLO within its 95% interval (")
    assert rec.note.endswith("the SLO is met with confidence up to 135 req/s")
    assert rec.brackets[2] == (80.0, 160.0) and rec.brackets[5] == (120.0, 140.0)


def test_a_band_of_rates_at_the_slo_wider_than_precision_says_so() -> None:
    # Every rate from 100 to 170 req/s sits on the SLO: the answer (below 100) is far below 160, whose
    # interval contains the SLO, and the status says why and what to change.
    rec = _run(_spec(start_rate=80.0, precision=0.05), _scripted(100.0, 170.0))
    assert rec.status == "wide_interval" and rec.outcome == "not_narrowed"
    assert rec.answer_rps is not None and rec.answer_rps < 100.0
    low, top = rec.uncertainty_rps
    assert low is not None and top is not None and (top - low) / top <= 0.05  # the bracket itself narrowed
    assert rec.at_slo_rps == 160.0
    assert rec.note.startswith("at 160 req/s, ") and "--min-ok-requests" in rec.note
    assert "more than --precision 5%" in rec.note


def test_an_uncertain_probe_is_repeated_once_pooled_then_bounds_the_bracket() -> None:
    spec = _spec(start_rate=100.0)
    state = SearchState(spec, SLO, "poisson")
    plan = state.next_probe(0.0)
    assert plan is not None
    state.add(plan, 0, "a", _measure(plan.rate, _straddle(2000)))
    repeat = state.next_probe(10.0)
    assert repeat is not None and repeat.phase == "repeat" and repeat.rate == plan.rate
    assert repeat.duration_s == plan.duration_s
    probe = state.add(repeat, 1, "b", _measure(repeat.rate, _straddle(2000)))
    assert probe.verdict == "uncertain" and probe.judged_samples == 4000 and probe.ok == 2000
    assert state.top == 100.0 and state.low is None
    after = state.next_probe(20.0)
    assert after is not None and after.phase == "bracket" and after.rate == 50.0


def test_search_brackets_downwards_when_the_first_probe_fails() -> None:
    rec = _run(_spec(start_rate=40.0, max_probe_s=600.0, max_duration_s=1e6), _scripted(3.0, 3.0))
    assert rec.status == "found"
    assert rec.probes[0].verdict == "fail"
    assert rec.answer_rps is not None and 3.0 * 0.95 <= rec.answer_rps <= 3.0


def test_search_reports_when_nothing_or_everything_passes() -> None:
    spec = _spec(start_rate=1.0, max_probe_s=3000.0, max_duration_s=1e6)
    floor = feasibility(spec).floor_rps
    rec = _run(spec, _scripted(0.1, 0.1))
    assert rec.status == "below_min_rate" and rec.answer_rps is None and rec.outcome == "no_rate"
    assert min(p.rate for p in rec.probes) == math.ceil(floor * 1000) / 1000  # the floor, never below
    assert f"below {floor:.3g} req/s a probe of 3000 s collects fewer than 1000 ok answers" in rec.note
    rec = _run(_spec(start_rate=100.0, max_rate=400.0), _scripted(1e9, 1e9))
    assert rec.status == "above_max_rate" and rec.answer_rps == 400.0 and rec.outcome == "answer"


def test_a_search_failing_on_errors_says_so_not_the_slo_confidence() -> None:
    """A target refusing 99% of the load: the note names the errors, in English and in the report's zh."""
    from reports.search_section import note_text

    spec = _spec(start_rate=1.0, max_probe_s=3000.0, max_duration_s=1e6)
    state = SearchState(spec, SLO, "poisson")
    elapsed, stage = 0.0, 0
    while (plan := state.next_probe(elapsed)) is not None:
        n = int(plan.rate * (plan.duration_s - spec.warmup_s))
        ok = max(n // 100, 1)
        state.add(plan, stage, f"p{stage}", _measure(plan.rate, [20.0] * ok, errors=n - ok))
        elapsed, stage = elapsed + plan.duration_s, stage + 1
    rec = state.record
    assert rec.status == "below_min_rate" and rec.note_params["cause"] == "errors"
    assert "fails on errors: 99." in rec.note and "with confidence" not in rec.note
    assert "因错误而失败" in note_text(rec, "zh") and note_text(rec, "en") == rec.note
    assert headline(rec, 1).startswith("no probed rate is served within the error budget (below_min_rate: ")


def test_max_duration_stops_with_the_current_answer() -> None:
    rec = _run(_spec(start_rate=100.0, max_duration_s=30.0), _scripted(1e9, 1e9))
    assert rec.status == "max_duration" and rec.outcome == "not_narrowed"
    assert rec.answer_rps == max(p.rate for p in rec.probes)


@pytest.mark.parametrize("rate", [20.0, 50.0, 5000.0])
def test_probe_duration_aims_for_enough_samples_within_bounds(rate: float) -> None:
    spec = _spec(min_ok_requests=1000, min_probe_s=5.0, max_probe_s=60.0, warmup_s=1.0)
    state = SearchState(spec, SLO, "constant")
    d = state.probe_duration_s(rate, "bisect")
    assert 5.0 <= d <= 60.0
    assert d == 60.0 or (d - 1.0) * rate >= 1000 or d == 5.0
    assert state.probe_duration_s(rate, "confirm") == pytest.approx(min(d * spec.confirm_factor, 60.0))


def test_every_probe_repeats_and_confirms_included_respects_max_probe_s() -> None:
    # Probes near the floor already need the whole max_probe_s: neither a repeat nor the (twice as
    # long) confirming probe may run longer.
    spec = _spec(start_rate=70.0, max_probe_s=8.0, min_probe_s=2.0, warmup_s=1.0, min_ok_requests=400)
    state = SearchState(spec, SLO, "poisson")
    durations: dict[str, list[float]] = {}
    elapsed, stage = 0.0, 0
    target = _scripted(90.0, 110.0)
    while (plan := state.next_probe(elapsed)) is not None:
        durations.setdefault(plan.phase, []).append(plan.duration_s)
        n = int(plan.rate * (plan.duration_s - spec.warmup_s))
        state.add(plan, stage, f"p{stage}", _measure(plan.rate, target(plan.rate, n)))
        elapsed, stage = elapsed + plan.duration_s, stage + 1
    assert {"bracket", "bisect", "repeat", "confirm"} <= set(durations)
    assert max(max(d) for d in durations.values()) <= 8.0
    assert max(durations["confirm"]) == 8.0  # capped, not 2 x 8 s


def test_min_ok_requests_that_can_never_bound_a_p99_is_refused_before_any_probe() -> None:
    with pytest.raises(ConfigError) as info:
        SearchState(_spec(min_ok_requests=150), SLO, "poisson")
    message = str(info.value)
    assert "\n" not in message
    assert (
        "min_ok_requests 150" in message and "at least 368" in message and "--min-ok-requests 368" in message
    )


@pytest.mark.parametrize("field", ["start_rate", "max_rate"])
def test_rates_below_the_floor_are_refused_with_what_to_change(field: str) -> None:
    # 1000 ok answers in 59 s of a 60 s probe need 1000 x 1.15 / 59 = 19.5 req/s
    kw = {"start_rate": 10.0, "max_rate": 10.0} if field == "max_rate" else {"start_rate": 10.0}
    with pytest.raises(ConfigError) as info:
        feasibility(_spec(**kw))
    message = str(info.value)
    assert f"search.{field} 10 req/s is below 19.5 req/s" in message
    assert f"--{field.replace('_', '-')} 20" in message and "--max-probe-s" in message


def test_min_rate_below_the_floor_is_raised_to_it_and_never_probed_below() -> None:
    spec = _spec(start_rate=40.0, min_rate=1.0, max_duration_s=1e6)
    limits = feasibility(spec)
    assert limits.min_rate_raised and limits.min_rate == pytest.approx(1150.0 / 59.0)
    assert "19.5 req/s is the lowest rate at which a probe of 60 s" in limits.floor_reason(spec)
    rec = _run(spec, _scripted(0.1, 0.1))
    assert rec.status == "below_min_rate" and rec.min_rate_rps == pytest.approx(limits.min_rate)
    assert min(p.rate for p in rec.probes) >= limits.min_rate
    assert not feasibility(_spec(start_rate=40.0)).min_rate_raised  # the default min_rate is the floor


def test_a_record_written_before_the_new_fields_still_loads() -> None:
    old = {
        "rule": "r",
        "slo_p99_ms": 60.0,
        "error_budget_pct": 0.1,
        "precision": 0.05,
        "confidence": 0.95,
        "arrival": "poisson",
        "probes": [
            {
                "stage_index": 0,
                "label": "bracket:140",
                "phase": "bracket",
                "rate": 140.0,
                "duration_s": 7.0,
                "scheduled": 980,
                "ok": 980,
                "error_rate": 0.0,
                "offered_rps": 140.0,
                "goodput_rps": 140.0,
                "p50_ms": 21.0,
                "p99_ms": 61.1,
                "p99_lower_ms": 57.3,
                "p99_upper_ms": 64.5,
                "verdict": "uncertain",
                "reason": "x",
            }
        ],
        "status": "uncertain",
        "answer_rps": 120.0,
        "uncertainty_rps": [120.0, 160.0],
        "note": "the P99 at 140 req/s stays within its interval of the SLO",
        "note_params": {"rate": 140.0},
    }
    rec = SearchRecord.model_validate(old)
    assert rec.status == "uncertain" and rec.outcome == "not_narrowed"
    assert rec.answer_p99_lower_ms is None and rec.at_slo_rps is None and rec.probes[0].judged_samples == 0
