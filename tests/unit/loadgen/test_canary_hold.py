"""The canary shape's hold: a closed-loop stage waits at its planned end for its judgement, and a late
tick (a generator stalled by a busy host) never skips the next stage.

Locust's side runs in a fresh interpreter (tests/unit/loadgen/fresh_interpreter.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.loadgen.fresh_interpreter import run_cases

STEP_S = 6.0

HOLD = """
import json, sys, time
from types import SimpleNamespace
from loadgen.wiring.canary import CanaryShape

STEP_S = 6.0

class Monitor:
    judged = False
    verdict = SimpleNamespace(status="running")
    def stage_judged(self, stage):
        return self.judged

def case(first_tick_s, stage_index, open_loop):
    run = SimpleNamespace(
        scenario=SimpleNamespace(steps=[SimpleNamespace(duration_s=STEP_S)] * 4, is_open_loop=open_loop),
        timeline=SimpleNamespace(current=SimpleNamespace(index=stage_index, end_unix_s=None)),
    )
    shape, monitor, seen = CanaryShape(), Monitor(), []
    shape._stage_end_run_s = STEP_S * (stage_index + 1)  # the stage began on time
    shape.start_time = time.perf_counter() - first_tick_s  # Locust's clock, as if the run began then
    seen.append((shape._holding(run, monitor), shape.get_run_time()))
    time.sleep(0.2)
    seen.append((shape._holding(run, monitor), shape.get_run_time()))
    monitor.judged = True
    seen.append((shape._holding(run, monitor), shape.get_run_time()))
    return seen

print(json.dumps([case(*c) for c in json.loads(sys.argv[1])]))
"""
CASES = [(STEP_S + 0.3, 0, False), (STEP_S + 9.9, 0, False), (STEP_S + 20.0, 0, False),
         (STEP_S - 1.0, 0, False), (100.0, 3, False), (100.0, 0, True)]  # fmt: skip


@pytest.fixture(scope="module")
def seen() -> dict[tuple[float, int, bool], list[tuple[bool, float]]]:
    """Per case (first tick's run time, stage, open loop): (held, the scenario's clock) at the first
    tick, 0.2 s later, and once the stage is judged; every case in one subprocess."""
    results = run_cases(HOLD, CASES)
    return {
        case: [(bool(h), float(c)) for h, c in result] for case, result in zip(CASES, results, strict=True)
    }


@pytest.mark.parametrize("late_s", [0.3, 9.9, 20.0])
def test_a_late_tick_holds_the_clock_at_the_stage_boundary(seen: Any, late_s: float) -> None:
    # the first tick past stage 0's planned end comes late_s after it: 9.9 s is past stage 1's end too
    (held0, clock0), (held1, clock1), (held2, clock2) = seen[(STEP_S + late_s, 0, False)]
    assert held0 and held1 and not held2
    # held: the scenario's clock stands at the boundary, however late the tick came
    assert clock0 == pytest.approx(STEP_S, abs=0.05) and clock1 == pytest.approx(STEP_S, abs=0.05)
    # released at the boundary: the next tick begins stage 1 with its whole duration ahead
    assert STEP_S <= clock2 < STEP_S + 0.1


def test_a_tick_before_the_boundary_does_not_hold(seen: Any) -> None:
    early = seen[(STEP_S - 1.0, 0, False)]
    assert [held for held, _ in early] == [False, False, False]
    assert early[0][1] == pytest.approx(STEP_S - 1.0, abs=0.05)


@pytest.mark.parametrize(("stage_index", "open_loop"), [(3, False), (0, True)])
def test_the_last_stage_and_open_loop_are_never_held(seen: Any, stage_index: int, open_loop: bool) -> None:
    assert [held for held, _ in seen[(100.0, stage_index, open_loop)]] == [False, False, False]
