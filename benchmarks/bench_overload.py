"""`make bench-overload`: does the reference service degrade gracefully under 10x overload and huge bodies?

1. Huge bodies: 4 x 10 MB POSTs at once, 5 rounds (Content-Length and chunked alternately) -> every answer
   413, and the service's RSS growth in % (target <= 5 %).
2. Capacity: wrk with a moderate connection count (closed loop) -> successful requests per second.
3. Overload: wrk at 500 and 1,000 connections for 20 s each, while side probers send a lean embedding
   request and GET /health every 50 ms. Printed per level: goodput vs capacity (target >= 80 %),
   P99 of admitted requests (server-side from Server-Timing for every 200, client-side from the probe)
   vs the deadline, 429 latency from the probe (target: all within 50 ms), the same for 16 requests sent
   densely into the opening burst (10-130 ms after the load is launched), /health P99 (target <= 100 ms),
   and the latency of the first request after the load (with its Server-Timing split; target <= 1.5x the
   same request's idle latency: sent alone on a new connection to the idle service, median of 7), beside the
   warm median (one kept-alive connection, back to back) and a lone request sent after 2 s without load.
   The load ends when wrk has exited and the side probes' last requests are answered.
wrk (Debian package `wrk`, `make system-deps`) drives the load; the service runs as a ServiceProcess.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from loadgen.headers import parse_server_timing
from loadgen.service_proc import ServiceProcess

BODY = {"input": "Capacity planning needs the P99 latency at every load step of the embedding service."}
PROBE_INTERVAL_S = 0.05
# The embedding probe's kept-alive connections, each left idle for its Retry-After after a 429.
PROBE_CONNECTIONS = 16
BURST_PROBES = 16
BURST_START_MS = 10.0
BURST_STEP_MS = 8.0  # 16 requests from 10 to 130 ms after the load is launched
HUGE_BODY_BYTES = 10 * 1024 * 1024
# The first request after a load counts as answered at normal latency within this factor of the same request's
# idle latency (`lone_median_ms`: alone, on a new connection, as that first request is). The warm median of
# back-to-back requests on one kept-alive connection is no such reference: on a 2-core host it is ~40 % lower.
NORMAL_LATENCY_FACTOR = 1.5
LONE_REFERENCE_COUNT = 7
LONE_REFERENCE_GAP_S = 0.5
# Counts statuses per thread and keeps the server-side total of every 200 (Server-Timing total;dur=ms).
# With honour_retry_after, every 429 delays one later request of the thread by its Retry-After, as the
# OpenAI SDK and other well-behaved clients do; without it, clients retry at once (the worst case).
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = %(body)s
local honour_retry_after = %(honour)s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) counts = {}; admitted_ms = {}; backoffs_ms = {}; rejected_max_ms = 0 end
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
  if status == 200 or status == 429 then
    local timing = headers["server-timing"] or headers["Server-Timing"] or ""
    local total = tonumber(string.match(timing, "total;dur=([%%d%%.]+)") or "")
    if total and status == 200 then table.insert(admitted_ms, total) end
    if total and status == 429 and total > rejected_max_ms then rejected_max_ms = total end
  end
end
function done(summary, latency, requests)
  local merged, all_ms, rejected_ms = {}, {}, 0
  for _, thread in ipairs(threads) do
    rejected_ms = math.max(rejected_ms, thread:get("rejected_max_ms") or 0)
    for status, n in pairs(thread:get("counts")) do merged[tostring(status)] = (merged[tostring(status)] or 0) + n end
    for _, ms in ipairs(thread:get("admitted_ms")) do table.insert(all_ms, ms) end
  end
  local parts = {}
  for status, n in pairs(merged) do table.insert(parts, string.format('"%%s": %%d', status, n)) end
  local ms_parts = {}
  for _, ms in ipairs(all_ms) do table.insert(ms_parts, string.format("%%.2f", ms)) end
  local e = summary.errors
  io.write(string.format('RESULT {"duration_s": %%f, "statuses": {%%s}, "admitted_server_ms": [%%s], '
    .. '"rejected_server_max_ms": %%f, "socket_errors": {"connect": %%d, "read": %%d, "write": %%d, "timeout": %%d}}\\n',
    summary.duration / 1e6, table.concat(parts, ", "), table.concat(ms_parts, ", "), rejected_ms,
    e.connect, e.read, e.write, e.timeout))
end
"""


