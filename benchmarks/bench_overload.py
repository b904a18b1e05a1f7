"""`make bench-overload`: does the reference service degrade gracefully under overload and abuse?

1. Huge bodies: 4 x 10 MB POSTs at once, 5 rounds (Content-Length and chunked alternately) -> every answer
   413, and the service's RSS growth in % (target <= 5 %).
2. The large request: 2,048 inputs of ~300 words (within the body limit) with a one-input request sent beside
   it -> both statuses and latencies (the small one against its idle latency), RSS before and after.
3. Fairness: wrk at 100 connections, every request the same text -> P50, P99 and their ratio (target <= 1.5).
4. Overload, per level (500 and 1,000 connections, 20 s): closed-loop capacity measured just before (wrk at a
   moderate connection count), then wrk with clients that honour Retry-After while side probers send a lean
   embedding request and GET /health every 50 ms. Printed: goodput vs capacity (target >= 80 %), P99 of
   admitted requests (server-side, Server-Timing of every 200) vs the deadline, 429 latency server-side (every
   wrk 429's Server-Timing; target P99 <= 50 ms) and as the probe sees it, /health P99 (target <= 250 ms).
wrk (Debian package `wrk`, `make system-deps`) drives the load; the service runs as a ServiceProcess. Figures
from a small shared host are that host's: compare them side by side, never across machines.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from benchmarks.wrk_run import run_wrk, wrk_found
from loadgen.processes.service_proc import ServiceProcess

MODEL = "all-MiniLM-L6-v2"
BODY = {
    "model": MODEL,
    "input": "Capacity planning needs the P99 latency at every load step of the embedding service.",
}
PROBE_INTERVAL_S = 0.05
PROBE_CONNECTIONS = 16  # the embedding probe's kept-alive connections, each left idle for its Retry-After
HUGE_BODY_BYTES = 10 * 1024 * 1024
LARGE_REQUEST_INPUTS = 2048
LARGE_REQUEST_WORDS = 300
# Counts statuses and keeps the server-side total (Server-Timing total;dur=ms) of every 200 and every 429.
# With honour_retry_after, every 429 delays one later request of the thread by its Retry-After, as the
# OpenAI SDK and other well-behaved clients do; without it, clients retry at once (the worst case).
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = %(body)s
local honour_retry_after = %(honour)s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) counts = {}; admitted_ms = {}; rejected_ms = {}; backoffs_ms = {} end
function delay()
  if #backoffs_ms > 0 then return table.remove(backoffs_ms, 1) end
  return 0
end
function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if honour_retry_after and status == 429 then
    local after_s = tonumber(headers["retry-after"] or headers["Retry-After"] or "1") or 1
    table.insert(backoffs_ms, after_s * 1000)
  end
  local timing = headers["server-timing"] or headers["Server-Timing"] or ""
  local total = tonumber(string.match(timing, "total;dur=([%%d%%.]+)") or "")
  if total and status == 200 then table.insert(admitted_ms, total) end
  if total and status == 429 then table.insert(rejected_ms, total) end
end
local function join(values)
  local parts = {}
  for _, ms in ipairs(values) do table.insert(parts, string.format("%%.2f", ms)) end
  return table.concat(parts, ", ")
end
function done(summary, latency, requests)
  local merged, admitted, rejected = {}, {}, {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("counts")) do merged[tostring(status)] = (merged[tostring(status)] or 0) + n end
    for _, ms in ipairs(thread:get("admitted_ms")) do table.insert(admitted, ms) end
    for _, ms in ipairs(thread:get("rejected_ms")) do table.insert(rejected, ms) end
  end
  local parts = {}
  for status, n in pairs(merged) do table.insert(parts, string.format('"%%s": %%d', status, n)) end
  local e = summary.errors
  io.write(string.format('RESULT {"duration_s": %%f, "statuses": {%%s}, "admitted_server_ms": [%%s], '
    .. '"rejected_server_ms": [%%s], "p50_ms": %%f, "p99_ms": %%f, '
    .. '"socket_errors": {"connect": %%d, "read": %%d, "write": %%d, "timeout": %%d}}\\n',
    summary.duration / 1e6, table.concat(parts, ", "), join(admitted), join(rejected),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, e.connect, e.read, e.write, e.timeout))
end
"""


