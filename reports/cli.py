"""`embedperf report`: build RUN_DIR/report.html from a run folder and print its path."""

from __future__ import annotations

import argparse
from pathlib import Path

from embedperf.schema import resolve_run_folder
from reports.build import build_report
from reports.i18n import LANGS


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="embedperf report",
        description="Build RUN_DIR/report.html (self-contained) and RUN_DIR/analysis/* from a run folder.",
    )
    parser.add_argument("run_dir", nargs="?", type=Path, help="run folder (runs/<run_id>)")
    parser.add_argument("--latest", action="store_true", help="use the newest run under --runs-dir")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs live (default runs)")
    parser.add_argument("--lang", choices=LANGS, default="en", help="report language (default en)")
    parser.add_argument(
        "--slo-p99-ms",
        type=float,
        default=None,
        help="P99 latency SLO in ms (default: the manifest's slo.p99_ms)",
    )
    args = parser.parse_args(argv)
    folder = resolve_run_folder(args.run_dir, args.latest, args.runs_dir)
    print(build_report(folder, lang=args.lang, slo_p99_ms=args.slo_p99_ms))
    return 0