def send(client: httpx.Client, method: str, url: str) -> tuple[int, float]:
    """One probe request (GET, or POST of BODY): its status (0 when no answer came) and the seconds its
    Retry-After asks for."""
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
    """A lean side client: one request every PROBE_INTERVAL_S, on kept-alive connections opened before the load.

    It honours Retry-After per connection, as the clients it stands for do: a connection refused with 429 is
    not used again before its Retry-After has passed; the next request goes on another of `connections`
    (a new one is opened only when all of them wait). A client sending again before that on the same
    connection is held by the service until it passes (its defence against clients that retry at once),
    and the probe would time that hold instead of the refusal.

    Its clients and connections are set up before the load starts (`start`): a new connection during the
    opening burst waits behind 1,000 others in the accept queue, and building an httpx client that loads a
    certificate bundle holds the GIL, which would stall the sibling probe and be misread as the service's
    latency (the clients skip the bundle: the service is plain HTTP on loopback).
    """

    url: str
    method: str
    connections: int = 1
    samples: list[tuple[int, float]] = field(default_factory=list)  # (status, latency_ms); 0 = no answer
    sent_s: list[float] = field(default_factory=list)  # perf_counter at each sample's send
    stop: threading.Event = field(default_factory=threading.Event)
    _pool: list[tuple[float, httpx.Client]] = field(default_factory=list)  # (usable from, client)

    def start(self) -> threading.Thread:
        """Open the connections (one request each, not counted), then probe from a thread."""
        for _ in range(self.connections):
            self._pool.append((0.0, self._connect()))
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def _connect(self) -> httpx.Client:
        client = probe_client()
        send(client, "GET", str(httpx.URL(self.url).copy_with(path="/health")))
        return client

    def _next_client(self) -> httpx.Client:
        now_s = time.perf_counter()
        ready = [i for i, (from_s, _) in enumerate(self._pool) if from_s <= now_s]
        if ready:
            return self._pool.pop(ready[0])[1]
        return probe_client()  # every connection waits out a Retry-After

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                client = self._next_client()
                t_start_s = time.perf_counter()
                status, retry_after_s = send(client, self.method, self.url)
                t_end_s = time.perf_counter()
                self.samples.append((status, (t_end_s - t_start_s) * 1000))
                self.sent_s.append(t_start_s)
                self._pool.append((t_end_s + (retry_after_s if status == 429 else 0.0), client))
                self.stop.wait(PROBE_INTERVAL_S)
        finally:
            for _, client in self._pool:
                client.close()

    def slow(self, t0_s: float, over_ms: float, status: int | None = None) -> str:
        """Samples slower than over_ms as 'latency ms at seconds after t0_s' (shows when the stalls happen)."""
        marks = [
            f"{ms:.0f} ms at {sent - t0_s:+.2f} s"
            for (code, ms), sent in zip(self.samples, self.sent_s, strict=True)
            if ms > over_ms and (status is None or code == status)
        ]
        return ", ".join(marks) or "none"

    def latencies_ms(self, status: int) -> list[float]:
        return sorted(ms for code, ms in self.samples if code == status)


