"""Capacity search driver: runs the open-loop probes decisions.search.state asks for, each one a stage.

Probes go through the stepped runs' dispatcher and recorder; a tap on the row sink keeps what the next
decision needs, and the answer lands in `RunContext.search` (manifest.search). No request starts after a
probe's window; answers in flight get the scenario's `drain_s`, and one unanswered by then counts as slower
than the SLO (its row still lands under its probe). Before the next probe the driver waits (at most
target.timeout_s) for such stragglers."""

from __future__ import annotations

import time

import gevent.pool
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from decisions.search.state import ProbeMeasurement, ProbePlan, SearchState
from embedperf.errors import ConfigError
from loadgen.lifecycle.run_state import state_of
from loadgen.shaping.openloop import START_LEAD_S, Stage, dispatch, new_stats
from loadgen.shaping.probe_window import ProbeTap, ProbeWindow
from loadgen.traffic.context import RunContext
from loadgen.traffic.exchange import dropped_row
from loadgen.traffic.payloads import PayloadSampler
from loadgen.traffic.schedule import arrivals
from scenarios.models import Step

WINDOW_ENDED = "dropped: the probe's window ended before it could start"


def run_search(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment
) -> dict[str, float]:
    """Probe until the search is decided; every probe is one stage (index = run order)."""
    scenario = ctx.scenario
    spec = scenario.search
    run = state_of(environment).current_session()
    if run is None:
        raise ConfigError(
            "search runs in the process that writes the run folder; run it without Locust workers "
            "(distributed search is not supported)"
        )
    state = SearchState(spec, scenario.slo, scenario.open_loop.arrival)  # ConfigError when infeasible
    if state.limits.min_rate_raised:
        print(
            f"search: min_rate {spec.min_rate:g} req/s raised to {state.limits.min_rate:.3g} req/s: "
            f"{state.limits.floor_reason(spec)}", flush=True,
        )
    tap = ProbeTap(ctx.sink)
    ctx.sink = tap
    stats = ctx.open_loop_stats
    stats.update(new_stats())
    pool = gevent.pool.Pool(scenario.open_loop.max_in_flight)
    t_start = time.time()
    index = 0
    try:
        while (plan := state.next_probe(time.time() - t_start)) is not None:
            m = _probe(client, ctx, sampler, environment, pool, stats, tap, plan, index)
            probe = state.add(plan, index, f"{plan.phase}:{plan.rate:g}", m)
            print(
                f"search probe {index}: {plan.phase} {plan.rate:g} req/s -> {probe.verdict} ({probe.reason})",
                flush=True,
            )
            pool.join(timeout=scenario.target.timeout_s)  # stragglers end before the next probe starts
            index += 1
    finally:
        ctx.sink = tap.sink
        ctx.search = state.record.model_dump(mode="json")
    return stats


def _probe(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment,
    pool: gevent.pool.Pool, stats: dict[str, float], tap: ProbeTap, plan: ProbePlan, index: int,
) -> ProbeMeasurement:
    """One probe: its arrivals within its window, then at most drain_s for the answers in flight."""
    scenario, spec = ctx.scenario, ctx.scenario.search
    run = state_of(environment).current_session()
    assert run is not None
    label = f"{plan.phase}:{plan.rate:g}"
    step = Step.model_validate(
        {"label": label, "rate": plan.rate, "duration_s": plan.duration_s, "warmup_s": spec.warmup_s}
    )
    stage: Stage = (index, label, None, plan.rate)
    tap.start(index)
    t_origin = time.time() + START_LEAD_S
    run.timeline.begin(index, label, t_origin, rate=plan.rate, warmup_s=spec.warmup_s)
    schedule = arrivals([step], scenario.open_loop.arrival, seed=scenario.payload.seed + index)
    window = ProbeWindow(schedule, t_origin, plan.duration_s)
    dispatch(client, ctx, sampler, environment, window, lambda _: stage, pool, stats, origin_unix_s=t_origin)
    for arrival in window.left_out:
        stats["scheduled"] += 1
        stats["dropped"] += 1
        dropped_row(ctx, sampler.next(), t_origin + arrival.offset_s, WINDOW_ENDED, stage)
    gevent.sleep(max(0.0, window.end_unix_s - time.time()))
    run.timeline.end(window.end_unix_s)
    pool.join(timeout=scenario.drain_s)
    return tap.measurement(plan.rate, t_origin, plan.duration_s, spec.warmup_s, window.started_unix_s, time.time())
