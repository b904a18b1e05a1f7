"""Adaptive steps: the watch ends a step once its P99 interval is narrow enough, and the shape moves on then.

The shape's side runs in a fresh interpreter (tests/unit/loadgen/fresh_interpreter.py), its clock stood in for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from decisions.search.stats import QUANTILE, ordered_dependence_factor, quantile_ci
from embedperf.errors import ConfigError
from embedperf.schema import REQUEST_COLUMNS
from loadgen.lifecycle.options import until_overrides
from loadgen.recording.until_watch import UntilWatch
from loadgen.traffic.schedule import StageCuts, arrivals
from scenarios.models import Scenario
from scenarios.until_models import Until
from tests.unit.loadgen.fresh_interpreter import run_cases

UNTIL = Until(p99_rel_width=0.2, min_requests=400, min_s=2.0)


def row(
    stage: int, sent: float, latency_ms: float, ok: bool = True, endpoint: str = "embeddings"
) -> list[Any]:
    values: dict[str, Any] = dict.fromkeys(REQUEST_COLUMNS)
    values |= {
        "stage_index": stage,
        "t_sent_unix_s": sent,
        "latency_ms": latency_ms,
        "ok": ok,
        "endpoint": endpoint,
    }
    return [values[c] for c in REQUEST_COLUMNS]


def test_a_step_converges_once_enough_answers_bound_its_p99_narrowly() -> None:
    watch = UntilWatch()
    watch.begin(0, start_unix_s=100.0, warmup_s=1.0, until=UNTIL)
    latencies = np.random.default_rng(3).lognormal(3.0, 0.2, 5000)
    watch.observe(row(0, 100.5, 9999.0))  # in the warm-up: never counted
    watch.observe(row(1, 102.0, 9999.0))  # another step's row
    watch.observe(row(0, 102.0, 9999.0, ok=False))  # a failure
    watch.observe(row(0, 102.0, 9999.0, endpoint="validation:empty"))  # an edge-case probe
    for latency in latencies[:300]:
        watch.observe(row(0, 102.0, float(latency)))
    assert watch.converged(110.0) is None  # 300 < min_requests
    for latency in latencies[300:]:
        watch.observe(row(0, 102.0, float(latency)))
    assert watch.converged(102.5) is None  # before min_s after the warm-up
    ending = watch.converged(110.0)
    assert ending is not None and ending.reason == "converged" and ending.n_ok == 5000
    dependence = ordered_dependence_factor(latencies.tolist(), QUANTILE)  # in arrival order: same sent time
    point, low, high = quantile_ci(latencies.tolist(), QUANTILE, 0.95, dependence)  # the search's statistic
    assert (ending.p99_ms, ending.p99_ci_low_ms, ending.p99_ci_high_ms) == (point, low, high)
    assert ending.dependence == round(dependence, 3)
    assert ending.rel_width is not None and ending.rel_width <= UNTIL.p99_rel_width


def test_a_wide_interval_keeps_the_step_going_and_max_time_says_so() -> None:
    watch = UntilWatch()
    watch.begin(
        0, start_unix_s=0.0, warmup_s=0.0, until=Until(p99_rel_width=0.01, min_requests=400, min_s=1.0)
    )
    for latency in np.random.default_rng(1).pareto(1.5, 500) * 10.0:
        watch.observe(row(0, 1.0, float(latency)))
    assert watch.converged(10.0) is None
    ending = watch.timed_out()
    assert ending is not None and ending.reason == "max_time" and not ending.converged
    assert ending.rel_width is not None and ending.rel_width > 0.01


def test_answers_slow_together_keep_the_step_going_where_independent_ones_would_stop_it() -> None:
    """The same 5,000 latencies, once shuffled and once with the slow ones in bursts of 50 (as a slow
    batch on a batching server gives): the burst run is worth far fewer answers and does not converge."""
    rng = np.random.default_rng(5)
    latencies = np.sort(rng.lognormal(3.0, 0.2, 5000))
    bursts = latencies[:-100].copy()
    rng.shuffle(bursts)
    slow = latencies[-100:]
    bursty = np.concatenate([bursts[:2000], slow[:50], bursts[2000:], slow[50:]])  # two bursts of 50
    independent = latencies.copy()
    rng.shuffle(independent)
    endings = []
    for order in (independent, bursty):
        watch = UntilWatch()
        watch.begin(0, start_unix_s=0.0, warmup_s=0.0, until=UNTIL)
        for i, latency in enumerate(order):
            watch.observe(row(0, 1.0 + i * 0.001, float(latency)))
        endings.append((watch.converged(100.0), watch.measure()))
    (converged, independent_ending), (not_converged, bursty_ending) = endings
    assert converged is not None and not_converged is None
    assert independent_ending is not None and bursty_ending is not None
    assert independent_ending.dependence < 2.0 < 20.0 < bursty_ending.dependence


def test_a_fixed_step_is_never_watched() -> None:
    watch = UntilWatch()
    watch.begin(0, 0.0, 0.0, None)
    watch.observe(row(0, 1.0, 5.0))
    assert watch.converged(100.0) is None and watch.timed_out() is None


def test_until_shorthand_and_validation() -> None:
    assert until_overrides("p99_rel_width=0.1, min_s=3") == {
        "steps.until.p99_rel_width": "0.1",
        "steps.until.min_s": "3",
    }
    with pytest.raises(ConfigError, match="--until expects KEY=VALUE"):
        until_overrides("0.1")
    with pytest.raises(ValueError, match="min_requests"):
        Until(p99_rel_width=0.1, min_requests=100)
    with pytest.raises(ValueError, match="exceeds the step's longest time"):
        Scenario.model_validate(
            {
                "name": "x",
                "kind": "ramp",
                "steps": [{"users": 1, "duration_s": 5, "until": {"p99_rel_width": 0.1, "min_s": 10}}],
            }
        )


TICKS = """
import json, sys
from types import SimpleNamespace
import numpy as np
from embedperf.schema import REQUEST_COLUMNS
from loadgen.recording.until_watch import UntilWatch
from loadgen.traffic.schedule import StageCuts, arrivals
from loadgen.wiring import shapes
from scenarios.until_models import Until

