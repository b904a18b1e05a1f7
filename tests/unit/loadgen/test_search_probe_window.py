"""A probe's bounds on the load side: no arrival starts after its window, and what is still unanswered
when its drain ends is counted (slower than the SLO), not lost."""

from __future__ import annotations

import time
from typing import Any

from decisions.search.stats import judge
from embedperf.schema import RequestRow
from loadgen.shaping.probe_window import ProbeTap, ProbeWindow
from loadgen.traffic.schedule import Arrival
from scenarios.models import Search, Slo


def _row(stage: int, ok: bool, intended: float, latency_ms: float) -> RequestRow:
    return RequestRow(
        stage_index=stage,
        ok=ok,
        t_intended_unix_s=intended,
        t_done_unix_s=intended + latency_ms / 1000.0,
        latency_from_intended_ms=latency_ms,
    )


def test_arrivals_after_the_window_are_kept_aside_not_started() -> None:
    schedule = [Arrival(offset_s=i * 0.1, stage_index=0) for i in range(10)]
    open_window = ProbeWindow(schedule, time.time() + 3600.0, duration_s=1.0)  # its end is far ahead
    assert list(open_window) == schedule and open_window.left_out == []
    assert open_window.started_unix_s == [open_window.t_origin_unix_s + a.offset_s for a in schedule]
    closed = ProbeWindow(schedule, time.time() - 10.0, duration_s=1.0)  # its end has passed
    assert list(closed) == [] and closed.left_out == schedule and closed.started_unix_s == []


def test_requests_unanswered_after_the_drain_count_against_the_probe() -> None:
    sunk: list[list[Any]] = []
    tap = ProbeTap(sunk.append)
    tap.start(3)
    origin = 1000.0
    started = [origin + 1.0 + i * 0.01 for i in range(500)]  # 500 started after a 1 s warm-up
    for t in started[:480]:  # 20 never answered before the cut-off
        tap(_row(3, True, t, 20.0))
    tap(_row(2, True, origin, 5.0))  # a straggler of the previous probe: recorded, not counted here
    m = tap.measurement(100.0, origin, 7.0, 1.0, started, cutoff_unix_s=origin + 9.0)
    assert len(sunk) == 481
    assert m.scheduled == 500 and m.ok == 480 and m.errors == 0 and len(m.unfinished_ms) == 20
    assert min(m.unfinished_ms) == (origin + 9.0 - started[-1]) * 1000.0  # at least cut-off - intended
    spec = Search.model_validate({"start_rate": 100.0, "min_ok_requests": 400, "max_probe_s": 10.0})
    verdict, _, _, (_, lower, _) = judge(m, Slo(p99_ms=100.0), spec)
    assert verdict == "fail" and lower > 100.0  # 4% of the probe is slower than the SLO, not missing
