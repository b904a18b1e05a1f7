"""Recorder benchmark: generator CPU per request with the recorder vs bare Locust, and timing accuracy.

Prints figures and PASS/FAIL per target. `--quick` shortens every phase. Runs only on loopback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from embedperf.schema import RunFolder, latest_run_folder, read_requests_table  # noqa: E402
from loadgen.stub_server import running_stub  # noqa: E402

BARE_LOCUSTFILE = """
from locust import FastHttpUser, constant, task

class Bare(FastHttpUser):
    wait_time = constant(0)

    @task
    def embed(self):
        self.client.post("/v1/embeddings", json={"input": ["How do I reset my password?"], "model": "m"})
"""
USERS = 8


def run_measured(cmd: list[str]) -> tuple[float, str]:
    """Run a command; returns (child CPU seconds from rusage, stdout)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.DEVNULL, text=True)
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        out.seek(0)
        return usage.ru_utime + usage.ru_stime, out.read()


def bare_run(url: str, duration_s: float, tmp: Path) -> tuple[float, int]:
    locustfile = tmp / "bare_locustfile.py"
    locustfile.write_text(BARE_LOCUSTFILE)
    prefix = tmp / f"bare{time.monotonic_ns()}"
    cpu_s, _ = run_measured(
        [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--only-summary", "-u", str(USERS),
         "-r", "1000", "-t", f"{duration_s:.0f}s", "--host", url, "--csv", str(prefix)]
    )  # fmt: skip
    lines = Path(f"{prefix}_stats.csv").read_text().splitlines()
    count = int(next(line for line in lines if ",Aggregated," in line).split(",")[2])
    return cpu_s, count


def recorded_run(
    url: str, duration_s: float, runs: Path, extra: list[str], locustfile: str = "ramp.py"
) -> tuple[float, RunFolder]:
    cpu_s, out = run_measured(
        [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / locustfile), "--headless",
         "--only-summary", "--host", url, "--runs-dir", str(runs), "--no-collectors", *extra]
    )  # fmt: skip
    return cpu_s, latest_run_folder(runs)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def bench_cost(duration_s: float, tmp: Path) -> None:
    print(
        f"== recorder cost: {USERS} closed-loop users against a zero-delay stub, {duration_s:.0f} s per run =="
    )
    with running_stub() as url:
        bare, ours = [], []
        for i in range(2):  # alternate, so drift on a shared machine hits both
            cpu_s, n = bare_run(url, duration_s, tmp)
            bare.append((cpu_s, n))
            runs = tmp / f"runs-cost-{i}"
            steps = f"steps=[{{users: {USERS}, duration_s: {duration_s}}}]"
            cpu_r, folder = recorded_run(url, duration_s, runs, ["--scenario", "smoke", "--set", steps])
            rows = read_requests_table(folder).num_rows
            ours.append((cpu_r, rows))
    bare_cpu_ms = 1000 * sum(c for c, _ in bare) / sum(n for _, n in bare)
    ours_cpu_ms = 1000 * sum(c for c, _ in ours) / sum(n for _, n in ours)
    overhead = ours_cpu_ms / bare_cpu_ms - 1
    per_core = 1000 / ours_cpu_ms
    print(f"bare Locust: {bare_cpu_ms:.3f} ms CPU/request ({sum(n for _, n in bare)} requests)")
    print(f"recorder   : {ours_cpu_ms:.3f} ms CPU/request ({sum(n for _, n in ours)} rows)")
    print(f"[{verdict(overhead <= 0.10)}] recorder CPU overhead {overhead * 100:+.1f}% (target <= +10%)")
    print(
        f"[{verdict(per_core >= 1500)}] {per_core:.0f} recorded requests per generator CPU-second (target >= 1500)"
    )


def bench_accuracy(duration_s: float, tmp: Path) -> None:
    delay_ms, rate = 50.0, 200.0
    print(
        f"== accuracy: open loop {rate:.0f} req/s for {duration_s:.0f} s against a {delay_ms:.0f} ms stub =="
    )
    with running_stub("--delay-ms", str(delay_ms)) as url:
        runs = tmp / "runs-acc"
        _, folder = recorded_run(
            url, duration_s, runs,
            ["--set", f"steps=[{{rate: {rate}, duration_s: {duration_s}}}]", "--set", "open_loop.arrival=constant"],
            locustfile="openloop.py",
        )  # fmt: skip
    rows = [r for r in read_requests_table(folder).to_pylist() if r["ok"]]
    lat = [r["latency_ms"] for r in rows]
    lag = [(r["t_sent_unix_s"] - r["t_intended_unix_s"]) * 1000 for r in rows]
    sent = sorted(r["t_sent_unix_s"] for r in rows)
    achieved = (len(sent) - 1) / (sent[-1] - sent[0])
    p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
    srv = [r["srv_total_ms"] for r in rows]  # the stub's own measurement of each request's delay
    t50, t99 = pct(srv, 0.5), pct(srv, 0.99)
    print(
        f"[{verdict(abs(p50 - t50) <= 1)}] recorded P50 {p50:.2f} ms vs server-measured {t50:.2f} ms (within 1 ms)"
    )
    print(
        f"[{verdict(abs(p99 - t99) <= 3)}] recorded P99 {p99:.2f} ms vs server-measured {t99:.2f} ms (within 3 ms)"
    )
    print(
        f"       (against the nominal {delay_ms:.0f} ms: P50 {p50 - delay_ms:+.2f} ms, P99 {p99 - delay_ms:+.2f} ms)"
    )
    print(
        f"[{verdict(abs(achieved / rate - 1) <= 0.02)}] achieved rate {achieved:.1f} req/s vs {rate:.0f} (within 2%)"
    )
    print(
        f"[{verdict(pct(lag, 0.99) <= 5)}] schedule lag P50 {pct(lag, 0.5):.2f} ms, P99 {pct(lag, 0.99):.2f} ms (P99 <= 5 ms)"
    )


def bench_stall(tmp: Path) -> None:
    print("== stall: open loop 100 req/s, 10 ms stub, a 1 s stall injected at 3 s ==")
    with running_stub("--delay-ms", "10") as url:
        window: dict[str, float] = {}

        def stall() -> None:
            time.sleep(4.0)
            window["before"] = time.time()
            httpx.post(f"{url}/_stall?ms=1000", timeout=5)
            window["after"] = time.time()

        threading.Thread(target=stall, daemon=True).start()
        _, folder = recorded_run(
            url, 7, tmp / "runs-stall",
            ["--set", "steps=[{rate: 100, duration_s: 7}]", "--set", "open_loop.arrival=constant"],
            locustfile="openloop.py",
        )  # fmt: skip
    rows = read_requests_table(folder).to_pylist()
    during = [r for r in rows if window["after"] <= r["t_intended_unix_s"] <= window["before"] + 1.0]
    shown = [
        r
        for r in during
        if r["latency_from_intended_ms"] >= (window["before"] + 1.0 - r["t_intended_unix_s"]) * 1000 - 5
    ]
    print(
        f"[{verdict(bool(during) and len(shown) == len(during))}] {len(shown)}/{len(during)} requests scheduled during the stall show it in latency_from_intended_ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter phases (cost 8 s, accuracy 10 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-recorder-") as tmp_name:
        tmp = Path(tmp_name)
        bench_cost(8.0 if args.quick else 20.0, tmp)
        bench_accuracy(10.0 if args.quick else 30.0, tmp)
        bench_stall(tmp)
    print(f"(machine: {os.cpu_count()} logical CPUs, possibly shared with other work; figures are noisy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
