"""Open loop `overflow: queue` (requests wait on the client, as wrk2) and linear rate ramps."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedperf.schema import read_requests_table
from loadgen.cli.runner import run_scenario
from loadgen.processes.stub_target import running_stub
from loadgen.traffic.schedule import arrivals
from scenarios.models import Step


def test_queue_overflow_waits_instead_of_dropping(tmp_path: Path) -> None:
    # 5 slots x 300 ms serve ~16 req/s; 50 req/s for 2 s queues most requests on the client
    with running_stub("--delay-ms", "300") as url:
        folder = run_scenario(
            "openloop",
            host=url,
            runs_dir=tmp_path,
            overrides={
                "steps": "[{rate: 50, duration_s: 2}]",
                "open_loop.max_in_flight": "5",
                "open_loop.arrival": "constant",
                "open_loop.overflow": "queue",
                "drain_s": "10",
            },
            collectors=False,
            timeout_s=120,
        )
    rows = read_requests_table(folder).to_pylist()
    assert len(rows) == 100 and all(r["ok"] for r in rows), {r["error"] for r in rows}
    waits = [r["latency_from_intended_ms"] - r["latency_ms"] for r in rows]
    assert max(r["latency_ms"] for r in rows) < 2000  # on the wire: about the service time
    assert max(waits) > 2000  # the client-side wait is in the latency from the intended start
    last = max(rows, key=lambda r: r["t_intended_unix_s"])
    assert last["latency_from_intended_ms"] > 2000


@pytest.mark.quick  # the schedule alone: no process
def test_ramp_moves_the_rate_linearly_from_the_previous_step() -> None:
    steps = [Step(rate=10, duration_s=10), Step(rate=110, duration_s=20, ramp_s=10)]
    got = [a for a in arrivals(steps, "constant") if a.stage_index == 1]
    # 10 s ramp 10 -> 110 req/s (600 expected) then 10 s at 110 (1100)
    assert len(got) == pytest.approx(1700, abs=2)
    first_s = [a.offset_s - 10 for a in got if a.offset_s < 11]
    last_s = [a.offset_s for a in got if 19 <= a.offset_s < 20]
    assert len(first_s) == pytest.approx(15, abs=2)  # mean rate over the ramp's first second: 15 req/s
    assert len(last_s) == pytest.approx(105, abs=2)
    poisson = [a for a in arrivals(steps, "poisson", seed=4) if a.stage_index == 1]
    assert len(poisson) == pytest.approx(1700, rel=0.08)
    assert all(10 <= a.offset_s < 30 for a in poisson)


@pytest.mark.quick  # the schedule alone: no process
def test_ramp_from_zero_on_the_first_step() -> None:
    got = list(arrivals([Step(rate=100, duration_s=4, ramp_s=4)], "constant"))
    assert len(got) == pytest.approx(200, abs=1)
    gaps = [b.offset_s - a.offset_s for a, b in zip(got, got[1:], strict=False)]
    assert gaps[0] > gaps[-1] * 5  # sparse at the start, dense at the end
