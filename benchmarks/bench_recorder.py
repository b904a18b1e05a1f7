"""Recorder benchmark: generator CPU per request with the recorder vs bare Locust, and timing accuracy.

Cost is measured in the steady state, from outside the generator and the same way for every
side: the generator's CPU time (psutil) and the stub's request count are read at two marks
after a warm-up and before the end; sides alternate over several repetitions. Start-up (imports)
and end-of-run work (Parquet compaction, Locust's CSV/HTML) are reported apart as fixed costs.
Prints figures and PASS/FAIL per target. `--quick` shortens every phase. Runs only on loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from embedperf.schema import RunFolder, latest_run_folder, read_requests_table
from loadgen.processes.stub_target import running_stub

REPO_ROOT = Path(__file__).resolve().parents[1]

USERS = 8
POLL_S = 0.05
CORPUS = "en_short"
# The same payload on every side: one text from the corpus per request, float embeddings.
PAYLOAD_SETS = [
    "--set",
    f"payload.corpora=[{CORPUS}]",
    "--set",
    "payload.inputs_per_request=[{n: 1, weight: 1}]",
]

BARE_LOCUSTFILE = """
import random
from locust import FastHttpUser, constant, constant_throughput, task
from loadgen.traffic.payloads import load_corpus

TEXTS = load_corpus(%(corpus)r)

class Bare(FastHttpUser):
    wait_time = %(wait)s

    @task
    def embed(self):
        body = {"input": [random.choice(TEXTS)], "model": %(model)r, "encoding_format": "float"}
        self.client.post("/v1/embeddings", json=body)
"""

# embedperf's own user and answer validation, with a sink that drops every row: no recorder.
VALIDATED_LOCUSTFILE = """
from locust import constant, constant_throughput, events
from loadgen.lifecycle.run_state import attach
from loadgen.traffic import context
from loadgen.wiring import users
from loadgen.recording.monitor import settle_heap
from scenarios.loader import load_scenario

class Validated(users.EmbeddingUser):
    wait_time = %(wait)s

@events.init.add_listener
def _init(environment, **_):
    overrides = {"payload.corpora": "[%(corpus)s]", "payload.inputs_per_request": "[{n: 1, weight: 1}]"}
    scenario = load_scenario("smoke", overrides=overrides)
    attach(environment).context = context.build_context(scenario, environment.host, lambda row: None, "local", None)
    settle_heap()  # as a recorded run does before its load
"""

# locustfiles/ramp.py with the same pacing as the other sides.
RECORDED_LOCUSTFILE = """
from locust import constant, constant_throughput
from loadgen.wiring import users
from loadgen.wiring.plugin import install
from loadgen.wiring.shapes import ScenarioShape

install(default_scenario="smoke")

class Recorded(users.EmbeddingUser):
    wait_time = %(wait)s
