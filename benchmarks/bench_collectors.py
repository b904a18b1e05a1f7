"""Collector figures: tick drift over an hour, jitter, CPU cost of host+service at 1 Hz, 16-NPU watch throughput.

Usage: python -m benchmarks.bench_collectors [--quick] [--seconds N]
Runs side by side: the tick scheduler in this process (next to a naive sleep(interval) loop doing the
same work), `python -m collectors --sources psutil,service` against a stub /metrics endpoint, and
`python -m collectors --sources npu_smi` against the fake npu-smi streaming 16 devices at 1 Hz.
Prints every figure and PASS/FAIL per target.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from collectors import npu_smi_map as nmap
from collectors import npu_smi_parse as nparse
from collectors.clock import TickScheduler
from embedperf.schema import RunFolder, read_telemetry_table

REPO_ROOT = Path(__file__).resolve().parents[1]

DRIFT_TARGET_MS_PER_H = 50.0
JITTER_P99_TARGET_MS = 50.0
CPU_TARGET_PCT = 1.0
N_NPUS = 16
WORK_S = 0.005  # simulated sampling work per tick
WARMUP_S = 6.0  # interpreter start and imports are not the steady-state cost


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _slope(xs: list[float], ys: list[float]) -> float:
    """Theil-Sen slope: the median of pairwise slopes, so a few late wake-ups do not pass for drift."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] - xs[i] >= 5.0
    ]
    return statistics.median(slopes) if slopes else 0.0


def scheduler_run(seconds: float, result: dict[str, float]) -> None:
    """Lateness of each tick against its wall-clock boundary; and a naive loop's, side by side."""
    stop = threading.Event()
    naive_offsets: list[tuple[float, float]] = []  # (seconds since start, phase within the second)

    def naive() -> None:
        t0 = time.time()
        while not stop.is_set():
            time.sleep(1.0)
            now = time.time()
            naive_offsets.append((now - t0, (now - t0) % 1.0))
            time.sleep(WORK_S)

    threading.Thread(target=naive, daemon=True).start()
    sched = TickScheduler(1.0)
    lateness: list[tuple[float, float]] = []
    t0 = time.time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (ts := sched.wait(stop)) is not None:
        lateness.append((ts - t0, time.time() - ts))
        time.sleep(WORK_S)
    stop.set()
    xs, ys = [x for x, _ in lateness], [y for _, y in lateness]
    result["ticks"] = len(lateness)
    result["missed"] = sched.missed_ticks
    result["jitter_p50_ms"] = _percentile(ys, 50) * 1e3
    result["jitter_p99_ms"] = _percentile(ys, 99) * 1e3
    result["drift_ms_per_h"] = _slope(xs, ys) * 3600 * 1e3
    # the naive loop's k-th wake-up should be k seconds in; what it lags beyond that accumulates
    if naive_offsets:
        elapsed_s = naive_offsets[-1][0]
        result["naive_drift_ms_per_h"] = (elapsed_s - len(naive_offsets)) / elapsed_s * 3600 * 1e3
    else:
        result["naive_drift_ms_per_h"] = 0.0


