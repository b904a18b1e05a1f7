"""Scale benchmark: a synthetic run of --rows requests -> `embedperf report` wall time and peak memory.

The run (4 steps, --devices npu devices, --hours long) is written streaming by `embedperf synth`
under --tmp and deleted afterwards. `embedperf report` (the whole report: out-of-core analysis,
telemetry join, figures, HTML) runs in a fresh child process, timed from outside; its peak RSS
(DuckDB included, and any process it starts) is resource.getrusage(RUSAGE_CHILDREN).ru_maxrss, read
by a probe process that starts nothing else. The load average stands beside the figures: on a
shared host the wall time includes waiting for a core (the CPU seconds do not).
Targets: 10M rows <= 30 s and <= 1 GB; 100M rows <= 300 s and <= 2 GB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TARGETS: dict[int, tuple[float, float]] = {10_000_000: (30.0, 1024.0), 100_000_000: (300.0, 2048.0)}


def targets_for(rows: int) -> tuple[float, float]:
    """The target of the nearest size at or above rows (the 10M target below 10M)."""
    for size, target in sorted(TARGETS.items()):
        if rows <= size:
            return target
    return TARGETS[max(TARGETS)]


def timed_child(args: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of `python args...` in a fresh child, measured by a probe process.

    CPU seconds stand beside wall time: on a shared host the wall time includes waiting for a core.
    """
    probe = (
        "import resource, subprocess, sys, time;"
        "t = time.perf_counter();"
        f"subprocess.run([sys.executable, *{args!r}], check=True, stdout=subprocess.DEVNULL);"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(time.perf_counter() - t, u.ru_utime + u.ru_stime, u.ru_maxrss)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:  # the command's own error, not the probe's traceback around it
        raise SystemExit(f"python {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    wall_s, cpu_s, maxrss_kb = done.stdout.split()
    return float(wall_s), float(cpu_s), float(maxrss_kb) / 1024.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000, help="request rows (default 10,000,000)")
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--hours", type=float, default=24.0, help="run length (default 24 h: a soak)")
    parser.add_argument(
        "--tmp", type=Path, default=Path(tempfile.gettempdir()), help="where the run is written"
    )
    args = parser.parse_args()
    target_s, target_mb = targets_for(args.rows)
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-", dir=args.tmp))
    try:
        run_dir = tmp / "synthetic-run"
        synth_s, _, synth_mb = timed_child(
            ["-m", "embedperf.cli", "synth", str(run_dir), "--requests", str(args.rows),
             "--devices", str(args.devices), "--hours", str(args.hours)]
        )  # fmt: skip
        size_mb = sum(p.stat().st_size for p in run_dir.glob("*.parquet")) / 1e6
        print(
            f"synthetic run: {args.rows:,} requests, {args.hours:g} h, {args.devices} devices; "
            f"written in {synth_s:.1f} s, peak RSS {synth_mb:.0f} MB; Parquet {size_mb:.0f} MB"
        )
        load_before = os.getloadavg()[0]
        report_s, report_cpu_s, report_mb = timed_child(["-m", "embedperf.cli", "report", str(run_dir)])
        load_after = os.getloadavg()[0]
        ok = report_s <= target_s and report_mb <= target_mb
        print(f"embedperf report: {report_s:.1f} s wall, {report_cpu_s:.1f} s CPU (target <= {target_s:.0f} s)  "
              f"{'ok' if report_s <= target_s else 'OVER'}")  # fmt: skip
        print(f"embedperf report peak RSS: {report_mb:.0f} MB (target <= {target_mb:.0f} MB)  "
              f"{'ok' if report_mb <= target_mb else 'OVER'}")  # fmt: skip
        print(f"load average (1 min) before/after: {load_before:.2f} / {load_after:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"(machine: {os.cpu_count()} logical CPUs, possibly shared with other work: wall times are pessimistic)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
