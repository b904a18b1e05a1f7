"""`make peers`: the reference service against Infinity, same model, same threads, same closed loop.

Answers "is the reference service a fair baseline?" with one table. Per round each server in turn (the
order alternates between rounds) is started on the packaged all-MiniLM-L6-v2, fp32 on CPU, torch on the
same number of threads, batches of at most 32, no embedding cache; warmed by a short wrk run; loaded by
wrk at each connection count with the same single-text request in its own shape and path (the reference:
POST /v1/embeddings; Infinity: POST /embeddings under the model id it lists); and stopped by PID. wrk's Lua
`done()` reports exact counts and its latency percentiles. Printed per connection count: goodput (2xx per
second) and P50/P99 of each server as the median over rounds, the reference/Infinity ratios as the median
of the rounds' ratios (each round's pair ran back to back), and wrk's own CPU, since both servers and
the generator share this host's cores and absolute figures drift with other work on it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.peer_launch import PeerProcess, infinity_command, peer_bin

# The repository root, for tests.peers (the launcher the tests use too), which is no installed package.
from benchmarks.wrk_run import run_wrk as wrk
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from service.model_folder import default_model_path

TEXT = "Capacity planning needs the P99 latency at every load step."
REFERENCE_MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
WARM_S = 3
READY_TIMEOUT_S = 300.0
# wrk prints this line from the Lua done() hook: counts and percentiles straight from its histogram (us).
WRK_DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "non_2xx": %d, "socket_errors": %d, '
    .. '"p50_us": %d, "p99_us": %d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    math.floor(latency:percentile(50)), math.floor(latency:percentile(99))))
end
"""


@dataclass(frozen=True)
class Target:
    """One server under load: its name, the URL wrk posts to, and the body it posts."""

    name: str
    url: str
    body: dict[str, object]


@dataclass(frozen=True)
class WrkResult:
    qps: float  # 2xx answers per second
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    wrk_cpu_cores: float  # wrk's user+system CPU seconds per second of its run


def wrk_script(body: dict[str, object], into: Path) -> Path:
    into.write_text(
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        f"wrk.body = [[{json.dumps(body)}]]\n{WRK_DONE}"
    )
    return into


