"""Open-loop dispatch: requests start at their scheduled instants, whatever the responses do. Latency is also
measured from the intended start, so a stalled service cannot hide its queueing (coordinated omission, as in
wrk2); a request that cannot start is recorded as a failed row, never skipped."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import gevent
import gevent.pool
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from loadgen.traffic.context import RunContext, Stage
from loadgen.traffic.exchange import dropped_row, send_embeddings
from loadgen.traffic.payloads import PayloadSampler, RequestPayload
from loadgen.traffic.schedule import Arrival
from loadgen.traffic.shares import share_arrivals

START_LEAD_S = 0.05  # the schedule starts slightly in the future so the first slot is not already late
YIELD_EVERY = 64  # when behind schedule, still let spawned requests run every this many arrivals
DROPPED_CAP = "dropped: in-flight cap"

# Sends one scheduled request (client, context, payload, intended start, stage); a canary splits them.
Send = Callable[[FastHttpSession, RunContext, RequestPayload, float, Stage], Any]


def run_schedule(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment,
    send: Send = send_embeddings,
) -> dict[str, float]:
    """Dispatch the scenario's whole arrival schedule; its counters (scheduled, sent, late, dropped)."""
    scenario = ctx.scenario
    share = ctx.claim_share()  # this process's part of the arrivals (loadgen.traffic.shares), once per run
    stats = ctx.open_loop_stats
    if share is None:
        return stats
    stats.update(new_stats())
    steps, policy = scenario.steps, scenario.open_loop
    pool = gevent.pool.Pool(policy.max_in_flight)
    schedule: Iterable[Arrival] = share_arrivals(steps, policy.arrival, scenario.payload.seed, share)
    if ctx.stage_cuts is not None:  # adaptive steps (steps.until) cut it while it runs
        schedule = ctx.stage_cuts.apply(schedule)
    dispatch(
        client, ctx, sampler, environment, schedule,
        lambda index: (index, steps[index].label, None, steps[index].rate), pool, stats,
        origin_unix_s=share.origin_unix_s, send=send,
    )
    pool.join(timeout=scenario.drain_s + scenario.target.timeout_s)
    return stats


def new_stats() -> dict[str, float]:
    return {"scheduled": 0, "sent": 0, "late": 0, "dropped": 0, "max_lag_ms": 0.0}


def dispatch(
    client: FastHttpSession, ctx: RunContext, sampler: PayloadSampler, environment: Environment,
    schedule: Iterable[Arrival], stage_of: Callable[[int], Stage], pool: gevent.pool.Pool,
    stats: dict[str, float], origin_unix_s: float | None = None, send: Send = send_embeddings,
) -> None:
    """Start each arrival at its instant; returns when all are started. `overflow: queue` waits for a free
    slot (later arrivals start late, as their latency from intended shows); `overflow: drop` records it
    dropped."""
    policy = ctx.scenario.open_loop
    tolerance_s = policy.lateness_tolerance_ms / 1000.0
    queue_overflow = policy.overflow == "queue"
    t_origin = time.time() + START_LEAD_S if origin_unix_s is None else origin_unix_s  # shared by all shares
    p_origin = time.perf_counter() + (t_origin - time.time())
    behind = 0
    for arrival in schedule:
        delay_s = p_origin + arrival.offset_s - time.perf_counter()
        if delay_s > 0:
            gevent.sleep(delay_s)
            behind = 0
        else:
            behind += 1
            if behind % YIELD_EVERY == 0:
                gevent.sleep(0)
        stage = stage_of(arrival.stage_index)
        t_intended = t_origin + arrival.offset_s
        payload = sampler.next()
        lag_s = time.perf_counter() - (p_origin + arrival.offset_s)
        stats["scheduled"] += 1
        stats["max_lag_ms"] = max(stats["max_lag_ms"], lag_s * 1000.0)
        reason = ""
        if pool.full() and not queue_overflow:
            reason = DROPPED_CAP
        elif lag_s > tolerance_s:
            stats["late"] += 1
            if policy.late_policy == "drop":
                reason = f"dropped: late by {lag_s * 1000.0:.0f} ms"
        if reason:
            stats["dropped"] += 1
            dropped_row(ctx, payload, t_intended, reason, stage)
            environment.events.request.fire(
                request_type="POST", name=payload.endpoint, response_time=0, response_length=0, response=None,
                context={}, exception=RuntimeError(reason),
            )
            continue
        stats["sent"] += 1
        pool.spawn(send, client, ctx, payload, t_intended, stage)  # blocks while full (queue)
