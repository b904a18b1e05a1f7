"""`embedperf run SCENARIO`: run a load scenario with Locust and print the run folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from loadgen.runner import run_scenario
from scenarios.loader import OVERRIDE_HELP, PROFILES, parse_overrides, shipped_scenarios


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf run",
        description="Run a load scenario (locust --headless in a subprocess) and print the run folder.",
        epilog=OVERRIDE_HELP,
    )
    parser.add_argument(
        "scenario", help=f"shipped scenario ({', '.join(shipped_scenarios())}) or a YAML path"
    )
    parser.add_argument(
        "--host", default=None, help="target base URL (default: the scenario's target.base_url)"
    )
    parser.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="parent of the run folder (default runs/)"
    )
    parser.add_argument("--label", default="", help="label appended to the run id")
    parser.add_argument("--profile", choices=PROFILES, default=None, help="scenario profile (quick or full)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a field"
    )
    parser.add_argument("--no-collectors", action="store_true", help="do not sample telemetry during the run")
    parser.add_argument("--timeout-s", type=float, default=None, help="stop the run after this many seconds")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    overrides = parse_overrides(args.overrides)
    host = args.host
    if host is None:
        from scenarios.loader import load_scenario

        host = load_scenario(args.scenario, profile=args.profile, overrides=overrides).target.base_url
    folder = run_scenario(
        args.scenario,
        host=host,
        runs_dir=args.runs_dir,
        label=args.label,
        profile=args.profile,
        overrides=overrides,
        collectors=not args.no_collectors,
        timeout_s=args.timeout_s,
    )
    print(f"run folder: {folder.root}")
    return 0
