"""`embedperf report`: build RUN_DIR/report.html from a run folder and print its path."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embedperf.options import add_shared_option
from embedperf.schema import resolve_run_folder
from reports.build import build_report
from scenarios.cost_options import add_cost_options, cost_from_options

DESCRIPTION = (
    "Build RUN_DIR/report.html (self-contained; report.zh.html with --lang zh) and RUN_DIR/analysis/* "
    "from a run folder."
)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="embedperf report", description=DESCRIPTION)
    run_dir_help = "run folder (runs/<run_id>; default: the newest run under --runs-dir)"
    parser.add_argument("run_dir", nargs="?", type=Path, help=run_dir_help)
    parser.add_argument("--latest", action="store_true", help="use the newest run under --runs-dir (the default)")
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    add_shared_option(parser, "lang", "en")
    add_shared_option(parser, "slo_p99_ms", default_text="the run's slo.p99_ms")
    out_help = "report file (default RUN_DIR/report.html; with --lang zh RUN_DIR/report.zh.html beside it)"
    parser.add_argument("--out", type=Path, metavar="PATH", help=out_help)
    add_cost_options(parser, after_the_fact=True)
    args = parser.parse_args(argv)
    folder = resolve_run_folder(args.run_dir, args.latest or args.run_dir is None, args.runs_dir)
    if args.run_dir is None:
        print(f"embedperf report: no RUN_DIR given, using the newest run: {folder.root}", file=sys.stderr)
    print(build_report(folder, lang=args.lang, slo_p99_ms=args.slo_p99_ms, out=args.out, cost=cost_from_options(args)))
    return 0