def run_wrk(url: str, script: Path, connections: int, duration_s: int) -> WrkResult:
    """One closed-loop wrk run; its CPU is read from this process's reaped children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = wrk(url, script, connections, duration_s)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRK_JSON ")), None)
    if line is None:
        raise SystemExit(f"wrk printed no result for {url}:\n{out.stdout}\n{out.stderr}")
    report = json.loads(line.removeprefix("WRK_JSON "))
    duration_s_measured = report["duration_us"] / 1e6
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return WrkResult(
        qps=(report["requests"] - report["non_2xx"]) / duration_s_measured,
        p50_ms=report["p50_us"] / 1000,
        p99_ms=report["p99_us"] / 1000,
        non_2xx=report["non_2xx"],
        socket_errors=report["socket_errors"],
        wrk_cpu_cores=cpu_s / duration_s_measured,
    )


def check_answer(target: Target) -> None:
    """One request before any load: a 200 with one 384-dim vector, so no table is built from error pages."""
    answer = httpx.post(target.url, json=target.body, timeout=60)
    data = answer.json().get("data") if answer.status_code == 200 else None
    if not data or len(data[0]["embedding"]) != DIM:
        raise SystemExit(f"{target.name} at {target.url} answered {answer.status_code}: {answer.text[:300]}")


@contextmanager
def reference_target(threads: int, log_path: Path) -> Iterator[Target]:
    """The reference service as `make bench` starts it, with torch on `threads` threads."""
    args = [*RAMP_SERVICE_ARGS, "--threads", str(threads), "--log-level", "warning"]
    with ServiceProcess(args, log_path=log_path, ready_timeout_s=READY_TIMEOUT_S) as service:
        yield Target(
            "reference", f"{service.url}/v1/embeddings", {"model": REFERENCE_MODEL_NAME, "input": TEXT}
        )


@contextmanager
def infinity_target(threads: int, log_path: Path) -> Iterator[Target]:
    """Infinity on the same folder, fp32, batches of 32, torch on `threads` threads (OMP_NUM_THREADS)."""
    command = infinity_command(default_model_path(), torch_threads=threads)
    with PeerProcess(command, log_path, ready_timeout_s=READY_TIMEOUT_S) as peer:
        model_id = httpx.get(f"{peer.api_url}/models", timeout=30).json()["data"][0]["id"]
        yield Target("infinity", f"{peer.api_url}/embeddings", {"model": model_id, "input": TEXT})


SERVERS = {"reference": reference_target, "infinity": infinity_target}


def infinity_version() -> str:
    out = subprocess.run(
        [
            str(peer_bin("infinity", "python")),
            "-c",
            "import importlib.metadata as m; print(m.version('infinity-emb'))",
        ],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def table(results: dict[tuple[str, int], list[WrkResult]], connections: list[int], rounds: int) -> str:
    head = (
        f"{'conns':>5} | {'ref QPS':>8} {'inf QPS':>8} {'ref/inf':>7} | {'ref P50':>8} {'ref P99':>8} | "
        f"{'inf P50':>8} {'inf P99':>8} | {'P99 ref/inf':>11} | wrk CPU (cores)"
    )
    lines = [head, "-" * len(head)]
    for c in connections:
        ref, inf = results[("reference", c)], results[("infinity", c)]
        qps_ratio = statistics.median(r.qps / i.qps for r, i in zip(ref, inf, strict=True))
        p99_ratio = statistics.median(r.p99_ms / i.p99_ms for r, i in zip(ref, inf, strict=True))
        med = {name: {k: statistics.median(getattr(x, k) for x in rs) for k in ("qps", "p50_ms", "p99_ms")}
               for name, rs in (("ref", ref), ("inf", inf))}  # fmt: skip
        wrk_cpu = statistics.median(x.wrk_cpu_cores for x in ref + inf)
        lines.append(
            f"{c:>5} | {med['ref']['qps']:>8.1f} {med['inf']['qps']:>8.1f} {qps_ratio:>7.2f} | "
            f"{med['ref']['p50_ms']:>6.1f}ms {med['ref']['p99_ms']:>6.1f}ms | "
            f"{med['inf']['p50_ms']:>6.1f}ms {med['inf']['p99_ms']:>6.1f}ms | {p99_ratio:>11.2f} | {wrk_cpu:.3f}"
        )
    lines.append(
        f"QPS: 2xx answers/s; P50/P99 from wrk's histogram; each the median over {rounds} rounds; ratios: "
        f"median of the rounds' reference/Infinity ratios (QPS above 1 and P99 below 1 favour the reference)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server, the order alternating")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--duration-s", type=int, default=10, help="wrk's duration per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads of each server")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/peers.txt"), help="where the table is written too"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or min(args.connections) < 1 or args.duration_s < 1 or args.threads < 1:
        parser.error("--rounds, --connections, --duration-s and --threads must be at least 1")
    if shutil.which("wrk") is None:
        print(
            "wrk not found on PATH; install it with `make system-deps` (Debian package wrk)", file=sys.stderr
        )
        return 2
    setup = (
        f"all-MiniLM-L6-v2 ({default_model_path()}), fp32 on CPU, batches <= 32, no cache; torch threads "
        f"{args.threads} each (reference --threads, Infinity OMP_NUM_THREADS); host {os.cpu_count()} cores, "
        f"shared by both servers' turns and wrk (-t min(2, connections)); infinity-emb {infinity_version()}; "
        f"{args.rounds} rounds x {args.connections} connections x {args.duration_s} s"
    )
    print(setup, flush=True)
    results: dict[tuple[str, int], list[WrkResult]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            order = ["reference", "infinity"] if round_index % 2 == 0 else ["infinity", "reference"]
            for name in order:
                log_path = Path(tmp) / f"{name}-{round_index}.log"
                with SERVERS[name](args.threads, log_path) as target:
                    check_answer(target)
                    script = wrk_script(target.body, Path(tmp) / f"{name}.lua")
                    run_wrk(target.url, script, max(args.connections), WARM_S)
                    for connections in args.connections:
                        result = run_wrk(target.url, script, connections, args.duration_s)
                        results.setdefault((name, connections), []).append(result)
                        errors = result.non_2xx + result.socket_errors
                        print(
                            f"round {round_index + 1} {name:>9}: {connections:>3} connections {result.qps:8.1f} "
                            f"req/s P50 {result.p50_ms:7.1f} ms P99 {result.p99_ms:7.1f} ms wrk CPU "
                            f"{result.wrk_cpu_cores:.3f}" + (f" ({errors} errors)" if errors else ""),
                            flush=True,
                        )
    text = f"{setup}\nmeasured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n\n" + table(
        results, args.connections, args.rounds
    )
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
