"""`make bench-abuse`: the reference service, with its defaults, against an unlucky host and hostile clients.

1. A busy neighbour: wrk at 10 connections, quiet, then with one busy loop pinned to a core the service uses:
   req/s and the share of 429 (targets: 0 % 429, at least 70 % of the quiet figure).
2. Slow bodies: 150 connections sending their body at 1 byte/s beside 16 legitimate clients: the legitimate
   clients' 429s and P99 against their quiet P99 (targets: 0 x 429, at most 2x).
3. Request heads over 64 KB (70 KB and 1 MB): status and time to the answer (target 431 within 50 ms), and the
   latency of requests sent beside them against quiet (target within 2x).
4. 50 requests of 16 inputs at once: each either refused at admission (429) or answered within the deadline.
5. SIGTERM with 50 requests in flight (deadline 30 s, grace 2 s): statuses, every body JSON, exit time
   (target: no 500, within the grace + 1 s).
Figures from a small shared host are that host's: read each against its own quiet figure, measured beside it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.wrk_run import run_wrk, wrk_found
from loadgen.processes.service_proc import ServiceProcess

MODEL = "all-MiniLM-L6-v2"
BODY = {"model": MODEL, "input": "Capacity planning needs the P99 latency at every load step."}
SCRIPT = (
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    f"wrk.body = [[{json.dumps(BODY)}]]\n"
)


def wrk_figures(url: str, script: Path, connections: int, duration_s: int) -> tuple[float, float]:
    """(ok req/s, share of non-2xx answers) of one wrk run."""
    out = run_wrk(f"{url}/v1/embeddings", script, connections, duration_s).stdout
    total = int(re.search(r"^\s*(\d+) requests in", out, re.M).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    failed = int(errors.group(1)) if errors else 0
    return (total - failed) / duration_s, failed / max(1, total)


def busy_neighbour(url: str, script: Path, engine_pid: int, duration_s: int) -> None:
    quiet_rps, quiet_refused = wrk_figures(url, script, 10, duration_s)
    core = sorted(os.sched_getaffinity(engine_pid))[0]
    loop = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"])
    try:
        busy_rps, busy_refused = wrk_figures(url, script, 10, duration_s)
    finally:
        loop.kill()
        loop.wait()
    print(f"1. busy neighbour on core {core}: quiet {quiet_rps:.1f} req/s ({quiet_refused:.1%} refused), with the "
          f"busy loop {busy_rps:.1f} req/s ({busy_refused:.1%} refused) = {busy_rps / quiet_rps:.0%} of quiet "
          "(targets 0 % refused, >= 70 %)", flush=True)  # fmt: skip


def legit_latencies(url: str, clients: int, duration_s: float) -> tuple[list[float], Counter[int]]:
    """Closed-loop one-input requests from `clients` threads: sorted latencies (ms) of 200s, every status."""
    stop_s = time.monotonic() + duration_s
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=30) as http:
            while time.monotonic() < stop_s:
                t_start_s = time.perf_counter()
                status = http.post(f"{url}/v1/embeddings", json=BODY).status_code
                with lock:
                    statuses[status] += 1
                    if status == 200:
                        latencies.append((time.perf_counter() - t_start_s) * 1000)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(latencies), statuses


def p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(len(values) * 0.99))] if values else float("nan")


def slow_bodies(url: str, duration_s: float) -> None:
    quiet, _ = legit_latencies(url, 16, duration_s)
    host, port = url.removeprefix("http://").split(":")
    stop = threading.Event()
    body = json.dumps(BODY).encode()
    head = (f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip

    def trickle() -> None:
        with socket.create_connection((host, int(port))) as conn:
            conn.sendall(head)
            for byte in body:
                if stop.wait(1.0):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the service gave up on this body (its --body-timeout-s): open another
                    return

    slow = [threading.Thread(target=trickle, daemon=True) for _ in range(150)]
    for thread in slow:
        thread.start()
    time.sleep(2)
    loaded, statuses = legit_latencies(url, 16, duration_s)
    stop.set()
    print(f"2. 150 slow-body connections beside 16 clients: their statuses {dict(statuses)}; P99 {p99(loaded):.0f} ms "
          f"against {p99(quiet):.0f} ms quiet = {p99(loaded) / p99(quiet):.2f}x (targets 0 x 429, <= 2x)", flush=True)  # fmt: skip


def big_header(url: str, size_bytes: int) -> None:
    quiet = [legit_once(url) for _ in range(20)]
    host, port = url.removeprefix("http://").split(":")
    request = (f"GET /health HTTP/1.1\r\nHost: {host}\r\nX-Big: " + "a" * size_bytes + "\r\n\r\n").encode()
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        beside = pool.submit(lambda: [legit_once(url) for _ in range(20)])
        t_start_s = time.perf_counter()
        with socket.create_connection((host, int(port))) as conn:
            with contextlib.suppress(OSError):  # closed by the service once the limit was passed
                conn.sendall(request)
            answer = conn.recv(200).decode(errors="replace")
        took_ms = (time.perf_counter() - t_start_s) * 1000
        loaded = beside.result()
    status = answer.split(" ")[1] if answer.startswith("HTTP/") else "none"
    median = sorted(loaded)[len(loaded) // 2] / sorted(quiet)[len(quiet) // 2]
    print(f"3. a request head of {size_bytes // 1024} KB: {status} in {took_ms:.1f} ms (target: 431 within 50 ms); a request beside it "
          f"{median:.2f}x its quiet median (target <= 2x)", flush=True)  # fmt: skip


def legit_once(url: str) -> float:
    t_start_s = time.perf_counter()
    httpx.post(f"{url}/v1/embeddings", json=BODY, timeout=30)
    return (time.perf_counter() - t_start_s) * 1000


def sixteen_inputs(url: str, deadline_ms: float) -> None:
    body = {
        "model": MODEL,
        "input": [f"{i} capacity planning needs the P99 at every step " * 4 for i in range(16)],
    }

    def post(_: int) -> tuple[int, float, str]:
        t_start_s = time.perf_counter()
        response = httpx.post(f"{url}/v1/embeddings", json=body, timeout=60)
        code = response.json().get("error", {}).get("code", "") if response.status_code != 200 else ""
        return response.status_code, (time.perf_counter() - t_start_s) * 1000, code

    with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
        outcomes = list(pool.map(post, range(50)))
    statuses = Counter(status for status, _, _ in outcomes)
    served = [ms for status, ms, _ in outcomes if status == 200]
    expired = sum(1 for _, _, code in outcomes if code == "deadline_exceeded")
    print(f"4. 50 x 16 inputs at once: statuses {dict(statuses)}, slowest answer {max(served, default=0):.0f} ms "
          f"(deadline {deadline_ms:.0f} ms), {expired} waited out the deadline (target 0)", flush=True)  # fmt: skip


def sigterm(tmp: Path) -> None:
    grace_s = 2.0
    flags = ["--deadline-ms", "30000", "--admit-wait-share", "1.0", "--shutdown-grace-s", str(grace_s)]
    service = ServiceProcess(flags, log_path=tmp / "sigterm.log").start()
    body = {"model": MODEL, "input": [f"{i} a long text to keep the engine busy " * 20 for i in range(16)]}
    results: list[tuple[int, bool]] = []

    def post() -> None:
        try:
            response = httpx.post(f"{service.url}/v1/embeddings", json=body, timeout=60)
            results.append((response.status_code, response.headers.get("content-type") == "application/json"))
        except httpx.HTTPError:
            results.append((0, False))

    threads = [threading.Thread(target=post) for _ in range(50)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    t_start_s = time.monotonic()
    assert service.proc is not None
    os.kill(service.pid, signal.SIGTERM)
    service.proc.wait(timeout=60)
    exit_s = time.monotonic() - t_start_s
    for thread in threads:
        thread.join()
    statuses = Counter(status for status, _ in results)
    print(f"5. SIGTERM with 50 requests in flight: statuses {dict(statuses)}, every body JSON: "
          f"{all(is_json for _, is_json in results)}, exit after {exit_s:.2f} s (grace {grace_s:g} s; target no 500, "
          f"<= grace + 1 s)", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration-s", type=int, default=10)
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with tempfile.TemporaryDirectory(prefix="embedperf-bench-abuse-") as tmp_dir:
        tmp = Path(tmp_dir)
        script = tmp / "embed.lua"
        script.write_text(SCRIPT)
        with ServiceProcess([], log_path=tmp / "service.log") as service:  # the defaults
            info = httpx.get(f"{service.url}/info", timeout=10).json()
            print(f"service defaults: {info['http_workers']} front end(s), engine pid {info['engine_pid']}, "
                  f"{info['config']['threads']} torch thread(s), deadline {info['config']['deadline_ms']:g} ms")  # fmt: skip
            run_wrk(f"{service.url}/v1/embeddings", script, 10, 3)  # warm
            busy_neighbour(service.url, script, info["engine_pid"], args.duration_s)
            slow_bodies(service.url, args.duration_s)
            for size_bytes in (70 * 1024, 1 << 20):
                big_header(service.url, size_bytes)
            sixteen_inputs(service.url, info["config"]["deadline_ms"])
        sigterm(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
