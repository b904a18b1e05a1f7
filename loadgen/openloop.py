"""Open-loop dispatch: requests start at their scheduled instants, whatever the responses do.

Latency is also measured from the intended start (`latency_from_intended_ms`), so a stalled
service cannot hide its queueing by slowing the generator down (coordinated omission), as in
wrk2 and MLPerf LoadGen. A request that cannot start -- too many in flight, or later than the
tolerance under `late_policy: drop` -- is recorded as a failed row, never silently skipped.
"""

from __future__ import annotations

import time

import gevent
import gevent.pool
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from loadgen.context import RunContext
from loadgen.exchange import dropped_row, send_embeddings
from loadgen.payloads import PayloadSampler
from loadgen.schedule import arrivals

START_LEAD_S = 0.05  # the schedule starts slightly in the future so the first slot is not already late
YIELD_EVERY = 64  # when behind schedule, still let spawned requests run every this many arrivals
DROPPED_CAP = "dropped: in-flight cap"


def run_schedule(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment
) -> dict[str, float]:
    """Dispatch the scenario's whole arrival schedule; returns counters (scheduled, sent, late, dropped)."""
    scenario = ctx.scenario
    policy = scenario.open_loop
    tolerance_s = policy.lateness_tolerance_ms / 1000.0
    pool = gevent.pool.Pool(policy.max_in_flight)
    stats = ctx.open_loop_stats
    stats.update({"scheduled": 0, "sent": 0, "late": 0, "dropped": 0, "max_lag_ms": 0.0})
    p_origin = time.perf_counter() + START_LEAD_S
    t_origin = time.time() + START_LEAD_S
    behind = 0
    for arrival in arrivals(scenario.steps, policy.arrival, seed=scenario.payload.seed):
        delay_s = p_origin + arrival.offset_s - time.perf_counter()
        if delay_s > 0:
            gevent.sleep(delay_s)
            behind = 0
        else:
            behind += 1
            if behind % YIELD_EVERY == 0:
                gevent.sleep(0)
        step = scenario.steps[arrival.stage_index]
        stage = (arrival.stage_index, step.label, None, step.rate)
        t_intended = t_origin + arrival.offset_s
        payload = sampler.next()
        lag_s = time.perf_counter() - (p_origin + arrival.offset_s)
        stats["scheduled"] += 1
        stats["max_lag_ms"] = max(stats["max_lag_ms"], lag_s * 1000.0)
        reason = ""
        if pool.full():
            reason = DROPPED_CAP
        elif lag_s > tolerance_s:
            stats["late"] += 1
            if policy.late_policy == "drop":
                reason = f"dropped: late by {lag_s * 1000.0:.0f} ms"
        if reason:
            stats["dropped"] += 1
            dropped_row(ctx, payload, t_intended, reason, stage)
            environment.events.request.fire(
                request_type="POST",
                name=payload.endpoint,
                response_time=0,
                response_length=0,
                response=None,
                context={},
                exception=RuntimeError(reason),
            )
            continue
        stats["sent"] += 1
        pool.spawn(send_embeddings, client, ctx, payload, t_intended, stage)
    pool.join(timeout=scenario.drain_s + scenario.target.timeout_s)
    return stats
