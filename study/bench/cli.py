"""`embedperf bench` (make bench): start the reference service, run the ramp, stop it, build the report."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from collectors.options import DeviceOptions, add_device_options
from embedperf.options import add_shared_option
from loadgen.cli.runner import run_scenario_outcome
from loadgen.processes.service_proc import RAMP_SERVICE_ARGS, ServiceProcess
from reports.build import build_report
from scenarios.loader import PROFILES, add_override_option, parse_overrides


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="embedperf bench",
        description="Start the reference service, run the ramp scenario, stop the service and write the report.",
    )
    parser.add_argument(
        "--profile", choices=PROFILES, default="quick", help="quick (~1 min) or full (4 x 60 s)"
    )
    add_shared_option(parser, "runs_dir", Path("runs"), "runs")
    parser.add_argument("--host", default="127.0.0.1", help="address the service listens on")
    parser.add_argument("--port", type=int, default=8086, help="port the service listens on (default 8086)")
    parser.add_argument("--scenario", default="ramp", help="scenario to run (default ramp)")
    parser.add_argument(
        "--service-arg", action="append", default=[], help="extra `python -m service` argument (repeatable)"
    )
    add_override_option(parser, "override a scenario field, e.g. steps.duration_s=5 (repeatable)")
    parser.add_argument("--label", default="", help="label appended to the run id")
    parser.add_argument("--no-collectors", action="store_true", help="do not sample telemetry during the run")
    parser.add_argument(
        "--ready-timeout-s",
        type=float,
        default=300.0,
        help="how long to wait for the service to load the model and answer /ready (default 300)",
    )
    add_device_options(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    runs_dir: Path = args.runs_dir
    runs_dir.mkdir(parents=True, exist_ok=True)
    log_path = runs_dir / f".service-{time.strftime('%Y%m%dT%H%M%S')}.log"
    print(f"starting the reference service on {args.host}:{args.port} (log {log_path}) ...", flush=True)
    with ServiceProcess(
        [*RAMP_SERVICE_ARGS, *args.service_arg],
        host=args.host,
        port=args.port,
        log_path=log_path,
        ready_timeout_s=args.ready_timeout_s,
    ) as service:
        running = f"running {args.scenario} ({args.profile})"
        print(f"service ready at {service.url} (pid {service.pid}); {running}", flush=True)
        outcome = run_scenario_outcome(
            args.scenario,
            host=service.url,
            runs_dir=runs_dir,
            label=args.label,
            profile=args.profile,
            overrides=parse_overrides(args.overrides),
            collectors=not args.no_collectors,
            extra_args=DeviceOptions.from_namespace(args).command_args(),
        )
    if (folder := outcome.folder) is None:
        print(f"locust exited with {outcome.exit_code} without a run folder; service log: {log_path}")
        return outcome.exit_code
    shutil.move(str(log_path), str(folder.root / "service.log"))
    print(f"run folder: {folder.root}", flush=True)
    print(f"report: {build_report(folder, lang='en')}")
    return outcome.exit_code