"""


@dataclass
class Sample:
    """One generator run seen from outside: CPU seconds and requests at each mark."""

    side: str
    startup_cpu_s: float  # process start -> first request reaching the stub
    steady_cpu_s: float  # between the two marks
    steady_requests: int
    steady_wall_s: float
    tail_cpu_s: float  # last request -> process exit (compaction, reports, shutdown)
    total_cpu_s: float
    total_requests: int

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000.0 * self.steady_cpu_s / max(self.steady_requests, 1)


def stub_count(url: str) -> int:
    with urllib.request.urlopen(f"{url}/_count", timeout=2) as resp:  # noqa: S310 - loopback stub
        return int(json.loads(resp.read())["requests"])


def cpu_s(proc: psutil.Process) -> float:
    """The generator's CPU: its own, its reaped children's, and that of any child still running."""
    times = proc.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            child_times = child.cpu_times()
            total += child_times.user + child_times.system
    return float(total)


def measure(side: str, cmd: list[str], url: str, warmup_s: float, window_s: float, limit_s: float) -> Sample:
    """Run one generator; mark CPU and the stub's count after warm-up and after the window."""
    base = stub_count(url)
    popen = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(popen.pid)
    deadline = time.monotonic() + limit_s
    try:
        while stub_count(url) == base:  # start-up: imports, scenario, run folder, spawning
            if popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{side}: generator produced no request (exit {popen.returncode})")
            time.sleep(POLL_S)
        startup = cpu_s(proc)
        time.sleep(warmup_s)
        c1, n1, t1 = cpu_s(proc), stub_count(url), time.monotonic()
        time.sleep(window_s)
        c2, n2, t2 = cpu_s(proc), stub_count(url), time.monotonic()
        last_n, last_cpu = n2, c2
        while True:  # end of the load, then the run's closing work; wait4 keeps the child's rusage
            pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
            if pid:
                popen.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side}: generator did not stop within {limit_s:.0f} s")
            with contextlib.suppress(psutil.NoSuchProcess):
                cpu, n = cpu_s(proc), stub_count(url)
                if n != last_n:
                    last_n, last_cpu = n, cpu
            time.sleep(POLL_S)
    finally:
        if popen.returncode is None:
            popen.kill()
            popen.wait()
    total = usage.ru_utime + usage.ru_stime
    return Sample(side, startup, c2 - c1, n2 - n1, t2 - t1, total - last_cpu, total, stub_count(url) - base)


def side_commands(url: str, run_s: float, rate: float, tmp: Path) -> dict[str, list[str]]:
    from loadgen.traffic.protocols.openai import REFERENCE_MODEL

    model = REFERENCE_MODEL  # what the validated and recorded sides send (the target's model left unset)
    wait = f"constant_throughput({rate / USERS})" if rate > 0 else "constant(0)"
    files = {}
    for side, text in (
        ("bare", BARE_LOCUSTFILE % {"corpus": CORPUS, "model": model, "wait": wait}),
        ("validated", VALIDATED_LOCUSTFILE % {"corpus": CORPUS, "wait": wait}),
        ("recorded", RECORDED_LOCUSTFILE % {"wait": wait}),
    ):
        files[side] = tmp / f"{side}_locustfile.py"
        files[side].write_text(text)
    locust = [sys.executable, "-m", "locust", "--headless", "--only-summary", "--host", url]
    timed = ["-u", str(USERS), "-r", "1000", "-t", f"{run_s:.0f}s"]
    steps = f"steps=[{{label: u{USERS}, users: {USERS}, duration_s: {run_s:.0f}}}]"
    return {
        "bare": [*locust, "-f", str(files["bare"]), *timed],
        "validated": [*locust, "-f", str(files["validated"]), *timed],
        "recorded": [
            *locust, "-f", str(files["recorded"]), "--runs-dir", str(tmp / "runs-cost"),
            "--no-collectors", "--scenario", "smoke", "--set", steps, *PAYLOAD_SETS,
        ],
    }  # fmt: skip


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.4f} (min {min(values):.4f}, max {max(values):.4f})"


