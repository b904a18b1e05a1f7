"""The canary's rollback triggers on synthetic windows: which fires, where, with what numbers, and the exit code."""

from __future__ import annotations

import pytest

from decisions.canary_verdict import judge
from embedperf.canary_record import EXIT_CODES, SideWindow, WindowJudgement
from scenarios.canary_models import Canary, Rollback

STAGES = [5.0, 20.0, 50.0, 100.0]
CANARY = Canary(enabled=True, stages_pct=STAGES, window_s=2.0, windows_per_stage=3, min_window_requests=20)
QUIET = Rollback(
    max_error_rate_pct=None,
    max_p99_ms=None,
    max_p99_increase_pct=None,
    min_agreement_cosine=None,
    max_temp_c=None,
    max_unavailable_s=None,
)


def side(
    requests: int = 100, ok: int | None = None, p99_ms: float = 10.0, unavailable_s: int = 0
) -> SideWindow:
    n_ok = requests if ok is None else ok
    return SideWindow(
        requests=requests, ok=n_ok, p99_ms=p99_ms if n_ok else None, unavailable_s=unavailable_s
    )


def window(stage: int, k: int, **fields: object) -> WindowJudgement:
    values: dict[str, object] = {
        "stage_index": stage,
        "window_index": k,
        "weight_pct": STAGES[stage],
        "start_unix_s": 1000.0 + 6.0 * stage + 2.0 * k,
        "end_unix_s": 1002.0 + 6.0 * stage + 2.0 * k,
        "baseline": side(),
        "candidate": side(),
    }
    values.update(fields)
    return WindowJudgement.model_validate(values)


def all_windows(**fields: object) -> list[WindowJudgement]:
    return [window(s, k, **fields) for s in range(len(STAGES)) for k in range(3)]


def test_error_rate_fires_in_its_window_with_the_numbers_in_one_line() -> None:
    rollback = QUIET.model_copy(update={"max_error_rate_pct": 1.0})
    windows = all_windows()
    windows[4] = window(1, 1, candidate=side(requests=96, ok=91))  # 5 of 96 = 5.2%
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.status == "rollback" and EXIT_CODES[verdict.status] == 1
    assert verdict.trigger == "error_rate"
    assert (verdict.stage_index, verdict.window_index) == (1, 1)
    assert verdict.line == (
        "ROLL BACK at stage 2 (20%), window 2: candidate error rate 5.2% > 1% (5 of 96; baseline 0.0%)"
    )
    assert "\n" not in verdict.line


def test_error_rate_at_the_limit_or_in_a_thin_window_does_not_fire() -> None:
    rollback = QUIET.model_copy(update={"max_error_rate_pct": 1.0})
    windows = all_windows()
    windows[1] = window(0, 1, candidate=side(requests=100, ok=99))  # exactly 1%: not above
    windows[2] = window(0, 2, candidate=side(requests=10, ok=5))  # 50%, but 10 < min_window_requests
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.status == "promote" and EXIT_CODES[verdict.status] == 0


@pytest.mark.parametrize("n", [1, 2, 3])
def test_latency_fires_at_the_nth_consecutive_window_over_the_limit_never_before(n: int) -> None:
    rollback = QUIET.model_copy(update={"max_p99_increase_pct": 50.0, "p99_windows": n})
    slow = {"baseline": side(p99_ms=100.0), "candidate": side(p99_ms=300.0)}  # 3x the baseline
    windows = [window(0, 0), window(0, 1)] + [window(0, 2, **slow)] + [window(1, k, **slow) for k in range(3)]
    first_over = 2
    for upto in range(len(windows)):
        _, verdict = judge(windows[: upto + 1], CANARY, rollback, finished=False)
        if upto < first_over + n - 1:
            assert verdict.status == "running", f"fired after {upto - first_over + 1} windows over, needs {n}"
        else:
            assert verdict.status == "rollback" and verdict.trigger == "p99_increase"
            at = windows[first_over + n - 1]
            assert (verdict.stage_index, verdict.window_index) == (at.stage_index, at.window_index)
            assert f"in {n} consecutive windows" in verdict.line
            assert "candidate P99 300.0 ms > 150.0 ms (baseline 100.0 ms +50%)" in verdict.line
            break


