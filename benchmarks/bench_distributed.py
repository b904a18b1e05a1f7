"""Distributed load generation benchmark: achieved open-loop rate with 1, 2 and 4 workers, and row forwarding.

`rate`: `embedperf run openloop --workers N` against the loopback stub (a fixed-delay server) at a
target rate, constant and Poisson arrivals; prints per run the achieved rate (the analysis's offered
QPS over the steady window; requests sent inside the stage window per second), rows in the folder
against the requests Locust counted, and the generator CPU (master and workers). Target: within 2%
of the requested rate, every request in the one folder.

`forwarding`: the worker -> master row path alone (RowForwarder over Locust's ZeroMQ RPC into the
master's recorder), master and worker in one process, synthetic rows at a set rate; prints rows
sent and written, the sustained rows/s and CPU-seconds per 1,000 rows for both sides together.
Target: >= 5,000 rows/s without loss. `--json` prints one JSON object (the tests read it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]

RATE_TOLERANCE = 0.02
FORWARD_TARGET_ROWS_PER_S = 5000.0


def _locust_count(locust_dir: Path) -> int:
    import csv

    with open(locust_dir / "locust_stats.csv", encoding="utf-8") as fh:
        return int({r["Name"]: r for r in csv.DictReader(fh)}["Aggregated"]["Request Count"])


def run_rate(
    url: str, workers: int, arrival: str, rate: float, duration_s: float, runs_dir: Path
) -> dict[str, Any]:
    from analysis.run.analyse import analyse_folder
    from embedperf.schema import RunFolder, read_manifest, read_requests_table

    before = set(runs_dir.iterdir()) if runs_dir.exists() else set()
    cmd = [
        sys.executable, "-m", "embedperf.cli", "run", "openloop", "--host", url, "--runs-dir", str(runs_dir),
        "--no-collectors", "--set", f"steps=[{{rate: {rate}, duration_s: {duration_s}, warmup_s: 1}}]",
        "--set", f"open_loop.arrival={arrival}", "--set", "drain_s=2", "--label", f"w{workers}-{arrival}",
    ]  # fmt: skip
    if workers:
        cmd += ["--workers", str(workers)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=duration_s + 180)
    (root,) = set(runs_dir.iterdir()) - before
    folder = RunFolder(root)
    manifest = read_manifest(folder)
    table = read_requests_table(folder, ["t_sent_unix_s", "worker"]).to_pylist()
    stage = manifest.stages[0]
    assert stage.end_unix_s is not None
    in_window = sum(
        1 for r in table if r["t_sent_unix_s"] and stage.start_unix_s <= r["t_sent_unix_s"] < stage.end_unix_s
    )
    step = analyse_folder(folder).summary.steps[0].stats
    cpu = manifest.generator_cpu
    return {
        "workers": workers,
        "arrival": arrival,
        "target_rate": rate,
        "exit_code": proc.returncode,
        "offered_qps": round(step.offered_qps, 2),
        "sent_in_window_per_s": round(in_window / (stage.end_unix_s - stage.start_unix_s), 2),
        "rows": len(table),
        "locust_count": _locust_count(folder.locust),
        "per_worker": sorted(w.rows for w in manifest.workers),
        "cpu_mean_pct": cpu.mean_pct,
        "cpu_max_pct": cpu.max_pct,
        "folder": str(folder.root),
    }


def run_forwarding(rows_per_s: float, duration_s: float, runs_dir: Path) -> dict[str, Any]:
    """Master and worker runners in this process, connected over loopback; rows produced at rows_per_s."""
    import gevent
    import psutil
    from locust import User, constant, task
    from locust.env import Environment

    from embedperf.schema import RequestRow, read_manifest
    from loadgen.distributed import rows as distributed
    from loadgen.lifecycle import session
    from loadgen.lifecycle.run_state import attach
    from loadgen.processes.service_proc import free_port
    from loadgen.recording.monitor import CpuMonitor
    from scenarios.loader import load_scenario

    class Idle(User):
        wait_time = constant(1)

        @task
        def idle(self) -> None:
            """Never spawned: the rows come from the producer below."""

    port = free_port()
    master_env = Environment(user_classes=[Idle], host="http://127.0.0.1:9")  # no /info there: none fetched
    master_state = attach(master_env)
    master = master_env.create_master_runner("127.0.0.1", port)
    distributed.register_master(master)
    worker_env = Environment(user_classes=[Idle])
    worker_state = attach(worker_env)
    worker = worker_env.create_worker_runner("127.0.0.1", port)
    distributed.register_worker(worker)
    while not master.clients.ready:
        gevent.sleep(0.05)
    master_state.bind(load_scenario("smoke"), session.RunOptions(runs_dir=runs_dir, collectors=False))
    run = master_state.active()
    assert run is not None
    cpu = CpuMonitor(worker="w0-bench")
    cpu.start()
    forwarder = distributed.RowForwarder(worker, "w0-bench", cpu)
    worker_state.forwarder = forwarder

    proc = psutil.Process()
    cpu0 = proc.cpu_times()
    t0 = time.perf_counter()
    produced, produced_by_s = 0, 0.0  # rows added, and the time (since t0) they were all due by
    tick_s = 0.01
    while (elapsed := time.perf_counter() - t0) < duration_s:
        due = int(elapsed * rows_per_s) - produced
        now = time.time()
        for _ in range(max(due, 0)):
            forwarder.add(
                RequestRow(
                    worker="w0-bench", endpoint="/v1/embeddings", status_code=200, ok=True, n_inputs=1,
                    input_chars=48, input_tokens=12, response_bytes=2100, srv_queue_ms=0.1, srv_compute_ms=4.2,
                    srv_total_ms=4.6, batch_size=3, t_intended_unix_s=now, t_sent_unix_s=now, t_done_unix_s=now,
                    latency_ms=5.0, latency_from_intended_ms=5.0,
                )
            )  # fmt: skip
        produced, produced_by_s = produced + max(due, 0), elapsed
        gevent.sleep(tick_s)  # the last one is not production time: a busy host may hold it longer
    produce_end = time.perf_counter()
    distributed.collect_final_rows(run, master)
    drained_s = time.perf_counter() - produce_end
    wall_s = time.perf_counter() - t0
    cpu1 = proc.cpu_times()
    folder = run.finalise("benchmark done")
    cpu2 = proc.cpu_times()
    written = int(getattr(read_manifest(folder), "request_rows", 0))
    cpu_s = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    finalise_cpu_s = (cpu2.user + cpu2.system) - (cpu1.user + cpu1.system)
    forwarder.stop()
    worker_state.forwarder = None
    worker.quit()
    master.quit()
    return {
        "rows_sent": produced,
        "rows_written": written,
        "target_rows_per_s": rows_per_s,
        "sustained_rows_per_s": round(produced / max(produced_by_s, tick_s), 1),
        "drain_after_end_s": round(drained_s, 3),
        "cpu_s_per_1000_rows": round(1000.0 * cpu_s / max(produced, 1), 4),
        "cpu_pct_of_one_core": round(100.0 * cpu_s / wall_s, 1),
        "finalise_cpu_s": round(finalise_cpu_s, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_distributed.py", description=__doc__)
    sub = parser.add_subparsers(dest="mode")
    rate = sub.add_parser("rate", help="achieved open-loop rate with 1, 2 and 4 workers")
    rate.add_argument("--rate", type=float, default=400.0)
    rate.add_argument("--duration-s", type=float, default=20.0)
    rate.add_argument(
        "--workers", default="1,2,4", help="comma-separated worker counts (0: a single process)"
    )
    rate.add_argument("--arrivals", default="constant,poisson")
    rate.add_argument("--delay-ms", type=float, default=20.0, help="the stub server's fixed delay")
    fwd = sub.add_parser("forwarding", help="rows/s through worker -> master forwarding")
    fwd.add_argument("--rows-per-s", type=float, default=10000.0)
    fwd.add_argument("--duration-s", type=float, default=10.0)
    for p in (rate, fwd):
        p.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.mode == "forwarding":
        with tempfile.TemporaryDirectory() as tmp:
            result = run_forwarding(args.rows_per_s, args.duration_s, Path(tmp))
        ok = result["rows_written"] == result["rows_sent"] and result["sustained_rows_per_s"] >= min(
            FORWARD_TARGET_ROWS_PER_S, args.rows_per_s * 0.98
        )
        if args.json:
            print(json.dumps(result))
        else:
            for key, value in result.items():
                print(f"{key:>24}: {value}")
            print(f"{'PASS' if ok else 'FAIL'}: >= {FORWARD_TARGET_ROWS_PER_S:,.0f} rows/s without loss")
        return 0 if ok else 1
    if args.mode != "rate":
        parser.print_help()
        return 2
    from loadgen.processes.stub_target import running_stub

    results = []
    all_ok = True
    with running_stub("--delay-ms", str(args.delay_ms)) as url, tempfile.TemporaryDirectory() as tmp:
        for arrival in args.arrivals.split(","):
            duration_s = args.duration_s
            if (
                arrival == "poisson"
            ):  # a Poisson count's own spread (sd sqrt(rate x T)) must fit 3x in the tolerance
                duration_s = max(duration_s, 9.0 / (RATE_TOLERANCE**2 * args.rate))
            for n in (int(v) for v in args.workers.split(",")):
                r = run_rate(url, n, arrival, args.rate, duration_s, Path(tmp))
                r["ok"] = (
                    r["exit_code"] == 0
                    and r["rows"] == r["locust_count"]
                    and abs(r["offered_qps"] - args.rate) <= RATE_TOLERANCE * args.rate
                )
                all_ok &= r["ok"]
                results.append(r)
                if not args.json:
                    print(
                        f"workers={n} {arrival:>8}: offered {r['offered_qps']:8.2f} req/s "
                        f"(sent in window {r['sent_in_window_per_s']:8.2f}), rows {r['rows']} = Locust "
                        f"{r['locust_count']}, per worker {r['per_worker']}, generator CPU mean "
                        f"{r['cpu_mean_pct']}% max {r['cpu_max_pct']}%  {'PASS' if r['ok'] else 'FAIL'}",
                        flush=True,
                    )
    if args.json:
        print(json.dumps(results))
    else:
        print(
            f"{'PASS' if all_ok else 'FAIL'}: {args.rate:g} req/s +- {RATE_TOLERANCE:.0%}, every request in one folder"
        )
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
