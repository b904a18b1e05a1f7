"""Service benchmark: the model's offline ceiling vs closed-loop QPS / P50 / P99 with batching off and on.

Run: `python -m benchmarks.bench_service [--quick] [--threads N]` (make bench-service). The service runs as a
subprocess on a free loopback port; the load generator is a lean asyncio HTTP/1.1 client in this process (one
keep-alive connection per client, like Locust's FastHttpUser) on the same cores, so its own CPU is printed too.
Percentiles are exact, from every request's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from loadgen.processes.service_proc import ServiceProcess

REPO_ROOT = Path(__file__).resolve().parents[1]

EN = [
    "the service batches requests",
    "latency at the 99th percentile",
    "embedding models on accelerators",
    "capacity planning for search",
    "a quick brown fox",
    "vector databases need fresh data",
]
ZH = [
    "深度学习推理性能",
    "向量检索系统",
    "今天天气很好",
    "昇腾芯片上的模型部署",
    "文本嵌入质量评估",
    "动态批处理优化",
]


def corpus(n: int, seed: int = 7) -> list[str]:
    """Short mixed Chinese/English inputs of roughly 20 tokens each."""
    rng = random.Random(seed)
    return [f"{rng.choice(EN)}，{rng.choice(ZH)} {rng.choice(EN)} #{i}" for i in range(n)]


@dataclass
class Level:
    mode: str
    clients: int
    qps: float
    p50_ms: float
    p99_ms: float
    errors: int
    generator_cpu_pct: float


def offline_ceiling(texts: list[str], duration_s: float, threads: int | None) -> tuple[float, int, float]:
    """(best inputs/s, best batch size, single-input median latency ms) of the model in this process."""
    import torch

    from modelcore.model import load_model

    model = load_model(threads=threads)
    best = (0.0, 1)
    for batch_size in (1, 8, 16, 32, 64):
        model.encode(texts[:batch_size], batch_size=batch_size)
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < duration_s:
            start = (done * 7) % (len(texts) - batch_size)
            model.encode(texts[start : start + batch_size], batch_size=batch_size)
            done += batch_size
        rate = done / (time.perf_counter() - t0)
        print(f"  offline batch {batch_size:>3}: {rate:8.1f} inputs/s")
        best = max(best, (rate, batch_size))
    singles = []
    for text in texts[:200]:
        t0 = time.perf_counter()
        model.encode([text])
        singles.append((time.perf_counter() - t0) * 1000)
    del model
    torch.set_num_threads(torch.get_num_threads())
    return best[0], best[1], float(np.median(singles))


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, body: bytes) -> int:
    """One HTTP/1.1 keep-alive POST; returns the status. A lean client keeps the generator's CPU low."""
    writer.write(
        b"POST /v1/embeddings HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def closed_loop(
    url: str, texts: list[str], clients: int, duration_s: float, max_requests: int = 0
) -> list[tuple[int, float]]:
    """`clients` users, each on its own keep-alive connection, sending one request after the previous answer.

    Returns (status, latency_ms) rows; status 0 is a transport error.
    """
    rows: list[tuple[int, float]] = []
    stop_at = time.perf_counter() + duration_s
    host_port = url.removeprefix("http://")
    host, port = host_port.rsplit(":", 1)
    bodies = [json.dumps({"input": t, "model": "all-MiniLM-L6-v2"}).encode() for t in texts]

    async def user(index: int) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        i = index
        try:
            while time.perf_counter() < stop_at and not (max_requests and len(rows) >= max_requests):
                i += clients
                t0 = time.perf_counter()
                try:
                    status = await _post(reader, writer, host_port, bodies[i % len(bodies)])
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    status = 0
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, int(port))
                rows.append((status, (time.perf_counter() - t0) * 1000))
        finally:
            writer.close()

    await asyncio.gather(*(user(i) for i in range(clients)))
    return rows


