"""`make bench-burst`: 429 latency inside the opening burst of a 1,000-connection load, over many bursts.

`make bench-overload` sends 16 dense requests into one opening burst per load level; a burst's outcome
varies from one to the next, so this repeats it: per round, 16 requests on kept-alive connections are sent
10-130 ms after wrk is launched at 1,000 connections for a few seconds, then the load stops and drains.
Printed per round: statuses and the slowest 429; at the end, how many of all 429s took over 50 ms.
wrk (Debian package `wrk`, `make system-deps`) drives the load; the service runs as a ServiceProcess.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from bench_overload import (
    BurstProbe,
    add_round_options,
    idle_latency_ms,
    run_wrk,
    wrk_found,
    wrk_service,
)

REJECTION_TARGET_MS = 50.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="429 latency inside the opening burst of a load, repeated.")
    add_round_options(parser, rounds=12, load_s=3, pause_help="idle time before each round")
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with wrk_service(args) as (service, script):
        idle_latency_ms(service.url)
        run_wrk(service.url, script, 128, 4, 2)  # the service's per-input time estimate, as under load
        rejections_ms: list[float] = []
        for index in range(args.rounds):
            time.sleep(args.pause_s)
            burst = BurstProbe(service.url)
            burst.arm()
            t_load_s = time.perf_counter()
            wrk = subprocess.Popen(
                ["wrk", "-t2", f"-c{args.connections}", f"-d{args.load_s}s", "--timeout", "10s"]
                + ["-s", str(script), f"{service.url}/v1/embeddings"],
                stdout=subprocess.DEVNULL,
            )
            burst.fire(t_load_s)
            burst.join()
            wrk.wait(timeout=args.load_s + 60)
            statuses = [status for status, _, _ in burst.samples]
            rejected = [ms for status, ms, _ in burst.samples if status == 429]
            rejections_ms += rejected
            slow = "".join(
                f"; {ms:.0f} ms sent at +{sent:.0f} ms"
                for status, ms, sent in sorted(burst.samples, key=lambda sample: sample[2])
                if status == 429 and ms > REJECTION_TARGET_MS
            )
            print(
                f"burst {index}: statuses {dict(sorted((s, statuses.count(s)) for s in set(statuses)))}; "
                f"slowest 429 {max(rejected, default=float('nan')):.1f} ms{slow}",
                flush=True,
            )
        over = sum(1 for ms in rejections_ms if ms > REJECTION_TARGET_MS)
        print(
            f"\n{args.rounds} bursts of {args.connections} connections: {over}/{len(rejections_ms)} 429s over "
            f"{REJECTION_TARGET_MS:.0f} ms (target 0), max {max(rejections_ms, default=float('nan')):.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
