"""`embedperf search`: the highest open-loop rate that meets the SLO, as one run folder and report (exit codes:
EXIT_HELP)."""

from __future__ import annotations

import argparse

from decisions.search.state import (
    QUANTILE,
    Outcome,
    devices_serving,
    feasibility,
    headline,
    read_search,
    samples_to_bound,
)
from embedperf.options import add_shared_option
from embedperf.schema import read_manifest
from loadgen.cli.runner import run_scenario
from loadgen.lifecycle.verdict import EXIT_INCOMPLETE
from reports.build import build_report
from scenarios.loader import OVERRIDE_HELP, load_scenario, parse_overrides
from study.options import FieldFlag, add_field_flags, add_run_options, field_names, flag_values, run_options

DEFAULT_SCENARIO = "query"
RUN_MARGIN_S = 120.0  # beyond --max-duration: start-up, drains and the final probe's overrun
EXIT_CODES: dict[Outcome, int] = {"answer": 0, "no_rate": 1, "not_narrowed": 4}
EXIT_HELP = (
    "Exit codes: 0 an answer within --precision (status found or at_slo; above_max_rate: every rate up to "
    "--max-rate passed); 1 no probed rate meets the SLO (below_min_rate); 2 usage or pre-flight error, "
    "nothing measured (e.g. --min-ok-requests too few to bound a P99, or --start-rate/--max-rate below the "
    "lowest rate a --max-probe-s probe can judge); 3 the search did not finish; 4 no answer to --precision "
    "(wide_interval: the P99 interval contains the SLO more than --precision above the answer; "
    "max_duration; unconfirmed). "
)

# the flags that set one search field each (search.<dest>)
SEARCH_FLAGS = (
    FieldFlag("--precision", float, "stop when the bracket is within this (0.05)"),
    FieldFlag("--max-duration-s", float, "stop the search after this long"),
    FieldFlag("--start-rate", float, "first probe's rate (req/s)"),
    FieldFlag("--max-rate", float, "highest rate to try (req/s)"),
    FieldFlag(
        "--min-ok-requests",
        int,
        f"ok requests per probe (1000; at least {samples_to_bound(QUANTILE, 0.95)}, the fewest that bound "
        "a P99 at 95%% confidence)",
    ),
    FieldFlag("--min-probe-s", float, "shortest probe"),
    FieldFlag(
        "--max-probe-s",
        float,
        "longest probe, repeats and confirming probes included (plus at most drain_s for answers "
        "in flight); sets the lowest rate a probe can judge",
    ),
)
FLAG_FIELDS: dict[str, str] = {
    "slo_p99_ms": "slo.p99_ms",
    "error_budget_pct": "slo.error_budget_pct",
    "arrival": "open_loop.arrival",
    **field_names("search.", SEARCH_FLAGS),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf search",
        description="Probe open-loop rates (bracket, then bisect, then confirm) for the highest rate whose "
        "P99 meets the SLO with confidence; writes one run folder (one step per probe) and its report.",
        epilog=EXIT_HELP + OVERRIDE_HELP,
    )
    parser.add_argument(
        "scenario", nargs="?", default=DEFAULT_SCENARIO, help="open-loop scenario (default %(default)s)"
    )
    parser.add_argument("--host", help="target base URL (default: the scenario's)")
    add_shared_option(parser, "slo_p99_ms", default_text="the scenario's slo.p99_ms")
    add_shared_option(parser, "error_budget_pct", default_text="the scenario's slo.error_budget_pct")
    parser.add_argument("--arrival", choices=("constant", "poisson"), help="arrival process")
    add_field_flags(parser, SEARCH_FLAGS)
    add_run_options(parser, label="search")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    overrides = {
        **parse_overrides(args.overrides), "search.enabled": "true", **flag_values(args, FLAG_FIELDS)
    }
    scenario = load_scenario(args.scenario, profile=args.profile, overrides=overrides)
    feasibility(scenario.search)  # ConfigError (exit 2) before any probe; the run prints a raised min_rate
    folder = run_scenario(
        args.scenario,
        host=args.host or scenario.target.base_url,
        overrides=overrides,
        timeout_s=scenario.search.max_duration_s + RUN_MARGIN_S,
        **run_options(args),
    )
    record = read_search(manifest := read_manifest(folder))
    if record is None:
        print(f"run folder: {folder.root}")
        print(
            f"embedperf search: the search did not finish (no manifest.search in {folder.manifest}); see above"
        )
        return EXIT_INCOMPLETE
    print(f"capacity: {headline(record, devices_serving(manifest))}")
    if not args.no_report:
        print(f"report: {build_report(folder)}")
    print(f"run folder: {folder.root}")
    return EXIT_CODES[record.outcome]