def measure(url: str, mode: str, texts: list[str], clients: int, duration_s: float) -> Level:
    me = psutil.Process()
    cpu0, t0 = me.cpu_times(), time.perf_counter()
    rows = asyncio.run(closed_loop(url, texts, clients, duration_s))
    wall_s = time.perf_counter() - t0
    cpu1 = me.cpu_times()
    latencies = np.array([lat for status, lat in rows if status == 200])
    ok = len(latencies)
    return Level(
        mode=mode,
        clients=clients,
        qps=ok / wall_s,
        p50_ms=float(np.percentile(latencies, 50)) if ok else float("nan"),
        p99_ms=float(np.percentile(latencies, 99)) if ok else float("nan"),
        errors=len(rows) - ok,
        generator_cpu_pct=100 * ((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)) / wall_s,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="short levels (3 s) and a 2,000-request RSS check"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1 if (os.cpu_count() or 1) <= 2 else None,
        help="torch threads in the service and the offline run (default: 1 on <= 2 cores, where the generator and "
        "uvicorn share the cores and two OpenMP threads collapse under contention; else torch's)",
    )
    parser.add_argument(
        "--level-s", type=float, default=None, help="seconds per load level (default 10, quick 3)"
    )
    parser.add_argument(
        "--service-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra `embedperf serve` argument for both modes, repeatable (e.g. --service-arg=--max-batch-size "
        "--service-arg=16)",
    )
    args = parser.parse_args()
    level_s = args.level_s or (3.0 if args.quick else 10.0)
    rss_requests = 2_000 if args.quick else 10_000
    texts = corpus(4000)
    thread_args = ["--threads", str(args.threads)] if args.threads else []
    print(
        f"embedperf service benchmark: {psutil.cpu_count()} cores, {level_s:.0f} s per level, threads={args.threads or 'torch default'}"
    )

    ceiling, best_batch, single_ms = offline_ceiling(texts, 1.0 if args.quick else 3.0, args.threads)
    print(
        f"offline ceiling {ceiling:.1f} inputs/s at batch {best_batch}; single-input latency {single_ms:.2f} ms"
    )

    levels: list[Level] = []
    rss_growth_pct = float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        for mode, flags in (("off", ["--no-batching"]), ("on", [])):
            service = ServiceProcess(
                ["--log-level", "warning", *flags, *thread_args, *args.service_arg],
                log_path=Path(tmp) / f"service-{mode}.log",
            ).start()
            url = service.url
            try:
                asyncio.run(closed_loop(url, texts, 10, 1.0))  # warm the connection path
                for clients in (1, 10, 50, 100):
                    level = measure(url, mode, texts, clients, level_s)
                    levels.append(level)
                    print(
                        f"  batching {mode:<3} {clients:>3} clients: {level.qps:8.1f} QPS  P50 {level.p50_ms:7.1f} ms  "
                        f"P99 {level.p99_ms:7.1f} ms  errors {level.errors}  generator CPU {level.generator_cpu_pct:5.1f}%"
                    )
                if mode == "on":
                    service_ps = psutil.Process(service.pid)
                    asyncio.run(
                        closed_loop(url, texts, 50, 120, max_requests=rss_requests // 5)
                    )  # past allocator warm-up
                    rss0 = service_ps.memory_info().rss
                    asyncio.run(closed_loop(url, texts, 50, 600, max_requests=rss_requests))
                    rss1 = service_ps.memory_info().rss
                    rss_growth_pct = 100 * (rss1 - rss0) / rss0
                    print(
                        f"  RSS {rss0 / 2**20:.0f} MiB -> {rss1 / 2**20:.0f} MiB over {rss_requests} requests ({rss_growth_pct:+.1f}%)"
                    )
            finally:
                service.stop()

    by = {(lv.mode, lv.clients): lv for lv in levels}
    best_high = max(by[("on", 50)].qps, by[("on", 100)].qps)
    targets = [
        ("batching on >= 3x off at 50 clients", by[("on", 50)].qps / by[("off", 50)].qps, 3.0, ">="),
        ("QPS at 50-100 clients >= 80% of offline ceiling", best_high / ceiling, 0.8, ">="),
        ("P99 at 100 clients (batching on) <= 1000 ms", by[("on", 100)].p99_ms, 1000.0, "<="),
        ("P50 at 1 client - single-input latency <= 10 ms", by[("on", 1)].p50_ms - single_ms, 10.0, "<="),
        (f"RSS growth over {rss_requests} requests <= 10%", rss_growth_pct, 10.0, "<="),
    ]
    print()
    print(f"{'mode':<5}{'clients':>8}{'QPS':>10}{'P50 ms':>10}{'P99 ms':>10}{'errors':>8}{'gen CPU%':>10}")
    for lv in levels:
        print(
            f"{lv.mode:<5}{lv.clients:>8}{lv.qps:>10.1f}{lv.p50_ms:>10.1f}{lv.p99_ms:>10.1f}{lv.errors:>8}{lv.generator_cpu_pct:>10.1f}"
        )
    print(f"offline ceiling: {ceiling:.1f} inputs/s (batch {best_batch}); single input {single_ms:.2f} ms")
    print()
    failed = 0
    for name, value, bound, op in targets:
        ok = value >= bound if op == ">=" else value <= bound
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value:.2f} (target {op} {bound:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