class Clock:
    now_s = 1000.0
    def time(self):
        return self.now_s

clock = Clock()
shapes.time = clock  # the shape reads the wall clock through its module's `time`

class Timeline:
    def __init__(self):
        self.events = []
    def begin(self, index, label, t_unix_s, **_):
        self.events.append(["begin", index, t_unix_s - 1000.0])
    def end(self, t_unix_s):
        self.events.append(["end", t_unix_s - 1000.0])
    def record_ending(self, index, ending):
        self.events.append(["ending", index, ending.reason])

class Shape(shapes.ScenarioShape):
    def get_run_time(self):
        return clock.now_s - 1000.0

def row(stage, sent, latency_ms):
    values = dict.fromkeys(REQUEST_COLUMNS)
    values.update(stage_index=stage, t_sent_unix_s=sent, latency_ms=latency_ms, ok=True, endpoint="embeddings")
    return [values[c] for c in REQUEST_COLUMNS]

def case(spread):
    until = Until(p99_rel_width=0.2, min_requests=400, min_s=2.0)
    steps = [SimpleNamespace(duration_s=30.0, label=f"u{n}", users=n, rate=None, warmup_s=1.0, spawn_rate=None,
                             until=until) for n in (1, 2)]
    run = SimpleNamespace(scenario=SimpleNamespace(steps=steps), timeline=Timeline(), shape_completed=False,
                          until=UntilWatch())
    shape, rng = Shape(), np.random.default_rng(0)
    for t in range(0, 70):
        clock.now_s = 1000.0 + t
        shape._closed_loop_tick(run)
        stage = shape._stage_index
        for latency in rng.lognormal(3.0, spread, 200):  # 200 answers a second, sent this second
            run.until.observe(row(stage, clock.now_s, float(latency)))
        if run.shape_completed:
            break
    return run.timeline.events

print(json.dumps([case(spread) for spread in json.loads(sys.argv[1])]))
"""


def test_the_shape_ends_a_converged_step_early_and_a_noisy_one_at_its_longest_time() -> None:
    narrow, wide = run_cases(TICKS, [0.1, 3.0])
    # 200 answers/s: 400 after the 1 s warm-up by t = 3 s, the interval checked then: converged well before 30 s
    begins = [e for e in narrow if e[0] == "begin"]
    assert [e[2] for e in begins][0] == 0.0 and begins[1][2] < 10.0
    assert ["ending", 0, "converged"] in narrow and ["ending", 1, "converged"] in narrow
    assert narrow[-1][0] == "end" and narrow[-1][1] < 20.0
    # a heavy tail never narrows to 20 %: each step runs its whole 30 s and says so
    assert ["ending", 0, "max_time"] in wide and ["ending", 1, "max_time"] in wide
    assert [e[2] for e in wide if e[0] == "begin"] == [0.0, 30.0] and wide[-1] == ["end", 60.0]


def test_stage_cuts_drop_the_rest_of_a_step_and_move_the_later_ones_up() -> None:
    steps = Scenario.model_validate(
        {
            "name": "x",
            "kind": "openloop",
            "steps": [{"rate": 10, "duration_s": 30}, {"rate": 20, "duration_s": 30}],
        }
    ).steps
    cuts = StageCuts(steps)
    schedule = iter(arrivals(steps, "constant"))
    applied = cuts.apply(schedule)
    first = [next(applied) for _ in range(50)]  # 5 s of step 0, taken before any cut
    cuts.cut(0, 8.0)  # step 0 ends at 8 s of its planned 30
    rest = list(applied)
    assert [a.offset_s for a in first][-1] == 4.9 and all(a.stage_index == 0 for a in first)
    step0 = [a for a in rest if a.stage_index == 0]
    step1 = [a for a in rest if a.stage_index == 1]
    assert len(first) + len(step0) == 80 and max(a.offset_s for a in step0) < 8.0
    assert (
        len(step1) == 600 and step1[0].offset_s == 8.0 and step1[-1].offset_s == pytest.approx(8.0 + 599 / 20)
    )
    assert cuts.starts_s() == [0.0, 8.0] and cuts.end_s() == 38.0
    cuts.cut(1, 70.0)  # at or past its planned end: no cut
    assert 1 not in cuts.cut_s


OPEN_TICKS = """
import json, sys
from types import SimpleNamespace
import numpy as np
from embedperf.schema import REQUEST_COLUMNS
from loadgen.recording.until_watch import UntilWatch
from loadgen.traffic.schedule import StageCuts, arrivals
from loadgen.traffic.schedule import StageCuts
from loadgen.wiring import shapes
from scenarios.models import Scenario

