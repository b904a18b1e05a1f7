"""`embedperf run SCENARIO`: run a load scenario with Locust and print the run folder.

Exit codes: 0 ok; 1 the run is complete but its error rate exceeds the scenario's error budget; 2 usage or
pre-flight error (nothing measured); 3 the run is incomplete (stopped or killed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from collectors.options import DeviceOptions, add_device_options
from embedperf.options import add_shared_option
from loadgen.cli.local_workers import LocalWorkers
from loadgen.cli.runner import run_scenario_outcome
from loadgen.lifecycle.options import (
    add_api_key_option,
    add_step_options,
    add_target_options,
    export_api_key,
    shorthand_overrides,
)
from loadgen.lifecycle.verdict import EXIT_INCOMPLETE
from scenarios.cost_options import add_cost_options, cost_overrides
from scenarios.loader import (
    OVERRIDE_HELP,
    PROFILES,
    add_override_option,
    load_scenario,
    parse_overrides,
    shipped_scenarios,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf run",
        description="Run a load scenario (locust --headless in a subprocess) and print the run folder.",
        epilog=OVERRIDE_HELP,
    )
    names = ", ".join(shipped_scenarios())
    parser.add_argument("scenario", nargs="?", help=f"shipped scenario ({names}) or a YAML path")
    parser.add_argument(
        "--scenario", dest="scenario_option", default=None, metavar="NAME|PATH",
        help="the same as the positional SCENARIO, spelt as Locust's option",
    )
    parser.add_argument("--host", help="target base URL (default: the scenario's target.base_url)")
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    parser.add_argument("--label", default="", help="label appended to the run id")
    parser.add_argument(
        "--profile", "--scenario-profile", choices=PROFILES, default=None,
        help="scenario profile (quick or full); --scenario-profile is Locust's spelling",
    )
    add_override_option(parser)
    parser.add_argument("--no-collectors", action="store_true", help="do not sample telemetry during the run")
    parser.add_argument("--timeout-s", type=float, default=None, help="stop the run after this many seconds")
    add_step_options(parser)
    add_api_key_option(parser)
    add_target_options(parser)
    parser.add_argument(
        "--workers", type=int, default=0, metavar="N",
        help="run Locust distributed on this host: a master plus N worker processes (about one core each), "
        "all stopped at the end; one run folder (default 0: a single process)",
    )
    add_device_options(parser)
    add_cost_options(parser)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The options, with the scenario given once: positionally or as --scenario (exit 2 otherwise)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.scenario and args.scenario_option and args.scenario != args.scenario_option:
        parser.error(f"two scenarios given ({args.scenario!r} and --scenario {args.scenario_option!r}); give one")
    args.scenario = args.scenario or args.scenario_option
    if not args.scenario:
        parser.error("name the scenario to run: embedperf run ramp (or --scenario NAME|PATH)")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    overrides = {**cost_overrides(args), **shorthand_overrides(parse_overrides(args.overrides), args)}
    # validated before anything starts; local workers inherit the key with the environment
    scenario = load_scenario(args.scenario, profile=args.profile, overrides=overrides)
    export_api_key(args.api_key, scenario.target.api_key_env)
    host = args.host or scenario.target.base_url
    with LocalWorkers.for_scenario(args.workers, args.scenario, args.profile, overrides) as workers:
        outcome = run_scenario_outcome(
            args.scenario, host=host, runs_dir=args.runs_dir, label=args.label, profile=args.profile,
            overrides=overrides, collectors=not args.no_collectors, timeout_s=args.timeout_s,
            api_key=args.api_key,
            extra_args=DeviceOptions.from_namespace(args).command_args() + workers.master_args(),
        )
    if outcome.folder is None:
        print(f"embedperf run: locust exited with {outcome.exit_code} without a run folder; see its output above")
        return outcome.exit_code
    if outcome.exit_code == EXIT_INCOMPLETE:
        print(f"embedperf run: the run is incomplete (exit {EXIT_INCOMPLETE}); its folder is kept")
    print(f"run folder: {outcome.folder.root}")
    return outcome.exit_code
