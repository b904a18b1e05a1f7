"""`embedperf matrix`: run the optimisation study and write its report."""

from __future__ import annotations

import argparse
from pathlib import Path

from embedperf.errors import ConfigError
from embedperf.options import add_shared_option
from scenarios.loader import add_override_option
from study.matrix.report import build_matrix_report
from study.matrix.run import MatrixRecord, run_matrix
from study.matrix.spec import load_matrix_spec
from study.options import study_parser

DEFAULT_SPEC = Path("scenarios/optimizations.yaml")

EPILOG = """\
examples:
  embedperf matrix scenarios/optimizations.yaml                    # every configuration, quick ramp
  embedperf matrix scenarios/optimizations.yaml --only batching,int8 --repeat 2
  embedperf matrix scenarios/optimizations.yaml --report-only runs/<matrix folder>
  embedperf matrix scenarios/optimizations.yaml --measure search --scenario query --set search.precision=0.1

Each configuration starts a fresh reference service (a free loopback port), waits for /ready,
runs the scenario, and stops it. With --repeat N the order rotates every round, so drift on a
noisy machine spreads over all configurations. With --measure search (or `measure: search`
and a `search:` section in the file) each configuration gets an `embedperf search` on an
open-loop scenario instead, and the report ranks them by the searched capacity.
Results: <runs-dir>/<time>-matrix-<scenario>/ holding matrix.json, one run folder per configuration and repeat, and matrix.html.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = study_parser(
        "embedperf matrix",
        "Optimisation before/after matrix: each configuration of scenarios/optimizations.yaml against the "
        "baseline, with confidence intervals, precision checks and a recommendation.",
        EPILOG,
    )
    parser.add_argument(
        "spec", type=Path, nargs="?", default=DEFAULT_SPEC, help="matrix file (default %(default)s)"
    )
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run every configuration N times, order rotated"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated configuration names (the baseline is always kept)"
    )
    parser.add_argument("--scenario", help="run this scenario instead of the file's")
    parser.add_argument("--profile", choices=["quick", "full"], help="scenario profile (default: the file's)")
    add_override_option(parser, "scenario override for every configuration (repeatable)")
    parser.add_argument(
        "--measure",
        choices=["steps", "search"],
        help="steps: the scenario's load steps; search: a capacity search per configuration (default: the file's)",
    )
    parser.add_argument("--no-precision", action="store_true", help="skip the precision checks")
    add_shared_option(parser, "lang", "en")
    parser.add_argument(
        "--report-only",
        type=Path,
        metavar="MATRIX_DIR",
        help="rebuild the report of an existing matrix folder and stop",
    )
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.report_only is not None:
        print(f"matrix report: {build_matrix_report(args.report_only, lang=args.lang)}")
        return 0
    if args.repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    spec = load_matrix_spec(args.spec)
    if args.only:
        spec = spec.select([n.strip() for n in args.only.split(",") if n.strip()])
    updates: dict[str, object] = {k: v for k in ("scenario", "profile", "measure") if (v := getattr(args, k))}
    if args.overrides:
        extra = dict(item.split("=", 1) for item in args.overrides if "=" in item)
        updates["scenario_overrides"] = {**spec.scenario_overrides, **extra}
    if updates:
        spec = spec.model_copy(update=updates)
    folder = run_matrix(spec, args.runs_dir, repeat=args.repeat, check_precision=not args.no_precision)
    failed = [r for r in MatrixRecord.read(folder).runs if not r.ok]
    report = build_matrix_report(folder, lang=args.lang)
    print(f"matrix folder: {folder}")
    print(f"matrix report: {report}")
    if failed:
        runs = ", ".join(f"{r.config} (repeat {r.repeat + 1}): {r.error}" for r in failed)
        print(f"{len(failed)} run(s) failed: {runs}")
    return 1 if failed else 0
