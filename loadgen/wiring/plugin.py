"""Wire embedperf into Locust: command-line options and the event listeners behind every locustfile.

A locustfile calls `install("ramp")` and exposes the user and shape classes; everything else (scenario
loading, the run folder, distributed forwarding) hangs off Locust's events here. The init listener gives each
Environment its run state (loadgen.lifecycle.run_state); the other listeners find it there, through the
environment Locust passes them."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from locust import events
from locust.argument_parser import LocustArgumentParser
from locust.env import Environment
from locust.runners import MasterRunner, Runner, WorkerRunner

from collectors.options import DeviceOptions, add_device_options
from embedperf.errors import ConfigError, EmbedperfError
from loadgen.distributed import rows as distributed
from loadgen.lifecycle import preflight, session, verdict
from loadgen.lifecycle.announcements import SIGTERM_READY_LOG
from loadgen.lifecycle.options import (
    Suggestions,
    add_api_key_option,
    add_step_options,
    add_target_options,
    export_api_key,
    rejoin_overrides,
    scenario_choices,
    shorthand_overrides,
)
from loadgen.lifecycle.run_state import RunState, attach, state_of
from loadgen.recording import webui
from loadgen.recording.live import RunFollower
from loadgen.recording.live_export import LiveExporter
from loadgen.recording.monitor import CpuMonitor, settle_heap
from loadgen.traffic import context
from loadgen.traffic.protocols import registry
from loadgen.traffic.shares import share_from_options
from scenarios.loader import OVERRIDE_HELP, PROFILES, load_scenario, parse_overrides
from scenarios.models import Scenario

# The web UI labels a field "name (help)" on one line: the --set field's help is the short form.
SET_FIELD_HELP = "overrides KEY=VALUE, comma-separated: steps.duration_s=5,slo.p99_ms=200"
STOP_MARGIN_S = 1.0  # beyond the request timeout: the timed-out request's row is recorded too
log = logging.getLogger("embedperf.loadgen")


def _web_ui_option(group: argparse._ActionsContainer, *flags: str, **options: Any) -> None:
    """Argument groups bypass LocustArgumentParser.add_argument; mark web-UI options by hand."""
    action = group.add_argument(*flags, **options)
    action.include_in_web_ui = True  # type: ignore[attr-defined]
    action.is_secret = False  # type: ignore[attr-defined]
    action.is_required = False  # type: ignore[attr-defined]
    action.is_multiple = False  # type: ignore[attr-defined]


HELP_OPTION = "--embedperf-help"


class WholeHelp(argparse.Action):
    """Print the whole help, Locust's options and embedperf's, and exit: Locust answers --help before it
    imports a locustfile, so it never shows a locustfile's options (locust issue #2917)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        parser.print_help()
        parser.exit()


def add_arguments(parser: LocustArgumentParser, default_scenario: str) -> None:
    """embedperf's options, once per parser (a second locustfile calling install adds none again)."""
    if parser.get_default("scenario") is not None:
        return
    group = parser.add_argument_group(
        "embedperf",
        "Scenario, run folder and live export (embedperf). The scenario's steps set the users, so "
        "-u/-r/-t are ignored; the web UI shows scenario, profile, overrides and label. " + OVERRIDE_HELP,
    )
    group.add_argument(HELP_OPTION, action=WholeHelp, help="show this help, embedperf's options included, and exit")
    choices = scenario_choices(default_scenario)
    _web_ui_option(
        group, "--scenario", default=default_scenario, choices=choices, metavar="NAME|PATH",
        help=f"shipped scenario ({', '.join(choices)}) or a YAML path (default {default_scenario})",
    )
    _web_ui_option(
        group, "--scenario-profile", default="", choices=Suggestions(["", *PROFILES]),
        metavar="|".join(PROFILES),
        help="scenario profile: quick or full (as defined in the YAML). "
        "Locust's own --profile only names a test run",
    )
    _web_ui_option(  # default not []: Locust's web UI would read an empty list as a list of ints
        group, "--set", dest="scenario_set", action="append", default=[""], metavar="KEY=VALUE",
        help=SET_FIELD_HELP,
    )
    _web_ui_option(group, "--label", default="", help="label appended to the run id and kept in the manifest")
    group.add_argument("--runs-dir", default="runs", help="where the run folder is created (default runs/)")
    add_step_options(group)
    add_api_key_option(group)
    add_target_options(group)
    group.add_argument(
        "--no-collectors", action="store_true", default=False,
        help="do not start `python -m collectors` beside the load",
    )
    group.add_argument(
        "--metrics-port", type=int, default=None,
        help="serve the run's live per-step figures for Prometheus on this port (0: any free port; "
        "default: off). The URL is printed as `live metrics: URL`",
    )
    group.add_argument(
        "--metrics-host", default="127.0.0.1", help="address of the --metrics-port endpoint (default 127.0.0.1)"
    )
    add_device_options(group)
    group.add_argument("--embedperf-resolved", default="", help=argparse.SUPPRESS)
    group.add_argument("--embedperf-shares", default="", help=argparse.SUPPRESS)  # master -> workers (shares)


