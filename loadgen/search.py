"""Capacity search driver: runs the open-loop probes analysis.search asks for, each one a stage of the run.

The probes go through the same dispatcher as stepped open-loop runs (loadgen.openloop) and
their rows through the same recorder; a tap on the row sink keeps the few figures the next
decision needs (ok, latency from intended, done time) for the probe in progress. The answer
lands in `RunContext.search`, which the run session writes into manifest.search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gevent.pool
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from analysis.search import ProbeMeasurement, SearchState
from embedperf.errors import ConfigError
from embedperf.schema import REQUEST_COLUMNS
from loadgen import session
from loadgen.context import RunContext
from loadgen.openloop import START_LEAD_S, Stage, dispatch, new_stats
from loadgen.payloads import PayloadSampler
from loadgen.schedule import arrivals
from scenarios.models import Step

_STAGE = REQUEST_COLUMNS.index("stage_index")
_OK = REQUEST_COLUMNS.index("ok")
_INTENDED = REQUEST_COLUMNS.index("t_intended_unix_s")
_DONE = REQUEST_COLUMNS.index("t_done_unix_s")
_LATENCY = REQUEST_COLUMNS.index("latency_from_intended_ms")


class ProbeTap:
    """Sits between the dispatcher and the recorder; keeps the current probe's rows' key figures."""

    def __init__(self, sink: Callable[[list[Any]], None]) -> None:
        self.sink = sink
        self.stage_index = -1
        self.rows: list[tuple[bool, float, float | None, float | None]] = []

    def __call__(self, row: list[Any]) -> None:
        if row[_STAGE] == self.stage_index:
            self.rows.append((bool(row[_OK]), row[_INTENDED], row[_DONE], row[_LATENCY]))
        self.sink(row)

    def start(self, stage_index: int) -> None:
        self.stage_index = stage_index
        self.rows = []

    def measurement(
        self, rate: float, t_origin_unix_s: float, duration_s: float, warmup_s: float
    ) -> ProbeMeasurement:
        """The probe's figures in its steady window (after the warm-up, to its scheduled end).

        Requests count by intended start; goodput counts ok answers that completed inside the
        window, so a target that falls behind shows a goodput below the offered rate.
        """
        steady_from = t_origin_unix_s + warmup_s
        steady_to = t_origin_unix_s + duration_s
        steady = [r for r in self.rows if r[1] >= steady_from]
        ok = [r for r in steady if r[0]]
        return ProbeMeasurement(
            rate=rate,
            duration_s=duration_s - warmup_s,
            scheduled=len(steady),
            ok=len(ok),
            errors=len(steady) - len(ok),
            ok_done=sum(
                1 for r in self.rows if r[0] and r[2] is not None and steady_from <= r[2] <= steady_to
            ),
            ok_latency_ms=[r[3] for r in ok if r[3] is not None],
        )


def run_search(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment
) -> dict[str, float]:
    """Probe until the search is decided; every probe is one stage (index = run order)."""
    scenario = ctx.scenario
    spec = scenario.search
    run = session.current_session()
    if run is None:
        raise ConfigError(
            "search runs in the process that writes the run folder; run it without Locust workers "
            "(distributed search is not supported)"
        )
    state = SearchState(spec, scenario.slo, scenario.open_loop.arrival)
    tap = ProbeTap(ctx.sink)
    ctx.sink = tap
    stats = ctx.open_loop_stats
    stats.update(new_stats())
    pool = gevent.pool.Pool(scenario.open_loop.max_in_flight)
    t_start = time.time()
    index = 0
    try:
        while (plan := state.next_probe(time.time() - t_start)) is not None:
            label = f"{plan.phase}:{plan.rate:g}"
            step = Step.model_validate(
                {"label": label, "rate": plan.rate, "duration_s": plan.duration_s, "warmup_s": spec.warmup_s}
            )
            stage: Stage = (index, label, None, plan.rate)

            def stage_of(_index: int, stage: Stage = stage) -> Stage:
                return stage

            tap.start(index)
            t_origin = time.time() + START_LEAD_S
            run.timeline.begin(index, label, t_origin, rate=plan.rate, warmup_s=spec.warmup_s)
            schedule = arrivals([step], scenario.open_loop.arrival, seed=scenario.payload.seed + index)
            dispatch(client, ctx, sampler, environment, schedule, stage_of, pool, stats)
            gevent.sleep(max(0.0, t_origin + plan.duration_s - time.time()))
            run.timeline.end(t_origin + plan.duration_s)
            pool.join(timeout=scenario.drain_s + scenario.target.timeout_s)
            m = tap.measurement(plan.rate, t_origin, plan.duration_s, spec.warmup_s)
            probe = state.add(plan, index, label, m)
            print(
                f"search probe {index}: {plan.phase} {plan.rate:g} req/s -> {probe.verdict} ({probe.reason})",
                flush=True,
            )
            index += 1
    finally:
        ctx.sink = tap.sink
        ctx.search = state.record.model_dump(mode="json")
    return stats
