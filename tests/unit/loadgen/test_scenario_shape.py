"""The closed-loop ramp: every step runs, each for its whole duration, however late the shape's ticks
come (a generator starved by a busy host ticks late, not at 1 Hz).

Locust's side runs in a fresh interpreter (tests/unit/loadgen/fresh_interpreter.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.loadgen.fresh_interpreter import run_cases

STEP_S = 2.0

TICKS = """
import json, sys
from types import SimpleNamespace
from loadgen.recording.until_watch import UntilWatch
from loadgen.wiring.shapes import ScenarioShape

STEP_S = 2.0

class Timeline:
    def __init__(self):
        self.events = []
    def begin(self, index, label, t_unix_s, **_):
        self.events.append(["begin", index, label])
    def end(self, t_unix_s):
        self.events.append(["end"])

class Clock(ScenarioShape):
    now_s = 0.0
    def get_run_time(self):
        return self.now_s

def case(times_s):
    steps = [SimpleNamespace(duration_s=STEP_S, label=f"u{n}", users=n, rate=None, warmup_s=0.0, spawn_rate=None,
                             until=None) for n in (1, 2, 4)]
    run = SimpleNamespace(scenario=SimpleNamespace(steps=steps), timeline=Timeline(), shape_completed=False,
                          until=UntilWatch())
    shape, answers = Clock(), []
    for now_s in times_s:
        shape.now_s = now_s
        answers.append([now_s, shape._closed_loop_tick(run)])
    return {"answers": answers, "events": run.timeline.events, "completed": run.shape_completed}

print(json.dumps([case(times_s) for times_s in json.loads(sys.argv[1])]))
"""
ON_TIME = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
LATE_TICKS_S = [4.5, 7.5, 30.0]


def late(late_tick_s: float) -> list[float]:
    """The second tick comes long after step u1's end: past u2's planned end (4 s), or the whole ramp's (6 s)."""
    return [0.0, late_tick_s, late_tick_s + 1.0, late_tick_s + STEP_S, late_tick_s + 2 * STEP_S]


@pytest.fixture(scope="module")
def seen() -> dict[tuple[float, ...], dict[str, Any]]:
    """Per list of tick times: the shape's answers, the stages it began and ended; every case in one subprocess."""
    cases = [ON_TIME, *(late(t) for t in LATE_TICKS_S)]
    results = run_cases(TICKS, cases)
    return {tuple(case): result for case, result in zip(cases, results, strict=True)}


def test_on_time_ticks_run_each_step_for_its_duration(seen: Any) -> None:
    ran = seen[tuple(ON_TIME)]
    assert ran["events"] == [["begin", 0, "u1"], ["begin", 1, "u2"], ["begin", 2, "u4"], ["end"]]
    users = [answer[0] if answer else None for _, answer in ran["answers"]]
    assert users == [1, 1, 2, 2, 4, 4, None]
    assert ran["completed"]


@pytest.mark.parametrize("late_tick_s", LATE_TICKS_S)
def test_a_late_tick_delays_the_next_step_and_never_skips_one(seen: Any, late_tick_s: float) -> None:
    ran = seen[tuple(late(late_tick_s))]
    assert ran["events"] == [["begin", 0, "u1"], ["begin", 1, "u2"], ["begin", 2, "u4"], ["end"]]
    users = [answer[0] if answer else None for _, answer in ran["answers"]]
    # u2 begins at the late tick and holds its 2 users for its whole duration, then u4 for its whole duration
    assert users == [1, 2, 2, 4, None]