def scenario_from_options(options: Any) -> Scenario:
    overrides = shorthand_overrides(parse_overrides(rejoin_overrides(list(options.scenario_set or []))), options)
    return load_scenario(options.scenario, profile=options.scenario_profile or None, overrides=overrides)


def check_locustfile(environment: Environment, scenario: Scenario) -> None:
    """A closed-loop locustfile cannot run an open-loop scenario, nor the reverse."""
    open_loop_file = any(
        cls.__name__ == "OpenLoopUser" or getattr(cls, "open_loop", False) for cls in environment.user_classes
    )
    if scenario.is_open_loop != open_loop_file:
        wanted = "locustfiles/openloop.py" if scenario.is_open_loop else f"locustfiles/{scenario.kind}.py"
        raise ConfigError(f"scenario {scenario.name!r} is {scenario.kind}; run it with `locust -f {wanted}`")


def run_options(options: Any) -> session.RunOptions:
    devices = DeviceOptions.from_namespace(options)
    return session.RunOptions(
        runs_dir=Path(options.runs_dir if options else "runs"), label=options.label if options else "",
        collectors=not (options and options.no_collectors), devices=devices.devices, agents=devices.agents,
        collector_args=devices.collector_args(),
    )


def resolve(environment: Environment) -> tuple[Scenario, session.RunOptions]:
    """The scenario and run options as the options stand now (the web UI changes them before each run)."""
    options = environment.parsed_options
    scenario = scenario_from_options(options)
    check_locustfile(environment, scenario)
    checked = attach(environment).target
    if checked is not None:  # what the pre-flight check resolved (detected protocol, path, model) holds for every run
        scenario = checked.apply(scenario)
    else:  # not checked (the web UI): what is unset takes the protocol's defaults, recorded so in the manifest
        target = registry.default_target(scenario.target, scenario.payload.task)
        scenario = scenario.model_copy(update={"target": target})
    export_api_key(getattr(options, "api_key", None), scenario.target.api_key_env)
    if options is not None:
        options.embedperf_resolved = scenario.model_dump_json()  # custom options travel to workers
    return scenario, run_options(options)


@dataclass(frozen=True)
class _Init:
    """The init listener with the locustfile's report builder; all equal, so install() replaces one."""

    report_builder: webui.ReportBuilder | None = field(default=None, compare=False)

    def __call__(self, environment: Environment, runner: Runner, **_: Any) -> None:
        options = environment.parsed_options
        state = attach(environment)
        state.report_builder = self.report_builder
        _on_init(environment, runner, options, state)


