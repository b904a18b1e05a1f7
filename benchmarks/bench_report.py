"""Scale benchmark: a 1,000,000-request, 1-hour, 16-device synthetic run -> report time and peak memory.

The report is built in a child process (`embedperf report`), timed from outside, and its peak RSS is
read with resource.getrusage(RUSAGE_CHILDREN).ru_maxrss. Targets: <= 30 s and <= 2 GB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 30.0
TARGET_RSS_MB = 2048.0


def run_child(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "embedperf.cli", *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--hours", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        run_dir = Path(tmp) / "synthetic-run"
        synth_s = run_child(
            ["synth", str(run_dir), "--requests", str(args.requests), "--devices", str(args.devices),
             "--hours", str(args.hours)]
        )  # fmt: skip
        # ru_maxrss of children is the max over every child so far: measure the report in a fresh child.
        probe = (
            "import resource, subprocess, sys, time;"
            "t = time.perf_counter();"
            f"subprocess.run([sys.executable, '-m', 'embedperf.cli', 'report', {str(run_dir)!r}], check=True,"
            " stdout=subprocess.DEVNULL);"
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
        report_s, maxrss_kb = out.split()
        report_s_f, rss_mb = float(report_s), float(maxrss_kb) / 1024.0
        size_mb = (run_dir / "report.html").stat().st_size / 1e6
    print(
        f"synthetic run: {args.requests:,} requests, {args.hours:g} h, {args.devices} devices (written in {synth_s:.1f} s)"
    )
    print(
        f"report time:   {report_s_f:.1f} s   (target <= {TARGET_S:.0f} s)  {'ok' if report_s_f <= TARGET_S else 'OVER'}"
    )
    print(
        f"report peak RSS: {rss_mb:.0f} MB (target <= {TARGET_RSS_MB:.0f} MB)  {'ok' if rss_mb <= TARGET_RSS_MB else 'OVER'}"
    )
    print(f"report.html:   {size_mb:.2f} MB")
    return 0 if report_s_f <= TARGET_S and rss_mb <= TARGET_RSS_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