@dataclass
class BurstProbe:
    """Requests sent densely into the opening burst of a load, when the service reads 1,000 new connections at
    once: BURST_PROBES kept-alive connections (opened before the load), one request each, BURST_STEP_MS apart
    from BURST_START_MS after the load is launched. The 50 ms side probe lands there once at most."""

    url: str
    samples: list[tuple[int, float, float]] = field(default_factory=list)  # (status, latency_ms, sent at ms)
    _clients: list[httpx.Client] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def arm(self) -> None:
        """Open the connections now (each with one uncounted request), before the load starts."""
        for _ in range(BURST_PROBES):
            client = httpx.Client(timeout=30.0)
            client.get(f"{self.url}/health")
            self._clients.append(client)

    def fire(self, t_load_s: float) -> None:
        """Send one request per connection at its moment after t_load_s (threads; `join` collects)."""
        for index, client in enumerate(self._clients):
            at_s = t_load_s + (BURST_START_MS + index * BURST_STEP_MS) / 1000
            thread = threading.Thread(target=self._send, args=(client, at_s, t_load_s), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _send(self, client: httpx.Client, at_s: float, t_load_s: float) -> None:
        time.sleep(max(0.0, at_s - time.perf_counter()))
        t_start_s = time.perf_counter()
        status, _ = send(client, "POST", f"{self.url}/v1/embeddings")
        self.samples.append((status, (time.perf_counter() - t_start_s) * 1000, (t_start_s - t_load_s) * 1000))

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)
        for client in self._clients:
            client.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def run_wrk(url: str, script: Path, connections: int, duration_s: int, threads: int) -> dict[str, object]:
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration_s}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        f"{url}/v1/embeddings",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 60).stdout
    line = next((row for row in out.splitlines() if row.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"wrk printed no result:\n{out}")
    result: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return result


def idle_latency_ms(url: str, count: int = 20) -> float:
    with httpx.Client(timeout=30) as client:
        samples = []
        for _ in range(count):
            t_start_s = time.perf_counter()
            response = client.post(f"{url}/v1/embeddings", json=BODY)
            if response.status_code != 200:
                raise SystemExit(f"an idle request failed: {response.status_code} {response.text[:300]}")
            samples.append((time.perf_counter() - t_start_s) * 1000)
    return statistics.median(samples)


def timed_post(client: httpx.Client, url: str) -> tuple[int, float, dict[str, float]]:
    """POST BODY to the service's embeddings route: status, latency_ms and the parsed Server-Timing."""
    t_start_s = time.perf_counter()
    response = client.post(f"{url}/v1/embeddings", json=BODY)
    latency_ms = (time.perf_counter() - t_start_s) * 1000
    return response.status_code, latency_ms, parse_server_timing(response.headers.get("server-timing"))


def lone_request(url: str) -> tuple[float, dict[str, float]]:
    """One request on a new connection to a service left without load: its latency_ms and Server-Timing.

    The fair reference for the first request after a load, which also comes alone on a new connection: on a
    small host the first computation after a few idle seconds runs slower than the warm median (`idle_ms`)."""
    with httpx.Client(timeout=30) as client:
        _, latency_ms, timing = timed_post(client, url)
    return latency_ms, timing


def lone_median_ms(url: str, count: int = LONE_REFERENCE_COUNT, gap_s: float = LONE_REFERENCE_GAP_S) -> float:
    """Median latency_ms of count requests to the idle service, each alone on a new connection, gap_s apart:
    the normal latency of a request like the first one after a load."""
    samples = []
    for _ in range(count):
        time.sleep(gap_s)
        latency_ms, _ = lone_request(url)
        samples.append(latency_ms)
    return statistics.median(samples)


def normal_latency_verdict(status: int, latency_ms: float, lone_ms: float, warm_ms: float) -> str:
    """`target <= 1.5x the same request alone on the idle service (18 ms): met; 1.2x the warm median 12 ms`."""
    met = status == 200 and latency_ms <= NORMAL_LATENCY_FACTOR * lone_ms
    return (
        f"target <= {NORMAL_LATENCY_FACTOR:g}x the same request alone on the idle service ({lone_ms:.0f} ms): "
        f"{'met' if met else 'NOT met'}; {latency_ms / warm_ms:.1f}x the warm median {warm_ms:.0f} ms"
    )


def huge_bodies(service: ServiceProcess, rounds: int = 5) -> None:
    payload = b'{"input": "' + b"x" * HUGE_BODY_BYTES + b'"}'

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

    process = psutil.Process(service.pid)
    idle_latency_ms(service.url, 50)  # allocator warm: RSS growth is measured from a served state
    rss_before_mb = process.memory_info().rss / 2**20
    statuses: list[int] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for index in range(rounds):
            bodies = [payload] * 4 if index % 2 == 0 else [chunked() for _ in range(4)]
            statuses += list(pool.map(post, bodies))
    rss_after_mb = process.memory_info().rss / 2**20
    growth_pct = (rss_after_mb / rss_before_mb - 1) * 100
    print(
        f"huge bodies: {rounds} rounds of 4 x {HUGE_BODY_BYTES >> 20} MB -> statuses "
        f"{dict(sorted((s, statuses.count(s)) for s in set(statuses)))}; RSS {rss_before_mb:.0f} -> "
        f"{rss_after_mb:.0f} MB ({growth_pct:+.1f} %, target <= 5 %)",
        flush=True,
    )


Answer = tuple[float, int, float, dict[str, float]]  # sent at (ms after the load), status, latency_ms, timing


def recovery(url: str, idle_ms: float) -> tuple[list[Answer], float]:
    """Requests sent one after another (20 ms apart) from the moment the load stops: (sent at, ms after the
    load; status; latency_ms; its Server-Timing) of each, until one gets a 200 within 3x the idle median
    latency (back to normal), and how long after the load that answer came."""
    t_load_end_s = time.perf_counter()
    answers: list[Answer] = []
    with httpx.Client(timeout=30) as client:
        while time.perf_counter() - t_load_end_s < 30:
            t_start_s = time.perf_counter()
            status, latency_ms, timing = timed_post(client, url)
            answers.append(((t_start_s - t_load_end_s) * 1000, status, latency_ms, timing))
            if status == 200 and latency_ms <= 3 * idle_ms:
                break
            time.sleep(0.02)
    return answers, (time.perf_counter() - t_load_end_s) * 1000


def in_service(timing: dict[str, float]) -> str:
    """`; in the service: 24 ms, of which queue 1 ms, compute 20 ms` from a parsed Server-Timing, or ''."""
    if "srv_total_ms" not in timing:
        return ""
    parts = [
        f"{name} {timing[f'srv_{name}_ms']:.0f} ms"
        for name in ("queue", "compute")
        if f"srv_{name}_ms" in timing
    ]
    return f"; in the service: {timing['srv_total_ms']:.0f} ms" + (
        f", of which {', '.join(parts)}" if parts else ""
    )


def capacity_qps(service: ServiceProcess, script: Path, args: argparse.Namespace) -> float:
    """Closed-loop goodput at a moderate connection count: what the service can do here, now."""
    result = run_wrk(
        service.url, script, args.capacity_connections, args.capacity_duration_s, args.wrk_threads
    )
    statuses = {int(k): v for k, v in result["statuses"].items()}  # type: ignore[attr-defined]
    qps = statuses.get(200, 0) / float(result["duration_s"])  # type: ignore[arg-type]
    print(
        f"\ncapacity (wrk {args.capacity_connections} connections, {args.capacity_duration_s} s): "
        f"{qps:.1f} req/s; statuses {dict(sorted(statuses.items()))}",
        flush=True,
    )
    return qps


def overload(service: ServiceProcess, script: Path, args: argparse.Namespace) -> None:
    """Per level: capacity measured just before (the host's other load drifts), then the overload run."""
    idle_ms, lone_ref_ms = idle_references(service.url)
    for connections in args.connections:
        capacity = capacity_qps(service, script, args)
        time.sleep(2)
        lone_ms, lone_timing = lone_request(service.url)  # what a first request looks like without any load
        time.sleep(0.5)
        health = Probe(f"{service.url}/health", "GET")
        embed = Probe(f"{service.url}/v1/embeddings", "POST", connections=PROBE_CONNECTIONS)
        probers = [probe.start() for probe in (health, embed)]
        burst = BurstProbe(service.url)
        burst.arm()
        t_load_s = time.perf_counter()
        burst.fire(t_load_s)
        result = run_wrk(service.url, script, connections, args.duration_s, args.wrk_threads)
        t_wrk_end_s = time.perf_counter()
        for probe in (health, embed):  # the probes measure the load; after it they would be a load themselves
            probe.stop.set()
        # The load ends when the probes' own last requests are answered too: a request sent before would
        # share a batch with them and time the tail of the load, not the service after it.
        for thread in probers:
            thread.join(timeout=15)
        burst.join()
        drained_ms = (time.perf_counter() - t_wrk_end_s) * 1000
        answers, recovered_ms = recovery(service.url, idle_ms)
        statuses = {int(k): v for k, v in result["statuses"].items()}  # type: ignore[attr-defined]
        duration_s = float(result["duration_s"])  # type: ignore[arg-type]
        goodput = statuses.get(200, 0) / duration_s
        admitted_ms: list[float] = result["admitted_server_ms"]  # type: ignore[assignment]
        rejections = embed.latencies_ms(429)
        health_ms = [ms for status, ms in health.samples if status == 200]
        unanswered = sum(1 for status, _ in health.samples if status != 200)
        print(
            f"== wrk {connections} connections, {duration_s:.0f} s, deadline {args.deadline_ms} ms",
            flush=True,
        )
        print(f"statuses: {dict(sorted(statuses.items()))}; socket errors: {result['socket_errors']}")
        print(
            f"goodput: {goodput:.1f} req/s = {goodput / capacity * 100:.0f} % of capacity "
            f"{capacity:.1f} req/s (target >= 80 %)"
        )
        print(
            f"admitted P99: server {percentile(admitted_ms, 99):.0f} ms over {len(admitted_ms)} requests; "
            f"probe {percentile(embed.latencies_ms(200), 99):.0f} ms over {len(embed.latencies_ms(200))} "
            f"(deadline {args.deadline_ms} ms)"
        )
        within = sum(1 for ms in rejections if ms <= 50)
        print(
            f"429 latency (probe, as a client sees it): {within}/{len(rejections)} within 50 ms; P99 "
            f"{percentile(rejections, 99):.1f} ms, max {max(rejections, default=float('nan')):.1f} ms; "
            f"in the service (Server-Timing of all {statuses.get(429, 0)} wrk 429s): max "
            f"{float(result['rejected_server_max_ms']):.2f} ms"  # type: ignore[arg-type]
        )
        burst_rejections = [ms for status, ms, _ in burst.samples if status == 429]
        burst_statuses = [status for status, _, _ in burst.samples]
        print(
            f"opening burst ({len(burst.samples)} requests {BURST_START_MS:.0f}-"
            f"{BURST_START_MS + (BURST_PROBES - 1) * BURST_STEP_MS:.0f} ms after the load was launched): statuses "
            f"{dict(sorted((s, burst_statuses.count(s)) for s in set(burst_statuses)))}; 429s within 50 ms: "
            f"{sum(1 for ms in burst_rejections if ms <= 50)}/{len(burst_rejections)}, max "
            f"{max(burst_rejections, default=float('nan')):.1f} ms"
            + "".join(
                f"; {ms:.0f} ms sent at +{sent:.0f} ms"
                for status, ms, sent in sorted(burst.samples, key=lambda sample: sample[2])
                if status == 429 and ms > 50
            )
        )
        print(
            f"/health: P99 {percentile(health_ms, 99):.1f} ms, max {max(health_ms, default=float('nan')):.1f} "
            f"ms over {len(health_ms)} probes, {unanswered} unanswered (target P99 <= 100 ms)"
        )
        print(
            f"slow probes (seconds after the load started): /health over 100 ms: {health.slow(t_load_s, 100)}; "
            f"429 over 50 ms: {embed.slow(t_load_s, 50, 429)}"
        )
        _, first_status, first_ms, first_timing = answers[0]
        following = ", ".join(
            f"+{sent:.0f} ms: {status} in {ms:.0f} ms" for sent, status, ms, _ in answers[1:6]
        )
        print(
            f"first request after the load (wrk exited, the probes' last answers in {drained_ms:.0f} ms): "
            f"{first_status} in {first_ms:.0f} ms{in_service(first_timing)} "
            f"({normal_latency_verdict(first_status, first_ms, lone_ref_ms, idle_ms)}; "
            f"a lone request after 2 s without load {lone_ms:.0f} ms"
            f"{in_service(lone_timing)}); a 200 within 3x the idle median {recovered_ms:.0f} ms after the load"
            + (f" (then {following})" if following else "")
        )
        time.sleep(2)


def wrk_found() -> bool:
    """Whether wrk is on PATH; says how to install it when not."""
    if shutil.which("wrk") is None:
        print(
            "wrk not found on PATH; install it with `make system-deps` (Debian package wrk)", file=sys.stderr
        )
        return False
    return True


def wrk_script(directory: Path, honour_retry_after: bool) -> Path:
    """WRK_SCRIPT for BODY, written to directory/embed.lua."""
    script = directory / "embed.lua"
    honour = "true" if honour_retry_after else "false"
    script.write_text(WRK_SCRIPT % {"body": json.dumps(json.dumps(BODY)), "honour": honour})
    return script


def add_service_options(parser: argparse.ArgumentParser) -> None:
    """The service's options in every wrk benchmark (read back by `service_args`)."""
    parser.add_argument("--deadline-ms", type=int, default=5000, help="the service's --deadline-ms")
    parser.add_argument(
        "--service-arg", action="append", default=[], help="extra flag for the service (repeatable)"
    )


def add_round_options(parser: argparse.ArgumentParser, rounds: int, load_s: int, pause_help: str) -> None:
    """The options of a benchmark that loads the service in rounds of wrk, plus the service's."""
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--load-s", type=int, default=load_s, help="wrk's duration per round")
    parser.add_argument("--pause-s", type=float, default=3.0, help=pause_help)
    add_service_options(parser)


def service_args(args: argparse.Namespace) -> list[str]:
    """The service's flags: the deadline, connections kept open while idle for 30 s (clients that honour
    Retry-After leave theirs idle for seconds), then every --service-arg."""
    return ["--deadline-ms", str(args.deadline_ms), "--keep-alive-timeout-s", "30", *args.service_arg]


@contextlib.contextmanager
def wrk_service(
    args: argparse.Namespace, honour_retry_after: bool = True
) -> Iterator[tuple[ServiceProcess, Path]]:
    """The service started with `service_args(args)` (its address printed) and wrk's Lua script for it."""
    with tempfile.TemporaryDirectory() as tmp:
        script = wrk_script(Path(tmp), honour_retry_after=honour_retry_after)
        flags = service_args(args)
        with ServiceProcess(flags, log_path=Path(tmp) / "service.log") as service:
            clients = "honour Retry-After" if honour_retry_after else "retry 429s at once"
            print(f"service {service.url} pid {service.pid} args {flags}; wrk clients {clients}", flush=True)
            yield service, script


def idle_references(url: str) -> tuple[float, float]:
    """The idle latencies a first request after a load is judged against, printed: (the warm median, the same
    request alone on a new connection)."""
    idle_ms = idle_latency_ms(url)
    lone_ms = lone_median_ms(url)
    print(
        f"idle latency: warm median {idle_ms:.1f} ms (one kept-alive connection, back to back); alone on a new "
        f"connection, median of {LONE_REFERENCE_COUNT}: {lone_ms:.1f} ms",
        flush=True,
    )
    return idle_ms, lone_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Overload and huge-body benchmark of the reference service.")
    parser.add_argument("--connections", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--duration-s", type=int, default=20)
    parser.add_argument(
        "--capacity-connections",
        type=int,
        default=128,
        help="enough to fill batches, few enough to be admitted",
    )
    parser.add_argument("--capacity-duration-s", type=int, default=10)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument(
        "--ignore-retry-after",
        action="store_true",
        help="wrk connections retry a 429 at once instead of waiting its Retry-After (worst case)",
    )
    add_service_options(parser)
    parser.add_argument("--skip-huge-bodies", action="store_true")
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    with wrk_service(args, honour_retry_after=not args.ignore_retry_after) as (service, script):
        if not args.skip_huge_bodies:
            huge_bodies(service)
        overload(service, script, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
