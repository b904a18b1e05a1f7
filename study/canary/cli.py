"""`embedperf canary --baseline URL --candidate URL`: shift one load to a candidate stage by stage; promote or roll back
(exit codes: EXIT_HELP)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collectors.options import DeviceOptions, add_device_options
from embedperf.canary_record import EXIT_CODES, CanaryRecord, read_canary_record, write_canary_record
from embedperf.errors import ConfigError
from loadgen.cli.local_workers import LocalWorkers
from loadgen.cli.runner import LOCUSTFILES_DIR, run_scenario_outcome
from loadgen.lifecycle.options import add_api_key_option, export_api_key
from loadgen.lifecycle.preflight import check_target, normalise_base_url
from reports.build import build_report
from reports.canary_outputs import write_canary_json, write_canary_junit
from scenarios.loader import OVERRIDE_HELP, load_scenario, parse_overrides
from scenarios.models import Scenario
from study.options import (
    FieldFlag,
    add_field_flags,
    add_run_options,
    add_verdict_outputs,
    field_names,
    flag_values,
    run_options,
)

DEFAULT_SCENARIO = "query"
RUN_MARGIN_S = 120.0  # beyond the stages: start-up, the last window's settling, the drain
EXIT_HELP = (
    "Exit codes: 0 promote (every stage judged, no trigger fired); 1 roll back (a trigger fired; the verdict "
    "line names it, its stage and window, and the numbers); 2 no verdict (some stage's candidate had fewer "
    "than canary.min_stage_requests requests) or a usage or pre-flight error, nothing measured; 3 incomplete "
    "(the run stopped before every window was judged). "
)
OFF = ("off", "none", "null")
OPENAI_EMBEDDINGS_PATH = "/v1/embeddings"


def _limit(text: str) -> str:
    """A trigger's threshold, or `off`."""
    if text.strip().lower() in OFF:
        return "null"
    try:
        float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number nor `off`") from exc
    return text


def _stages(text: str) -> str:
    try:
        weights = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give candidate weights in percent, e.g. 5,20,50,100"
        ) from exc
    return json.dumps(weights)


# the flags that set one field each of the scenario's canary: and rollback: sections
STAGE_FLAGS = (
    FieldFlag("--stages", _stages, "candidate weights (5,20,50,100)", "PCT,...", field="stages_pct"),
    FieldFlag("--window-s", float, "length of a judged window (60)", "S"),
    FieldFlag("--windows-per-stage", int, "windows per stage (3)", "N"),
    FieldFlag("--load-step", int, "scenario step whose load every stage holds (-1)", "I"),
    FieldFlag("--agreement-fraction", float, "fraction sent to both sides, cosine recorded (0.05)", "F"),
    FieldFlag("--seed", int, "seed of the side draws (0)"),
    FieldFlag("--min-window-requests", int, "fewer: a window too thin to judge (20)", "N"),
    FieldFlag("--min-stage-requests", int, "fewer at a stage: no verdict (50)", "N"),
)
TRIGGER_FLAGS = (
    FieldFlag("--max-error-rate-pct", _limit, "per window (1)", "X"),
    FieldFlag("--max-p99-ms", _limit, "in N consecutive windows (off)", "Y"),
    FieldFlag(
        "--max-p99-increase-pct", _limit, "P99 above the baseline's by Z%% in N consecutive windows (50)", "Z"
    ),
    FieldFlag("--p99-windows", int, "consecutive windows (3)", "N"),
    FieldFlag("--min-agreement-cosine", _limit, "0.99 (0.999 for strict uses)", "C"),
    FieldFlag("--max-temp-c", _limit, "candidate devices (85)", "T"),
    FieldFlag("--max-unavailable-s", _limit, "seconds without success per window (2)", "S"),
)
FLAG_FIELDS = field_names("canary.", STAGE_FLAGS) | field_names("rollback.", TRIGGER_FLAGS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf canary",
        description="One run, one load (the scenario's step --load-step, closed or open loop) split per request "
        "between a baseline and a candidate; the candidate's share rises stage by stage (default 5, 20, 50, "
        "100%), each stage held for --windows-per-stage windows of --window-s. Every window is judged while "
        "the load runs; the first rollback trigger stops the canary at once. Writes one run folder (rows carry "
        "`side`), canary.json (windows and verdict) and report.html.",
        epilog=EXIT_HELP + OVERRIDE_HELP,
    )
    parser.add_argument(
        "scenario", nargs="?", default=DEFAULT_SCENARIO, help=f"load scenario (default {DEFAULT_SCENARIO})"
    )
    parser.add_argument("--baseline", required=True, metavar="URL", help="the version in service now")
    parser.add_argument(
        "--candidate", required=True, metavar="URL", help="the version to promote or roll back"
    )
    parser.add_argument(
        "--allow-same-target",
        action="store_true",
        help="accept one URL on both sides: an A/A check of the canary itself (otherwise refused, exit 2)",
    )
    add_field_flags(parser, STAGE_FLAGS, "stages and windows (the scenario's canary: section)")
    add_field_flags(
        parser, TRIGGER_FLAGS, "rollback triggers (the scenario's rollback: section; `off` disables one)"
    )
    add_run_options(parser, label="canary")
    add_api_key_option(parser)
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="send the load from a master plus N local worker processes (about one core each); the master "
        "judges every window from all their rows (default 0: one process)",
    )
    add_verdict_outputs(parser)
    add_device_options(parser)
    return parser