def _on_init(environment: Environment, runner: Runner, options: Any, state: RunState) -> None:
    if isinstance(runner, WorkerRunner):
        distributed.register_worker(runner)
        distributed.register_worker_cuts(runner)
        return
    headless = bool(getattr(options, "headless", False))
    try:  # headless: one real request before any load (the web UI may still change the host)
        scenario, run_opts = resolve(environment)
        if options is not None and options.profile in PROFILES and not options.scenario_profile:
            log.warning(
                "embedperf: --profile %s is Locust's run name, not a scenario profile; "
                "use --scenario-profile %s to change the steps", options.profile, options.profile,
            )
        checked = preflight.target_for_locust(scenario, environment.host or scenario.target.base_url, check=headless)
        if headless and run_opts.collectors:  # an agent refusing the run's token stops it here, like a refused key
            preflight.check_agents(
                run_opts.agents or scenario.target.agents, DeviceOptions.from_namespace(options).agent_token_file
            )
    except EmbedperfError as exc:
        print(f"embedperf: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    environment.host = checked.base_url
    if headless:
        state.target = checked
        scenario, run_opts = resolve(environment)  # the checked target, also in what workers are sent
        if checked.line:
            print(checked.line, flush=True)
    state.bind(scenario, run_opts, resolve=lambda: resolve(environment))
    if isinstance(runner, MasterRunner):
        distributed.register_master(runner)
    follower = RunFollower(state.current_session)
    if environment.web_ui is not None:
        webui.install(environment, follower, check=lambda: resolve(environment), build_report=state.report_builder)
    if options is not None and options.metrics_port is not None:
        LiveExporter(follower, options.metrics_host, options.metrics_port).start()
    _stop_on_sigterm(environment, state)


def _stop_on_sigterm(environment: Environment, state: RunState) -> None:
    """A headless shape run blocks before Locust installs its SIGTERM handler: stop the runner on SIGTERM
    instead of dying, which finalises the run folder; the log line says from when on."""

    def on_sigterm() -> None:
        log.info("embedperf: SIGTERM received, stopping the run and closing the run folder")
        if isinstance(environment.runner, MasterRunner):  # also while it waits for workers
            distributed.stop_master_on_sigterm(environment.runner)
            return
        run = state.current_session()
        if run is not None:
            run.manifest.notes.append("stopped by SIGTERM")
        # stop now: requests in flight are cut off (and recorded so), not waited for; Locust's main loop
        # stops the runner a second time, which a graceful stop would not survive
        environment.stop_timeout = 0.0
        if environment.runner is not None:
            environment.runner.quit()

    gevent.signal_handler(signal.SIGTERM, on_sigterm)
    log.info(SIGTERM_READY_LOG)


def _on_test_start(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    state = state_of(environment)
    if isinstance(runner, WorkerRunner):
        options = environment.parsed_options
        scenario = Scenario.model_validate_json(getattr(options, "embedperf_resolved", ""))
        export_api_key(getattr(options, "api_key", None), scenario.target.api_key_env)
        host = environment.host or scenario.target.base_url
        name = context.worker_name(runner.client_id, runner.worker_index)
        if state.forwarder is not None:  # a run before this one on the same worker
            state.forwarder.stop()
        state.worker_cpu = CpuMonitor(worker=name)
        state.worker_cpu.start()
        forwarder = distributed.RowForwarder(runner, name, state.worker_cpu)
        info = context.fetch_service_info(host, scenario)
        ctx = context.build_context(scenario, host, forwarder.add, name, info)
        forwarder.open_loop_stats = ctx.open_loop_stats
        ctx.schedule_share = share_from_options(getattr(options, "embedperf_shares", ""), runner.client_id)
        ctx.share_claimed = ctx.schedule_share is None  # joined after the deal: sends none of the schedule
        state.forwarder, state.context = forwarder, ctx
        settle_heap()
        return
    run = state.active()
    if run is not None:
        wait_for_requests_in_flight(environment, run.scenario)


def wait_for_requests_in_flight(environment: Environment, scenario: Scenario) -> None:
    """Closed loop: stopped users finish the request they are in, up to the request timeout, so the last step
    counts every request it started (Locust's own --stop-timeout, when given, is kept); an open loop drains
    its own requests."""
    if float(getattr(environment.parsed_options, "stop_timeout", 0) or 0) > 0:
        return
    closed_loop = not (scenario.is_open_loop or scenario.search.enabled)
    environment.stop_timeout = scenario.target.timeout_s + STOP_MARGIN_S if closed_loop else 0.0


def _on_test_stop(environment: Environment, **_: Any) -> None:
    state = state_of(environment)
    if isinstance(environment.runner, WorkerRunner):
        if state.worker_cpu is not None:
            state.worker_cpu.stop()
        if state.forwarder is not None:
            state.forwarder.stop()
            state.forwarder = None
        return
    state.finalise("test stopped")


def _on_quitting(environment: Environment, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        state = state_of(environment)
        state.finalise("Locust quit")
        verdict.set_exit_code(environment, state.session)


@dataclass(frozen=True)
class _CommandLine:
    """The init_command_line_parser listener; equal for equal defaults, so install() can replace it."""

    default_scenario: str

    def __call__(self, parser: LocustArgumentParser, **_: Any) -> None:
        add_arguments(parser, self.default_scenario)


def install(default_scenario: str, report_builder: webui.ReportBuilder | None = None) -> None:
    """Register embedperf's options and listeners with Locust's events; `report_builder` builds a finished
    run's report.html (the load side imports nothing of reports/). Idempotent: each listener is removed before
    it is added, and the options go only to a parser that lacks them."""
    for hook, listener in (
        (events.init_command_line_parser, _CommandLine(default_scenario)),
        (events.init, _Init(report_builder)),
        (events.test_start, _on_test_start),
        (events.test_stop, _on_test_stop),
        (events.quitting, _on_quitting),
    ):
        with suppress(ValueError):  # not registered yet
            hook.remove_listener(listener)
        hook.add_listener(listener)
