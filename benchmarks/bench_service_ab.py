"""`make bench-ab`: closed-loop throughput of the reference service, a previous commit against the working tree.

The previous commit's tree is extracted with `git archive REV | tar -x` into a temporary folder (never a
checkout of this tree), and each version runs as `python -m service` from its own tree with the same virtual
environment and flags. Per round, each version in turn (the order alternates between rounds) is started,
warmed up, loaded by wrk at 10 and then 50 connections with one short request body, and stopped; both run
with the same admission settings (the previous defaults), so neither sheds. Printed: successful req/s per
version, connection count and round, the medians, and the new/old ratio of each round's pair (run back
to back) with their median. On a small host shared with
other work, absolute figures drift: read the ratios of runs taken side by side.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.wrk_run import run_wrk, wrk_found
from loadgen.processes.service_proc import ServiceProcess

REPO_ROOT = Path(__file__).resolve().parents[1]
BODY = '{"model": "all-MiniLM-L6-v2", "input": "Capacity planning needs the P99 latency at every load step."}'
WRK_SCRIPT = f'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = [[{BODY}]]\n'
READY_TIMEOUT_S = 180.0


def extract(rev: str, into: Path) -> str:
    """The tree of rev (service and what it imports) under `into`; returns the full commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if commit.returncode != 0:
        raise SystemExit(f"bench-ab: {rev!r} is not a commit of this repository; pass --rev COMMIT")
    archive = subprocess.Popen(
        ["git", "archive", commit.stdout.strip()], cwd=REPO_ROOT, stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"bench-ab: git archive {rev} failed")
    return commit.stdout.strip()


@contextmanager
def service_from(tree: Path, flags: list[str], log_path: Path) -> Iterator[str]:
    """`python -m service` run from `tree` (its own modules come first on sys.path) until /ready; yields its
    URL and stops it by PID."""
    with ServiceProcess(flags, cwd=tree, log_path=log_path, ready_timeout_s=READY_TIMEOUT_S) as svc:
        yield svc.url


def wrk_rps(url: str, script: Path, connections: int, duration_s: int) -> tuple[float, int]:
    """(successful req/s, non-2xx answers) of one wrk run against POST /v1/embeddings."""
    out = run_wrk(f"{url}/v1/embeddings", script, connections, duration_s)
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", out.stdout, re.M)
    if rate is None:
        raise SystemExit(f"wrk printed no rate:\n{out.stdout}\n{out.stderr}")
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out.stdout)
    total = re.search(r"^\s*(\d+) requests in", out.stdout, re.M)
    failed = int(errors.group(1)) if errors else 0
    share_ok = 1 - failed / int(total.group(1)) if total and int(total.group(1)) else 1.0
    return float(rate.group(1)) * share_ok, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rev", default="HEAD", help="the previous version: a commit, tag or branch (default HEAD)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--connections", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--duration-s", type=int, default=10, help="wrk's duration per measurement")
    parser.add_argument("--service-arg", action="append", default=[], help="extra flag for both services")
    args = parser.parse_args(argv)
    if not wrk_found():
        return 2
    # The same admission settings for both (the previous defaults), so neither sheds in a closed loop: what is
    # compared is how fast each serves, not where each draws its shedding line.
    flags = [
        "--log-level",
        "warning",
        "--deadline-ms",
        "30000",
        "--admit-wait-share",
        "0.5",
        *args.service_arg,
    ]
    rates: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        commit = extract(args.rev, old_tree)
        script = Path(tmp) / "embed.lua"
        script.write_text(WRK_SCRIPT)
        trees = {"old": old_tree, "new": REPO_ROOT}
        print(
            f"old: {args.rev} = {commit[:12]} (git archive); new: the working tree; flags {flags}", flush=True
        )
        for round_index in range(args.rounds):
            order = ["old", "new"] if round_index % 2 == 0 else ["new", "old"]
            for name in order:
                with service_from(trees[name], flags, Path(tmp) / f"{name}.log") as url:
                    wrk_rps(url, script, max(args.connections), 3)  # warm: batches, allocator, estimate
                    for connections in args.connections:
                        rps, errors = wrk_rps(url, script, connections, args.duration_s)
                        rates.setdefault((name, connections), []).append(rps)
                        print(
                            f"round {round_index + 1} {name}: {connections:>4} connections {rps:8.1f} req/s"
                            + (f" ({errors} non-2xx)" if errors else ""),
                            flush=True,
                        )
    print()
    for connections in args.connections:
        old, new = rates[("old", connections)], rates[("new", connections)]
        ratios = [n / o for o, n in zip(old, new, strict=True)]  # each round's pair ran back to back
        print(
            f"{connections:>4} connections: old median {statistics.median(old):.1f} req/s, new median "
            f"{statistics.median(new):.1f} req/s; new/old per round "
            f"{', '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