def canary_overrides(scenario: Scenario, overrides: dict[str, str]) -> dict[str, str]:
    """The overrides that make the scenario a canary: one step per stage, all at canary.load_step's load."""
    canary = scenario.canary
    try:
        step = scenario.steps[canary.load_step]
    except IndexError:
        raise ConfigError(
            f"canary.load_step {canary.load_step} names no step of {scenario.name!r} "
            f"({len(scenario.steps)} steps); pass --load-step 0..{len(scenario.steps) - 1}"
        ) from None
    load: dict[str, object] = {"rate": step.rate} if scenario.is_open_loop else {"users": step.users}
    if step.spawn_rate is not None:
        load["spawn_rate"] = step.spawn_rate
    held = {"duration_s": canary.window_s * canary.windows_per_stage, "warmup_s": 0.0, **load}
    steps = [{"label": f"{weight:g}%", **held} for weight in canary.stages_pct]
    return {**overrides, "canary.enabled": "true", "steps": json.dumps(steps)}


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    overrides = {**parse_overrides(args.overrides), **flag_values(args, FLAG_FIELDS)}
    planned = load_scenario(args.scenario, profile=args.profile, overrides=overrides)
    baseline = normalise_base_url(args.baseline, planned.target.path)
    candidate = normalise_base_url(args.candidate, planned.target.path)
    same_path = planned.target.path or OPENAI_EMBEDDINGS_PATH  # not yet detected: the default protocol's
    same = normalise_base_url(args.baseline, same_path) == normalise_base_url(args.candidate, same_path)
    if same and not args.allow_same_target:
        raise ConfigError(
            f"--baseline and --candidate are the same target ({baseline}): a canary compares two versions; "
            "pass the candidate's own URL (or --allow-same-target for an A/A check of the canary itself)"
        )
    overrides["canary.baseline_url"] = baseline
    overrides["canary.candidate_url"] = candidate
    overrides = canary_overrides(planned, overrides)
    scenario = load_scenario(args.scenario, profile=args.profile, overrides=overrides)
    export_api_key(args.api_key, scenario.target.api_key_env)
    check_target(scenario, candidate)  # the baseline is checked with the run; exit 2 before any load
    locustfile = LOCUSTFILES_DIR / ("canary_openloop.py" if scenario.is_open_loop else "canary.py")
    with LocalWorkers(args.workers, locustfile) as workers:
        outcome = run_scenario_outcome(
            args.scenario,
            host=baseline,
            overrides=overrides,
            timeout_s=scenario.total_duration_s + RUN_MARGIN_S,
            api_key=args.api_key,
            extra_args=DeviceOptions.from_namespace(args).command_args() + workers.master_args(),
            locustfile=locustfile,
            **run_options(args),
        )
    if outcome.folder is None:
        print(f"embedperf canary: locust exited with {outcome.exit_code} without a run folder; see above")
        return outcome.exit_code
    if (record := read_canary_record(outcome.folder.root)) is None:
        print(f"run folder: {outcome.folder.root}")
        print("embedperf canary: the run ended before its first window (no canary.json); see above")
        return EXIT_CODES["incomplete"]
    record = settle_incomplete(outcome.folder.root, record)
    print(f"canary: {record.line}")
    if not args.no_report:
        print(f"report: {build_report(outcome.folder)}")
    if args.json is not None:
        print(write_canary_json(args.json, outcome.folder))
    if args.junit is not None:
        print(write_canary_junit(args.junit, outcome.folder))
    print(f"run folder: {outcome.folder.root}")
    if record.status != "promote":
        print(f"embedperf canary: {record.line}", file=sys.stderr)
    return record.exit_code


def settle_incomplete(root: Path, record: CanaryRecord) -> CanaryRecord:
    """A record still `running` when the run has ended: the run stopped before every window was judged."""
    if record.status != "running":
        return record
    total = len(record.stages_pct) * record.windows_per_stage
    last = record.windows[-1] if record.windows else None
    at = f" (last judged: stage {last.stage_index + 1}, window {last.window_index + 1})" if last else ""
    line = f"INCOMPLETE: the run stopped after {len(record.windows)} of {total} windows{at}"
    record = record.model_copy(update={"status": "incomplete", "line": line})
    write_canary_record(root, record)
    return record