def bench_cost(reps: int, warmup_s: float, window_s: float, rate: float, tmp: Path) -> None:
    pacing = f"paced to {rate:.0f} req/s in all" if rate > 0 else "unpaced (as fast as each side goes)"
    print(
        f"== recorder cost: {USERS} closed-loop users {pacing}, zero-delay stub, {reps} alternating "
        f"repetitions, steady window {window_s:.0f} s after {warmup_s:.0f} s warm-up =="
    )
    run_s = warmup_s + window_s + 4.0  # the marks land well inside the load
    samples: dict[str, list[Sample]] = {"bare": [], "validated": [], "recorded": []}
    with running_stub() as url:
        commands = side_commands(url, run_s, rate, tmp)
        for rep in range(reps):
            order = list(commands) if rep % 2 == 0 else list(reversed(commands))
            for side in order:
                samples[side].append(measure(side, commands[side], url, warmup_s, window_s, run_s + 60))
    print("CPU ms per request in the steady state (generator process, user + system):")
    for side, label in (
        ("bare", "bare Locust FastHttpUser (post, no body check)"),
        ("validated", "embedperf user, answer validated, row built, not recorded"),
        ("recorded", "embedperf user + recorder (run folder written)"),
    ):
        per = [s.cpu_ms_per_request for s in samples[side]]
        achieved = [s.steady_requests / s.steady_wall_s for s in samples[side]]
        print(f"  {side:9s} {spread(per)} ms; {statistics.median(achieved):.0f} req/s  [{label}]")
    bare = statistics.median(s.cpu_ms_per_request for s in samples["bare"])
    validated = statistics.median(s.cpu_ms_per_request for s in samples["validated"])
    recorded = statistics.median(s.cpu_ms_per_request for s in samples["recorded"])
    paired = [
        r.cpu_ms_per_request / b.cpu_ms_per_request - 1
        for r, b in zip(samples["recorded"], samples["bare"], strict=True)
    ]
    overhead = recorded / bare - 1
    print(
        f"  breakdown vs bare: validation and row {1000 * (validated - bare):+.1f} us/request, "
        f"recording {1000 * (recorded - validated):+.1f} us/request"
    )
    print(
        f"[{verdict(overhead <= 0.10)}] recorder + validation vs bare Locust: {overhead * 100:+.1f}% CPU per request "
        f"(per-repetition pairs: {', '.join(f'{p * 100:+.0f}%' for p in paired)}; target <= +10%)"
    )
    per_core = 1000.0 / recorded
    print(
        f"[{verdict(per_core >= 3000)}] {per_core:.0f} recorded requests per generator CPU-second (target >= 3000)"
    )
    print("fixed costs per run, CPU seconds (median): start-up to first request / after the last request")
    for side, runs in samples.items():
        print(
            f"  {side:9s} {statistics.median(s.startup_cpu_s for s in runs):.2f} / "
            f"{statistics.median(s.tail_cpu_s for s in runs):.2f}"
        )


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def recorded_run(
    url: str, duration_s: float, runs: Path, extra: list[str], locustfile: str = "ramp.py"
) -> RunFolder:
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO_ROOT / "locustfiles" / locustfile), "--headless",
         "--only-summary", "--host", url, "--runs-dir", str(runs), "--no-collectors", *extra],
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        timeout=duration_s + 120,
    )  # fmt: skip
    return latest_run_folder(runs)


def bench_accuracy(duration_s: float, tmp: Path) -> None:
    delay_ms, rate = 50.0, 200.0
    print(
        f"== accuracy: open loop {rate:.0f} req/s for {duration_s:.0f} s against a {delay_ms:.0f} ms stub =="
    )
    with running_stub("--delay-ms", str(delay_ms)) as url:
        runs = tmp / "runs-acc"
        folder = recorded_run(
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
        folder = recorded_run(
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
    parser.add_argument(
        "--quick", action="store_true", help="shorter phases (cost 3 x 5 s windows, accuracy 10 s)"
    )
    parser.add_argument("--cost-only", action="store_true", help="run only the CPU-cost part")
    parser.add_argument(
        "--rate",
        type=float,
        default=1500.0,
        help="requests/s every side is paced to (same load, so per-request CPU compares like for like); "
        "0 = unpaced (default 1500, the per-core target)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-recorder-") as tmp_name:
        tmp = Path(tmp_name)
        if args.quick:
            bench_cost(reps=3, warmup_s=2.0, window_s=5.0, rate=args.rate, tmp=tmp)
        else:
            bench_cost(reps=5, warmup_s=3.0, window_s=12.0, rate=args.rate, tmp=tmp)
        if args.cost_only:
            return 0
        bench_accuracy(10.0 if args.quick else 30.0, tmp)
        bench_stall(tmp)
    print(f"(machine: {os.cpu_count()} logical CPUs, possibly shared with other work; figures are noisy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
