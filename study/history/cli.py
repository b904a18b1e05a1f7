"""`embedperf history RUNS_DIR`: the headline figures of every run of one series across commits, as trends.

Writes history.html (one self-contained page) and history.json beside it (default in RUNS_DIR) and prints
their paths and one line per run. Exit codes: 0 the newest run is not worse than the previous runs beyond
their noise; 1 it is (each worse figure on its own line); 2 a usage error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embedperf.options import add_shared_option
from study.history.report import HISTORY_REPORT, write_history
from study.history.trend import WINDOW, history


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="embedperf history", description=__doc__)
    parser.add_argument("runs_dir", type=Path, help="folder holding run folders (runs/)")
    parser.add_argument(
        "--scenario",
        metavar="NAME",
        help="the series of this scenario's newest run (default: the newest run's series); runs of other "
        "scenarios, loads or target kinds are listed apart",
    )
    window_help = "previous runs the newest is judged against (default %(default)s)"
    parser.add_argument("--window", type=int, default=WINDOW, metavar="N", help=window_help)
    out_help = f"the HTML page (default RUNS_DIR/{HISTORY_REPORT}; the JSON beside it)"
    parser.add_argument("--out", type=Path, metavar="PATH", help=out_help)
    add_shared_option(parser, "lang", "en")
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error(f"--window must be at least 1, got {args.window}")
    result = history(args.runs_dir, args.scenario, args.window)
    print(*write_history(result, args.runs_dir, args.lang, args.out), sep="\n")  # the page, then its JSON
    print(f"series: {result.key.text()}")
    for p in result.points:
        p99 = f"{p.p99_ms:.1f}" if p.p99_ms is not None else "-"
        print(
            f"  {p.run_id}  {p.commit or '?':<10}{'*' if p.dirty else ' '} {p.label:<12} goodput {p.qps:8.1f} req/s  P99 {p99} ms"
        )
    for a in result.apart:
        print(f"  apart: {a['run_id']} ({a['series']})")
    for flag in result.flags:
        print(f"embedperf history: regression: {flag.reason}")
    return 1 if result.regressed else 0
