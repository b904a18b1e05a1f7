"""`make bench-teardown`: what a request sees right after 1,000 connections close at once (the end of a load).

Per round, wrk loads the service at --connections for a few seconds, then exits and every connection closes.
Rounds alternate between two measurements of that moment, as one would disturb the other:
- stall rounds: GET /health back to back on a kept-alive connection for 150 ms from wrk's exit. Printed:
  the slowest answer and how long after the exit /health answered within 5 ms again (the event loop's
  teardown of the closed connections);
- first-request rounds: one embedding request on a new connection as soon as wrk has exited. Printed: its
  latency and Server-Timing split, against the same request's idle latency (alone on a new connection,
  median of 7 before the rounds; target <= 1.5x, as `make bench-overload`), and the same request sent alone
  after the round's pause.
wrk (Debian package `wrk`, `make system-deps`) drives the load; the service runs as a ServiceProcess.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
from bench_overload import (
    NORMAL_LATENCY_FACTOR,
    add_round_options,
    idle_references,
    in_service,
    lone_request,
    normal_latency_verdict,
    run_wrk,
    timed_post,
    wrk_found,
    wrk_service,
)

STALL_WINDOW_S = 0.15
RESPONSIVE_MS = 5.0


def health_after_exit(client: httpx.Client, url: str) -> list[tuple[float, float]]:
    """(sent at, ms after wrk's exit; latency_ms) of /health requests sent back to back for STALL_WINDOW_S."""
    t_exit_s = time.perf_counter()
    samples = []
    while time.perf_counter() - t_exit_s < STALL_WINDOW_S:
        t_start_s = time.perf_counter()
        client.get(f"{url}/health")
        samples.append(((t_start_s - t_exit_s) * 1000, (time.perf_counter() - t_start_s) * 1000))
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The service right after a load's connections all close (rounds alternate: stall, first request)."
    )
    add_round_options(parser, rounds=8, load_s=5, pause_help="idle time after each round")
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with wrk_service(args) as (service, script):
        idle_ms, lone_ref_ms = idle_references(service.url)
        stalls_ms: list[float] = []
        firsts_ms: list[float] = []
        lones_ms: list[float] = []
        met = 0
        for index in range(args.rounds):
            stall_round = index % 2 == 0
            with httpx.Client(timeout=30) as client:
                if stall_round:
                    client.get(f"{service.url}/health")  # the probe's connection, opened before the load
                run_wrk(service.url, script, args.connections, args.load_s, 2)
                if stall_round:
                    samples = health_after_exit(client, service.url)
                else:
                    status, latency_ms, timing = timed_post(client, service.url)
            if stall_round:
                slowest_ms = max(ms for _, ms in samples)
                back_ms = next((sent for sent, ms in samples if ms <= RESPONSIVE_MS), float("nan"))
                stalls_ms.append(slowest_ms)
                print(
                    f"round {index} (stall): slowest /health {slowest_ms:.1f} ms; /health within "
                    f"{RESPONSIVE_MS:g} ms again from +{back_ms:.0f} ms after wrk's exit",
                    flush=True,
                )
            else:
                firsts_ms.append(latency_ms)
                met += status == 200 and latency_ms <= NORMAL_LATENCY_FACTOR * lone_ref_ms
                print(
                    f"round {index} (first request): {status} in {latency_ms:.1f} ms{in_service(timing)} "
                    f"({normal_latency_verdict(status, latency_ms, lone_ref_ms, idle_ms)})",
                    flush=True,
                )
            time.sleep(args.pause_s)
            if not stall_round:  # the like-for-like reference: alone, on a new connection, no load before
                lone_ms, lone_timing = lone_request(service.url)
                lones_ms.append(lone_ms)
                print(
                    f"    the same request alone {args.pause_s:g} s later: {lone_ms:.1f} ms{in_service(lone_timing)}",
                    flush=True,
                )
        print(
            f"\n{args.connections} connections closing at once: slowest /health median "
            f"{statistics.median(stalls_ms):.1f} ms, max {max(stalls_ms):.1f} ms; first request median "
            f"{statistics.median(firsts_ms):.1f} ms, max {max(firsts_ms):.1f} ms, {met}/{len(firsts_ms)} 200s within "
            f"{NORMAL_LATENCY_FACTOR:g}x the same request alone on the idle service ({lone_ref_ms:.1f} ms; "
            f"warm median {idle_ms:.1f} ms); the same request alone after "
            f"{args.pause_s:g} s without load: median {statistics.median(lones_ms):.1f} ms, "
            f"max {max(lones_ms):.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