def send(client: httpx.Client, method: str, url: str) -> tuple[int, float]:
    """One probe request (GET, or POST of BODY): its status (0 when no answer came) and its Retry-After (s)."""
    try:
        response = client.get(url) if method == "GET" else client.post(url, json=BODY)
    except httpx.HTTPError:
        return 0, 0.0
    try:
        return response.status_code, float(response.headers.get("retry-after", 0))
    except ValueError:
        return response.status_code, 0.0


def probe_client() -> httpx.Client:
    """A probe's client: no certificate bundle to load (plain HTTP on loopback), so building it is cheap."""
    return httpx.Client(timeout=10.0, verify=False)


@dataclass
class Probe:
    """A lean side client: one request every PROBE_INTERVAL_S on kept-alive connections opened before the load;
    a connection refused with 429 is not used again before its Retry-After has passed."""

    url: str
    method: str
    connections: int = 1
    samples: list[tuple[int, float]] = field(default_factory=list)  # (status, latency_ms); 0 = no answer
    stop: threading.Event = field(default_factory=threading.Event)
    _pool: list[tuple[float, httpx.Client]] = field(default_factory=list)  # (usable from, client)

    def start(self) -> threading.Thread:
        for _ in range(self.connections):
            client = probe_client()
            send(client, "GET", str(httpx.URL(self.url).copy_with(path="/health")))
            self._pool.append((0.0, client))
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def _next_client(self) -> httpx.Client:
        now_s = time.perf_counter()
        ready = [i for i, (from_s, _) in enumerate(self._pool) if from_s <= now_s]
        return self._pool.pop(ready[0])[1] if ready else probe_client()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                client = self._next_client()
                t_start_s = time.perf_counter()
                status, retry_after_s = send(client, self.method, self.url)
                t_end_s = time.perf_counter()
                self.samples.append((status, (t_end_s - t_start_s) * 1000))
                self._pool.append((t_end_s + (retry_after_s if status == 429 else 0.0), client))
                self.stop.wait(PROBE_INTERVAL_S)
        finally:
            for _, client in self._pool:
                client.close()

    def latencies_ms(self, status: int) -> list[float]:
        return sorted(ms for code, ms in self.samples if code == status)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def wrk_result(url: str, script: Path, connections: int, duration_s: int, threads: int) -> dict[str, object]:
    out = run_wrk(f"{url}/v1/embeddings", script, connections, duration_s, threads)
    line = next((row for row in out.stdout.splitlines() if row.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"wrk printed no result:\n{out.stdout}\n{out.stderr}")
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return result


def statuses_of(result: dict[str, object]) -> dict[int, int]:
    return {int(k): v for k, v in result["statuses"].items()}  # type: ignore[attr-defined]


def rss_mb(service: ServiceProcess) -> float:
    return float(psutil.Process(service.pid).memory_info().rss / 2**20)


def timed_post(url: str, body: object, timeout_s: float = 120) -> tuple[int, float, str]:
    """(status, latency_ms, error code or '') of one POST /v1/embeddings on a new connection."""
    t_start_s = time.perf_counter()
    response = httpx.post(f"{url}/v1/embeddings", json=body, timeout=timeout_s)
    latency_ms = (time.perf_counter() - t_start_s) * 1000
    code = "" if response.status_code == 200 else response.json().get("error", {}).get("code", "")
    return response.status_code, latency_ms, code


def warm(url: str, count: int = 50) -> float:
    """Median latency_ms of `count` lone requests on a new connection each (and a warm allocator)."""
    return statistics.median(timed_post(url, BODY)[1] for _ in range(count))


def huge_bodies(service: ServiceProcess, rounds: int = 5) -> None:
    payload = b'{"model": "' + MODEL.encode() + b'", "input": "' + b"x" * HUGE_BODY_BYTES + b'"}'

    def chunked() -> Iterator[bytes]:
        for start in range(0, len(payload), 1 << 20):
            yield payload[start : start + (1 << 20)]

    def post(content: bytes | Iterator[bytes]) -> int:
        headers = {"content-type": "application/json"}
        try:
            return httpx.post(
                f"{service.url}/v1/embeddings", content=content, headers=headers, timeout=60
            ).status_code
        except httpx.HTTPError:
            return 0

    warm(service.url)  # RSS growth is measured from a served state
    rss_before_mb = rss_mb(service)
    statuses: list[int] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for index in range(rounds):
            bodies = [payload] * 4 if index % 2 == 0 else [chunked() for _ in range(4)]
            statuses += list(pool.map(post, bodies))
    rss_after_mb = rss_mb(service)
    growth_pct = (rss_after_mb / rss_before_mb - 1) * 100
    print(
        f"huge bodies: {rounds} rounds of 4 x {HUGE_BODY_BYTES >> 20} MB -> statuses "
        f"{dict(sorted((s, statuses.count(s)) for s in set(statuses)))}; RSS {rss_before_mb:.0f} -> "
        f"{rss_after_mb:.0f} MB ({growth_pct:+.1f} %, target <= 5 %)",
        flush=True,
    )


def large_request(service: ServiceProcess) -> None:
    """2,048 inputs of ~300 words with a one-input request sent 50 ms after it: refused up front, or served
    while the small one answers within a few batch times."""
    vocabulary = [
        "the",
        "service",
        "batches",
        "requests",
        "of",
        "many",
        "users",
        "on",
        "one",
        "device",
        "and",
        "answers",
        "each",
    ]
    words = " ".join(vocabulary[i % len(vocabulary)] for i in range(LARGE_REQUEST_WORDS))
    body = {"model": MODEL, "input": [f"{i} {words}" for i in range(LARGE_REQUEST_INPUTS)]}
    idle_ms = warm(service.url, 20)
    rss_before_mb = rss_mb(service)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        large = pool.submit(timed_post, service.url, body, 600)
        time.sleep(0.05)
        small = pool.submit(timed_post, service.url, BODY)
        large_status, large_ms, large_code = large.result()
        small_status, small_ms, _ = small.result()
    rss_after_mb = rss_mb(service)
    time.sleep(2)
    print(
        f"large request ({LARGE_REQUEST_INPUTS} x {LARGE_REQUEST_WORDS} words, "
        f"{len(json.dumps(body)) / 2**20:.1f} MB): {large_status} {large_code} in {large_ms:.0f} ms; a one-input "
        f"request beside it: {small_status} in {small_ms:.0f} ms (alone: {idle_ms:.0f} ms); RSS "
        f"{rss_before_mb:.0f} -> {rss_after_mb:.0f} MB, {rss_mb(service):.0f} MB 2 s later",
        flush=True,
    )


def fairness(service: ServiceProcess, script: Path, args: argparse.Namespace) -> None:
    """wrk at 100 connections, one text for all: P99/P50 says how close to arrival order requests are served."""
    wrk_result(
        service.url, script, args.fairness_connections, 3, args.wrk_threads
    )  # warm batches and estimate
    result = wrk_result(
        service.url, script, args.fairness_connections, args.fairness_duration_s, args.wrk_threads
    )
    p50, p99 = float(result["p50_ms"]), float(result["p99_ms"])  # type: ignore[arg-type]
    print(
        f"fairness (wrk {args.fairness_connections} connections, equal-length texts, {args.fairness_duration_s} s): "
        f"statuses {dict(sorted(statuses_of(result).items()))}; P50 {p50:.0f} ms, P99 {p99:.0f} ms, "
        f"P99/P50 {p99 / p50:.2f} (target <= 1.5)",
        flush=True,
    )


def capacity_qps(service: ServiceProcess, script: Path, args: argparse.Namespace) -> float:
    """Closed-loop goodput at a moderate connection count: what the service can do here, now."""
    result = wrk_result(
        service.url, script, args.capacity_connections, args.capacity_duration_s, args.wrk_threads
    )
    statuses = statuses_of(result)
    qps = statuses.get(200, 0) / float(result["duration_s"])  # type: ignore[arg-type]
    print(
        f"\ncapacity (wrk {args.capacity_connections} connections, {args.capacity_duration_s} s): "
        f"{qps:.1f} req/s; statuses {dict(sorted(statuses.items()))}",
        flush=True,
    )
    return qps


def overload(service: ServiceProcess, script: Path, args: argparse.Namespace) -> None:
    """Per level: capacity measured just before (the host's other load drifts), then the overload run."""
    for connections in args.connections:
        capacity = capacity_qps(service, script, args)
        time.sleep(2)
        health = Probe(f"{service.url}/health", "GET")
        embed = Probe(f"{service.url}/v1/embeddings", "POST", connections=PROBE_CONNECTIONS)
        probers = [probe.start() for probe in (health, embed)]
        result = wrk_result(service.url, script, connections, args.duration_s, args.wrk_threads)
        for probe in (health, embed):
            probe.stop.set()
        for thread in probers:
            thread.join(timeout=15)
        statuses = statuses_of(result)
        goodput = statuses.get(200, 0) / float(result["duration_s"])  # type: ignore[arg-type]
        admitted_ms: list[float] = result["admitted_server_ms"]  # type: ignore[assignment]
        rejected_ms: list[float] = result["rejected_server_ms"]  # type: ignore[assignment]
        rejections = embed.latencies_ms(429)
        health_ms = [ms for status, ms in health.samples if status == 200]
        unanswered = sum(1 for status, _ in health.samples if status != 200)
        print(
            f"== wrk {connections} connections, {args.duration_s} s, clients honour Retry-After: "
            f"{not args.ignore_retry_after}",
            flush=True,
        )
        print(f"statuses: {dict(sorted(statuses.items()))}; socket errors: {result['socket_errors']}")
        print(
            f"goodput: {goodput:.1f} req/s = {goodput / capacity * 100:.0f} % of capacity {capacity:.1f} req/s "
            "(target >= 80 %)"
        )
        print(
            f"admitted P99 (server): {percentile(admitted_ms, 99):.0f} ms over {len(admitted_ms)} requests, max "
            f"{max(admitted_ms, default=float('nan')):.0f} ms (deadline {args.deadline_ms} ms); probe P99 "
            f"{percentile(embed.latencies_ms(200), 99):.0f} ms"
        )
        print(
            f"429 in the service (Server-Timing of {len(rejected_ms)} wrk 429s): P99 "
            f"{percentile(rejected_ms, 99):.2f} ms, max {max(rejected_ms, default=float('nan')):.2f} ms (target "
            f"P99 <= 50 ms); as the probe sees them: P99 {percentile(rejections, 99):.1f} ms over {len(rejections)}"
        )
        print(
            f"/health: P99 {percentile(health_ms, 99):.1f} ms, max {max(health_ms, default=float('nan')):.1f} ms "
            f"over {len(health_ms)} probes, {unanswered} unanswered (target P99 <= 250 ms)",
            flush=True,
        )
        time.sleep(2)


def wrk_script(directory: Path, honour_retry_after: bool) -> Path:
    """WRK_SCRIPT for BODY, written to directory/embed.lua."""
    script = directory / "embed.lua"
    honour = "true" if honour_retry_after else "false"
    script.write_text(WRK_SCRIPT % {"body": json.dumps(json.dumps(BODY)), "honour": honour})
    return script


@contextlib.contextmanager
def wrk_service(args: argparse.Namespace) -> Iterator[tuple[ServiceProcess, Path]]:
    """The service (deadline, 30 s keep-alive: clients honouring Retry-After leave connections idle for
    seconds, then every --service-arg) and wrk's Lua script for it."""
    with tempfile.TemporaryDirectory() as tmp:
        script = wrk_script(Path(tmp), honour_retry_after=not args.ignore_retry_after)
        flags = ["--deadline-ms", str(args.deadline_ms), "--keep-alive-timeout-s", "30", *args.service_arg]
        with ServiceProcess(flags, log_path=Path(tmp) / "service.log") as service:
            print(f"service {service.url} pid {service.pid} args {flags}", flush=True)
            yield service, script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Overload, abuse and fairness benchmark of the reference service."
    )
    parser.add_argument("--connections", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--duration-s", type=int, default=20)
    parser.add_argument(
        "--capacity-connections",
        type=int,
        default=128,
        help="enough to fill batches, few enough to be admitted",
    )
    parser.add_argument("--capacity-duration-s", type=int, default=10)
    parser.add_argument("--fairness-connections", type=int, default=100)
    parser.add_argument("--fairness-duration-s", type=int, default=15)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument(
        "--ignore-retry-after", action="store_true", help="wrk connections retry a 429 at once (worst case)"
    )
    parser.add_argument("--deadline-ms", type=int, default=5000, help="the service's --deadline-ms")
    parser.add_argument(
        "--service-arg", action="append", default=[], help="extra flag for the service (repeatable)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["huge", "large", "fairness", "overload"],
        default=["huge", "large", "fairness", "overload"],
        help="the parts to run",
    )
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with wrk_service(args) as (service, script):
        if "huge" in args.only:
            huge_bodies(service)
        if "large" in args.only:
            large_request(service)
        if "fairness" in args.only:
            fairness(service, script, args)
        if "overload" in args.only:
            overload(service, script, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