def stub_metrics_server() -> int:
    """A /metrics endpoint with the reference service's names, fed at 50 QPS."""
    registry = CollectorRegistry()
    requests = Counter("embedperf_requests_total", "r", ["status"], registry=registry)
    compute = Counter("embedperf_compute_seconds_total", "c", registry=registry)
    Gauge("embedperf_queue_depth", "q", registry=registry).set(2)
    batch = Histogram("embedperf_batch_size", "b", registry=registry)
    tokens = Counter("embedperf_tokens_total", "t", registry=registry)
    for name in ("embedperf_inputs_total", "embedperf_cache_hits_total", "embedperf_cache_misses_total"):
        Counter(name, name, registry=registry)
    stage = Histogram("embedperf_stage_duration_seconds", "s", ["stage"], registry=registry)
    server_port = _free_port()
    start_http_server(server_port, addr="127.0.0.1", registry=registry)

    def feed() -> None:
        while True:
            time.sleep(0.02)
            requests.labels(status="200").inc()
            compute.inc(0.01)
            batch.observe(8)
            tokens.inc(120)
            stage.labels(stage="compute").observe(0.01)

    threading.Thread(target=feed, daemon=True).start()
    return server_port


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_collector(out: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "collectors", "--out", str(out), *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def steady_cpu_pct(proc: subprocess.Popen[bytes], seconds: float) -> float:
    """CPU of the collector process (all threads, children excluded) after WARMUP_S, in % of one core."""
    ps = psutil.Process(proc.pid)
    time.sleep(WARMUP_S)
    c0, t0 = ps.cpu_times(), time.monotonic()
    time.sleep(max(1.0, seconds - WARMUP_S))
    c1, t1 = ps.cpu_times(), time.monotonic()
    return ((c1.user + c1.system) - (c0.user + c0.system)) / (t1 - t0) * 100.0


def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


def parse_rate_lines_per_s(n_lines: int = 200_000) -> float:
    header = "".join(
        f"{h:<12}"
        for h in (
            "NpuID(Idx)",
            "ChipId(Idx)",
            "Pwr(W)",
            "Temp(C)",
            "AI Core(%)",
            "AI Cpu(%)",
            "Ctrl Cpu(%)",
            "Memory(%)",
            "Memory BW(%)",
        )
    )
    rows = ["".join(f"{v!s:<12}" for v in (i % N_NPUS, 0, 90.1, 40, 55, 1, 3, 25, 12)) for i in range(N_NPUS)]
    parser = nparse.WatchParser()
    parser.feed(header)
    started = time.perf_counter()
    for i in range(n_lines):
        row = parser.feed(rows[i % N_NPUS])
        assert row is not None
        nmap.metrics_from_watch_row(row)
    return n_lines / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="30 s instead of 120 s")
    ap.add_argument("--seconds", type=float, default=None)
    args = ap.parse_args(argv)
    seconds = args.seconds or (30.0 if args.quick else 120.0)
    tmp = Path(tempfile.mkdtemp(prefix="bench-collectors-"))
    print(f"bench_collectors: {seconds:.0f} s per measurement, run side by side; scratch in {tmp}")

    port = stub_metrics_server()
    host_out, npu_out = tmp / "host", tmp / "npu"
    host_proc = start_collector(
        host_out,
        [
            "--sources",
            "psutil,service",
            "--service-url",
            f"http://127.0.0.1:{port}",
            "--generator-pid",
            str(os.getpid()),
        ],
    )
    fake = tmp / "npu-smi"
    fake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO_ROOT / "tests/fakes/npu_smi.py"}" "$@"\n')
    fake.chmod(0o755)
    npu_env = {
        "FAKE_NPU_IDS": ",".join(str(i) for i in range(N_NPUS)),
        "FAKE_NPU_STATE_DIR": str(tmp / "fake"),
    }
    npu_proc = start_collector(npu_out, ["--sources", "npu_smi", "--npu-smi", str(fake)], npu_env)

    sched: dict[str, float] = {}
    sched_thread = threading.Thread(target=scheduler_run, args=(seconds, sched))
    sched_thread.start()
    cpu: dict[str, float] = {}
    npu_cpu_thread = threading.Thread(
        target=lambda: cpu.__setitem__("npu", steady_cpu_pct(npu_proc, seconds))
    )
    npu_cpu_thread.start()
    cpu["host"] = steady_cpu_pct(host_proc, seconds)
    npu_cpu_thread.join()
    sched_thread.join()
    rc_host, rc_npu = stop(host_proc), stop(npu_proc)
    lines_per_s = parse_rate_lines_per_s()

    npu = read_telemetry_table(RunFolder(npu_out)).to_pandas()
    per_device = npu[npu.metric == "aicore_util_pct"].groupby("device").ts_unix_s
    span = (per_device.max() - per_device.min() + 1).astype(int)
    coverage = (per_device.nunique() / span).min() if len(span) else 0.0
    host = read_telemetry_table(RunFolder(host_out)).to_pandas()

    results = [
        (
            "tick drift extrapolated to 1 h (ms)",
            sched["drift_ms_per_h"],
            f"|x| <= {DRIFT_TARGET_MS_PER_H:.0f}",
            abs(sched["drift_ms_per_h"]) <= DRIFT_TARGET_MS_PER_H,
        ),
        (
            "tick jitter P99 (ms)",
            sched["jitter_p99_ms"],
            f"<= {JITTER_P99_TARGET_MS:.0f}",
            sched["jitter_p99_ms"] <= JITTER_P99_TARGET_MS,
        ),
        (
            "host+service collector CPU (% of one core)",
            cpu["host"],
            f"<= {CPU_TARGET_PCT:.1f}",
            cpu["host"] <= CPU_TARGET_PCT,
        ),
        (
            f"watch: {N_NPUS} devices sampled every tick (min coverage)",
            coverage,
            ">= 0.99",
            per_device.ngroups == N_NPUS and coverage >= 0.99,
        ),
        ("watch parser raw rate (lines/s)", lines_per_s, f">= {N_NPUS * 1000}", lines_per_s >= N_NPUS * 1000),
    ]
    print(
        f"\nscheduler: {sched['ticks']:.0f} ticks, {sched['missed']:.0f} missed, jitter P50 "
        f"{sched['jitter_p50_ms']:.2f} ms; naive sleep(1)+{WORK_S * 1e3:.0f} ms work loop drifts "
        f"{sched['naive_drift_ms_per_h']:.0f} ms/h"
    )
    print(
        f"host+service run: {len(host)} rows, exit {rc_host}; npu_smi run: {len(npu)} rows over "
        f"{per_device.ngroups} devices, exit {rc_npu}, collector CPU {cpu['npu']:.2f}% of one core "
        "(fake npu-smi excluded)"
    )
    print()
    ok = True
    for name, value, target, passed in results:
        ok &= bool(passed)
        print(f"{'PASS' if passed else 'FAIL'}  {name:<55} {value:>12.3f}   target {target}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
