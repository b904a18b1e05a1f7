"""`make bench-split`: what the service's process layout costs and whether it keeps the engine fed.

1. Front-end cost: the service with model compute taken out (`--compute-sleep-ms`: each batch sleeps a fixed
   SLEEP_MS, the GIL released; a two-layer random model's tokeniser), wrk at 10 and 100 connections, one input,
   float and base64: CPU-microseconds of the HTTP front-end processes per answered request (target <= 300),
   and of the engine process, side by side; the figure must not grow with the connections in flight.
2. Compute inflation: MiniLM at 100 connections; the engine's compute time per batch (from /metrics) against
   the same batch size computed alone in this process on the same number of torch threads (target <= 1.2x).
3. Latency spread: P50, P99 and P99/P50 at 100 connections (wrk --latency; target P99/P50 <= 1.5).
4. Batches at 10 connections (MiniLM): req/s, inputs per batch and the engine's CPU per request, and the model
   alone on one torch thread at a few batch sizes: what a small batch costs a worker.
Figures from a small shared host are that host's: read the ratios, measured side by side in one run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from benchmarks.device_check import build_model
from benchmarks.wrk_run import run_wrk, wrk_found
from loadgen.processes.service_proc import ServiceProcess
from modelcore.model import EmbeddingModel, load_model

TEXT = "Capacity planning needs the P99 latency at every load step."
SCRIPT = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[{"model": "%(model)s", "input": "%(text)s", "encoding_format": "%(fmt)s"}]]
"""
LATENCY = re.compile(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", re.M)
UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
SLEEP_MS = 2.0  # part 1's compute per batch: what a small encoder takes on an accelerator


def wrk(url: str, script: Path, connections: int, duration_s: int, latency: bool = False) -> str:
    out = run_wrk(f"{url}/v1/embeddings", script, connections, duration_s)
    if latency:  # wrk prints the distribution with --latency: run it again with it
        cmd = [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{duration_s}s",
            "--latency",
            "-s",
            str(script),
            f"{url}/v1/embeddings",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60)
    return out.stdout


def ok_requests(stdout: str) -> int:
    total = re.search(r"^\s*(\d+) requests in", stdout, re.M)
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", stdout)
    return (int(total.group(1)) if total else 0) - (int(errors.group(1)) if errors else 0)


def processes(service: ServiceProcess) -> tuple[list[psutil.Process], psutil.Process]:
    """(front ends, engine) of a running service, told apart by /info's engine_pid."""
    engine_pid = httpx.get(f"{service.url}/info", timeout=10).json()["engine_pid"]
    children = psutil.Process(service.pid).children()
    engine = next(p for p in children if p.pid == engine_pid)
    fronts = [p for p in children if p.pid != engine_pid and "resource_tracker" not in " ".join(p.cmdline())]
    return fronts, engine


def cpu_s(procs: list[psutil.Process]) -> float:
    return sum(p.cpu_times().user + p.cpu_times().system for p in procs)


def front_end_cost(tmp: Path, duration_s: int) -> None:
    folder = build_model(tmp / "tiny-encoder", tiny=True)
    flags = ["--model", str(folder), "--http-workers", "1", "--deadline-ms", "30000", "--admit-wait-share", "1.0",
             "--log-level", "warning", "--access-log", "off", "--max-batch-size", "64",
             "--compute-sleep-ms", str(SLEEP_MS)]  # fmt: skip
    print(f"1. front-end cost (each batch sleeps {SLEEP_MS:g} ms instead of computing; CPU-us per answered request)")
    for pin, formats in (("auto", ("float", "base64")), ("off", ("float",))):
        note = " (nothing computes on the host: each front end on one CPU)" if pin == "auto" else ""
        print(f"   --pin-front-ends {pin}{note}")
        with ServiceProcess([*flags, "--pin-front-ends", pin], log_path=tmp / "tiny.log") as service:
            front_end_runs(service, tmp, folder.name, formats, duration_s)


def front_end_runs(service: ServiceProcess, tmp: Path, model: str, formats: tuple[str, ...], duration_s: int) -> None:
    """Front-end and engine CPU a request under wrk at 10 and 100 connections, per response format."""
    fronts, engine = processes(service)
    for fmt in formats:
        script = tmp / f"{fmt}.lua"
        script.write_text(SCRIPT % {"model": model, "text": TEXT, "fmt": fmt})
        wrk(service.url, script, 10, 2)  # warm
        for connections in (10, 100):
            front_before, engine_before = cpu_s(fronts), cpu_s([engine])
            ok = ok_requests(wrk(service.url, script, connections, duration_s))
            front_us = (cpu_s(fronts) - front_before) / max(1, ok) * 1e6
            engine_us = (cpu_s([engine]) - engine_before) / max(1, ok) * 1e6
            print(f"   {fmt:>6}, {connections:>3} connections: {ok / duration_s:7.0f} req/s, front ends "
                  f"{front_us:5.0f} CPU-us/request, engine {engine_us:5.0f} CPU-us/request", flush=True)  # fmt: skip


def batch_alone_ms(model: EmbeddingModel, size: int, runs: int) -> float:
    """Median ms of a batch of `size` copies of TEXT computed alone in this process (after one warm-up call)."""
    ids = model.tokenize([TEXT] * size)
    model.embed_token_ids(ids)
    times_ms = []
    for _ in range(runs):
        t_start_s = time.perf_counter()
        model.embed_token_ids(ids)
        times_ms.append((time.perf_counter() - t_start_s) * 1000)
    return statistics.median(times_ms)


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def device_seconds(text: str) -> float:
    return sum(
        float(v) for v in re.findall(r"^embedperf_device_compute_seconds_total\{[^}]*\} (\S+)$", text, re.M)
    )


def inflation_and_spread(tmp: Path, duration_s: int) -> None:
    script = tmp / "minilm.lua"
    script.write_text(SCRIPT % {"model": "all-MiniLM-L6-v2", "text": TEXT, "fmt": "float"})
    flags = [
        "--deadline-ms",
        "30000",
        "--admit-wait-share",
        "1.0",
        "--log-level",
        "warning",
        "--access-log",
        "off",
    ]
    with ServiceProcess(flags, log_path=tmp / "minilm.log") as service:
        threads = httpx.get(f"{service.url}/info", timeout=10).json()["config"]["threads"]
        _, engine = processes(service)
        wrk(service.url, script, 10, 3)
        before, engine_before_s = httpx.get(f"{service.url}/metrics", timeout=10).text, cpu_s([engine])
        ok_10 = ok_requests(wrk(service.url, script, 10, duration_s))
        engine_10_us = (cpu_s([engine]) - engine_before_s) / max(1, ok_10) * 1e6
        after = httpx.get(f"{service.url}/metrics", timeout=10).text
        batches_10 = metric(after, "embedperf_batch_size_count") - metric(before, "embedperf_batch_size_count")
        inputs_10 = metric(after, "embedperf_batch_size_sum") - metric(before, "embedperf_batch_size_sum")
        wrk(service.url, script, 100, 3)
        before = httpx.get(f"{service.url}/metrics", timeout=10).text
        out = wrk(service.url, script, 100, duration_s, latency=True)
        after = httpx.get(f"{service.url}/metrics", timeout=10).text
    batches = metric(after, "embedperf_batch_size_count") - metric(before, "embedperf_batch_size_count")
    inputs = metric(after, "embedperf_batch_size_sum") - metric(before, "embedperf_batch_size_sum")
    compute_s = device_seconds(after) - device_seconds(before)  # every worker's compute time, summed
    mean_batch = round(inputs / max(1, batches))
    in_service_ms = compute_s / max(1, batches) * 1000
    model = load_model(threads=threads)
    alone_ms = batch_alone_ms(model, mean_batch, runs=30)
    print(f"2. compute inflation at 100 connections ({threads} torch thread(s)): {batches:.0f} batches of "
          f"{inputs / max(1, batches):.1f} inputs on average, {in_service_ms:.2f} ms each in the engine; the same "
          f"batch of {mean_batch} alone {alone_ms:.2f} ms: ratio {in_service_ms / alone_ms:.2f}")  # fmt: skip
    latencies = {q: float(v) * UNIT_MS[u] for q, v, u in LATENCY.findall(out)}
    p50, p99 = latencies.get("50", float("nan")), latencies.get("99", float("nan"))
    print(
        f"3. 100 connections: {ok_requests(out) / duration_s:.0f} req/s, P50 {p50:.1f} ms, P99 {p99:.1f} ms, "
        f"P99/P50 {p99 / p50:.2f}"
    )
    print(f"4. 10 connections: {ok_10 / duration_s:.0f} req/s, {batches_10 / duration_s:.0f} batches/s of "
          f"{inputs_10 / max(1, batches_10):.1f} inputs on average, engine {engine_10_us:.0f} CPU-us/request")  # fmt: skip
    for size in (1, 3, 5, 10, 20):
        ms = batch_alone_ms(model, size, runs=10)
        print(f"   the model alone, batch {size:>2} on {threads} thread(s): {ms:6.1f} ms, {size / ms * 1000:5.0f} inputs/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration-s", type=int, default=10, help="wrk's duration per measurement")
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with tempfile.TemporaryDirectory(prefix="embedperf-bench-split-") as tmp:
        front_end_cost(Path(tmp), args.duration_s)
        inflation_and_spread(Path(tmp), args.duration_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
