"""Wire embedperf into Locust: command-line options and the event listeners behind every locustfile.

A locustfile calls `install("ramp")` and exposes the user and shape classes; everything else
(scenario loading, the run folder, distributed forwarding) hangs off Locust's events here.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.runners import MasterRunner, Runner, WorkerRunner

from embedperf.errors import EmbedperfError
from loadgen import context, distributed, session
from loadgen.monitor import CpuMonitor
from scenarios.loader import OVERRIDE_HELP, load_scenario, parse_overrides, shipped_scenarios
from scenarios.models import Scenario

log = logging.getLogger("embedperf.loadgen")
_installed = False
_worker_cpu: CpuMonitor | None = None


def add_arguments(parser: LocustArgumentParser, default_scenario: str) -> None:
    group = parser.add_argument_group("embedperf", "Scenario and run folder (embedperf)")
    group.add_argument(
        "--scenario",
        default=default_scenario,
        help=f"shipped scenario name ({', '.join(shipped_scenarios())}) or a YAML path (default {default_scenario})",
    )
    group.add_argument("--runs-dir", default="runs", help="where the run folder is created (default runs/)")
    group.add_argument("--label", default="", help="label appended to the run id and kept in the manifest")
    group.add_argument(
        "--scenario-profile", default="", help="scenario profile: quick or full (as defined in the YAML)"
    )
    group.add_argument(
        "--set", dest="scenario_set", action="append", default=[], metavar="KEY=VALUE", help=OVERRIDE_HELP
    )
    group.add_argument(
        "--step-duration-s", type=float, default=None, help="shorthand for --set steps.duration_s=N"
    )
    group.add_argument("--warmup-s", type=float, default=None, help="shorthand for --set steps.warmup_s=N")
    group.add_argument(
        "--no-collectors",
        action="store_true",
        default=False,
        help="do not start `python -m collectors` beside the load",
    )
    group.add_argument("--embedperf-resolved", default="", help=argparse.SUPPRESS)


def scenario_from_options(options: Any) -> Scenario:
    overrides = parse_overrides(list(options.scenario_set or []))
    if options.step_duration_s is not None:
        overrides.setdefault("steps.duration_s", str(options.step_duration_s))
    if options.warmup_s is not None:
        overrides.setdefault("steps.warmup_s", str(options.warmup_s))
    return load_scenario(options.scenario, profile=options.scenario_profile or None, overrides=overrides)


def _on_init(environment: Environment, runner: Runner, **_: Any) -> None:
    options = environment.parsed_options
    if isinstance(runner, WorkerRunner):
        distributed.register_worker(runner)
        return
    try:
        scenario = scenario_from_options(options)
    except EmbedperfError as exc:
        print(f"embedperf: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    open_loop_file = any(cls.__name__ == "OpenLoopUser" for cls in environment.user_classes)
    if scenario.is_open_loop != open_loop_file:
        wanted = "locustfiles/openloop.py" if scenario.is_open_loop else f"locustfiles/{scenario.kind}.py"
        print(
            f"embedperf: error: scenario {scenario.name!r} is {scenario.kind}; run it with `locust -f {wanted}`",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(2)
    if not environment.host:
        environment.host = scenario.target.base_url
    if options is not None:
        options.embedperf_resolved = scenario.model_dump_json()  # custom options travel to workers
    session.bind(
        environment,
        scenario,
        session.RunOptions(
            runs_dir=Path(options.runs_dir if options else "runs"),
            label=options.label if options else "",
            collectors=not (options and options.no_collectors),
        ),
    )
    if isinstance(runner, MasterRunner):
        distributed.register_master(runner)
    _stop_on_sigterm(environment)


def _stop_on_sigterm(environment: Environment) -> None:
    """Headless shape runs block before Locust installs its own SIGTERM handler, so a SIGTERM would
    kill the process outright; stop the runner instead, which finalises the run folder."""

    def on_sigterm() -> None:
        log.info("embedperf: SIGTERM received, stopping the run and closing the run folder")
        run = session.current_session()
        if run is not None:
            run.manifest.notes.append("stopped by SIGTERM")
        if environment.runner is not None:
            environment.runner.quit()

    gevent.signal_handler(signal.SIGTERM, on_sigterm)


def _on_test_start(environment: Environment, **_: Any) -> None:
    global _worker_cpu
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        resolved = getattr(environment.parsed_options, "embedperf_resolved", "")
        scenario = Scenario.model_validate_json(resolved)
        host = environment.host or scenario.target.base_url
        name = context.worker_name(runner.client_id, runner.worker_index)
        _worker_cpu = CpuMonitor(worker=name)
        _worker_cpu.start()
        forwarder = distributed.RowForwarder(runner, name, _worker_cpu)
        distributed.set_forwarder(forwarder)
        info = context.fetch_service_info(host, scenario)
        context.set_current(context.build_context(scenario, host, forwarder.add, name, info))
        return
    session.active()


def _on_test_stop(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        if _worker_cpu is not None:
            _worker_cpu.stop()
        distributed.set_forwarder(None)
        return
    session.finalise("test stopped")


def _on_quitting(environment: Environment, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        session.finalise("Locust quit")


def install(default_scenario: str) -> None:
    """Register embedperf's options and listeners with Locust (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True

    @events.init_command_line_parser.add_listener
    def _(parser: LocustArgumentParser) -> None:
        add_arguments(parser, default_scenario)

    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.test_stop.add_listener(_on_test_stop)
    events.quitting.add_listener(_on_quitting)