def test_a_window_under_the_limit_or_too_thin_restarts_the_run_of_windows() -> None:
    rollback = QUIET.model_copy(update={"max_p99_ms": 200.0, "p99_windows": 3})
    slow = {"candidate": side(p99_ms=300.0)}
    windows = [
        window(0, 0, **slow),
        window(0, 1, **slow),
        window(0, 2),  # under the limit
        window(1, 0, **slow),
        window(1, 1, **slow),
        window(1, 2, candidate=side(requests=5, p99_ms=900.0)),  # too few requests to judge a P99
        window(2, 0, **slow),
        window(2, 1, **slow),
    ]
    annotated, verdict = judge(windows, CANARY, rollback, finished=False)
    assert verdict.status == "running"
    assert [w.p99_streak for w in annotated] == [1, 2, 0, 1, 2, 0, 1, 2]
    _, verdict = judge([*windows, window(2, 2, **slow)], CANARY, rollback, finished=False)
    assert verdict.status == "rollback" and verdict.trigger == "p99_ms"
    assert (verdict.stage_index, verdict.window_index) == (2, 2)


def test_at_full_weight_the_baseline_p99_carries_over_from_its_last_window_with_enough_requests() -> None:
    rollback = QUIET.model_copy(update={"max_p99_increase_pct": 50.0, "p99_windows": 1})
    windows = [
        window(2, 2, baseline=side(p99_ms=100.0), candidate=side(p99_ms=120.0)),
        window(3, 0, baseline=side(requests=3, p99_ms=20.0), candidate=side(p99_ms=140.0)),
        window(3, 1, baseline=side(requests=0), candidate=side(p99_ms=160.0)),
    ]
    annotated, verdict = judge(windows, CANARY, rollback, finished=False)
    assert [w.p99_limit_ms for w in annotated] == [150.0, 150.0, 150.0]  # not 20 * 1.5 from 3 requests
    assert verdict.status == "rollback" and (verdict.stage_index, verdict.window_index) == (3, 1)


def test_agreement_below_the_gate_fires_and_at_the_gate_does_not() -> None:
    rollback = QUIET.model_copy(update={"min_agreement_cosine": 0.99})
    windows = all_windows(agreement_n=12, agreement_mean=0.99995, agreement_min=0.9999)
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.status == "promote"
    windows[3] = window(1, 0, agreement_n=12, agreement_mean=0.9812, agreement_min=0.9701)
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.trigger == "agreement" and (verdict.stage_index, verdict.window_index) == (1, 0)
    assert "agreement cosine 0.9812 < 0.99 (mean of 12 texts sent to both sides; min 0.9701)" in verdict.line


def test_unavailable_seconds_and_temperature_fire_above_their_limits() -> None:
    rollback = QUIET.model_copy(update={"max_unavailable_s": 2.0, "max_temp_c": 85.0})
    windows = all_windows()
    windows[5] = window(1, 2, candidate=side(unavailable_s=2), temp_c_max=85.0)  # at the limits: no trigger
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.status == "promote"
    windows[6] = window(2, 0, candidate=side(unavailable_s=3))
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.trigger == "unavailable" and "candidate unavailable 3 s of 2 s > 2 s" in verdict.line
    windows[6] = window(2, 0, temp_c_max=91.0)
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.trigger == "temperature" and "91 C > 85 C" in verdict.line


def test_the_first_window_that_fires_wins_and_later_ones_are_not_reached() -> None:
    rollback = QUIET.model_copy(update={"max_error_rate_pct": 1.0, "min_agreement_cosine": 0.99})
    windows = all_windows()
    windows[7] = window(2, 1, agreement_n=3, agreement_mean=0.5, agreement_min=0.5)
    windows[9] = window(3, 0, candidate=side(requests=100, ok=50))
    _, verdict = judge(windows, CANARY, rollback, finished=True)
    assert verdict.trigger == "agreement" and verdict.stage_index == 2


def test_a_stage_too_thin_gives_no_verdict_exit_2_and_a_run_cut_short_is_still_running() -> None:
    windows = all_windows()
    windows[:3] = [window(0, k, candidate=side(requests=10)) for k in range(3)]  # 30 < 50 at stage 1
    _, verdict = judge(windows, CANARY.model_copy(update={"min_stage_requests": 50}), QUIET, finished=True)
    assert verdict.status == "no_verdict" and EXIT_CODES[verdict.status] == 2
    assert verdict.line.startswith("NO VERDICT at stage 1 (5%): the candidate had 30 requests (< 50)")
    _, verdict = judge(windows[:5], CANARY, QUIET, finished=False)
    assert verdict.status == "running" and EXIT_CODES[verdict.status] == 3