class Clock:
    now_s = 1000.0
    def time(self):
        return self.now_s

clock = Clock()
shapes.time = clock

class Timeline:
    def __init__(self):
        self.events = []
    def begin(self, index, label, t_unix_s, **_):
        self.events.append(["begin", index, round(t_unix_s - 1000.0, 3)])
    def end(self, t_unix_s):
        self.events.append(["end", round(t_unix_s - 1000.0, 3)])
    def record_ending(self, index, ending):
        self.events.append(["ending", index, ending.reason])

def row(stage, sent, latency_ms):
    values = dict.fromkeys(REQUEST_COLUMNS)
    values.update(stage_index=stage, t_sent_unix_s=sent, latency_ms=latency_ms, ok=True, endpoint="embeddings")
    return [values[c] for c in REQUEST_COLUMNS]

def case(spread):
    until = {"p99_rel_width": 0.2, "min_requests": 400, "min_s": 2.0}
    scenario = Scenario.model_validate({"name": "x", "kind": "openloop", "drain_s": 0.0, "steps": [
        {"rate": 200, "duration_s": 30, "warmup_s": 1, "until": until},
        {"rate": 200, "duration_s": 30, "warmup_s": 1, "until": until}]})
    cuts = StageCuts(scenario.steps)

    class Shape(shapes.ScenarioShape):
        def _publish_origin(self):
            return 1000.0
        def _stage_cuts(self, run):
            return cuts

    run = SimpleNamespace(scenario=scenario, timeline=Timeline(), shape_completed=False, until=UntilWatch())
    shape, rng = Shape(), np.random.default_rng(0)
    for t in range(0, 70):
        clock.now_s = 1000.0 + t
        if shape._open_loop_tick(run) is None:
            break
        for latency in rng.lognormal(3.0, spread, 200):
            run.until.observe(row(shape._stage_index, clock.now_s, float(latency)))
    return {"events": run.timeline.events, "cuts": cuts.cut_s}

print(json.dumps([case(spread) for spread in json.loads(sys.argv[1])]))
"""


def test_the_open_loop_shape_cuts_a_known_step_and_moves_the_schedule_up() -> None:
    narrow, wide = run_cases(OPEN_TICKS, [0.1, 3.0])
    events = narrow["events"]
    assert ["ending", 0, "converged"] in events and ["ending", 1, "converged"] in events
    begin1 = next(e for e in events if e[:2] == ["begin", 1])
    cut0 = narrow["cuts"]["0"]
    assert begin1[2] == cut0 < 10.0  # step 1 starts where step 0 was cut, 1 s after the decision
    assert events[-1][0] == "end" and events[-1][1] < 20.0
    assert (
        wide["cuts"] == {}
        and ["ending", 0, "max_time"] in wide["events"]
        and ["ending", 1, "max_time"] in wide["events"]
    )
    assert [e[2] for e in wide["events"] if e[0] == "begin"] == [0.0, 30.0] and wide["events"][-1] == [
        "end",
        60.0,
    ]


def test_a_decision_waits_for_the_slow_answers_of_the_requests_sent_last() -> None:
    """Requests sent in the last moments whose slow answers are still out: the fast answers that did come
    back alone are left out of the decision, so they cannot make the step look faster than it is."""
    watch = UntilWatch()
    watch.begin(0, start_unix_s=0.0, warmup_s=0.0, until=Until(p99_rel_width=0.5, min_requests=400, min_s=1.0))
    rng = np.random.default_rng(8)
    for i, latency in enumerate(rng.lognormal(3.0, 0.2, 2000)):  # sent over 0..20 s, all answered
        watch.observe(row(0, i * 0.01, float(latency)))
    settled = watch.measure()
    for i in range(0, 500, 10):  # sent over 21.5..22 s: a fast tenth answered, the rest still out at 22.1 s
        watch.observe(row(0, 21.5 + i * 0.001, 5.0))
    everything = watch.measure()  # all that came back, as if nothing were still out
    at_22 = watch.converged(22.1)
    assert settled is not None and everything is not None and at_22 is not None
    assert at_22.n_ok == settled.n_ok == 2000 and everything.n_ok == 2050  # the 50 fast answers wait
    assert at_22.p99_ms == settled.p99_ms
