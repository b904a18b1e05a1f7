"""The one object that holds a load run's state in a Locust process, kept on Locust's Environment.

Users reach it through `self.environment`, the shape through `self.runner.environment`, listeners through the
`environment` Locust passes them: `state_of(environment)`. Nothing lives in a module global, so two
Environments in one process (a test, a benchmark) never see each other's run. Locust's Environment has no
plugin slot, so the init listener sets one new attribute (`ATTRIBUTE`) of our own on it: no private member of
Locust's is read or written."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from locust.env import Environment

from loadgen.lifecycle.session import RunOptions, RunSession
from loadgen.lifecycle.target_detection import ResolvedTarget
from loadgen.recording.monitor import CpuMonitor
from loadgen.recording.webui import ReportBuilder
from loadgen.traffic.canary_split import CanaryTraffic
from loadgen.traffic.context import RunContext
from scenarios.models import Scenario

ATTRIBUTE = "embedperf"  # environment.embedperf: the RunState of the Environment's run


class RowOutlet(Protocol):
    """A worker's way to the master for its rows (loadgen.distributed.rows.RowForwarder)."""

    def batch(self, final: bool = False) -> dict[str, Any]:
        """Take the rows buffered so far as one message's data."""

    def stop(self) -> None:
        """Send what is left and stop forwarding."""


@dataclass
class RunState:
    """Everything of a run that outlives one call, from Locust's init until it quits: on a local or master
    process the scenario, options and run session; on a worker the users' context, CPU monitor and row
    forwarder; in a canary run its traffic split."""

    environment: Environment
    scenario: Scenario | None = None
    options: RunOptions | None = None
    resolve: Callable[[], tuple[Scenario, RunOptions]] | None = None  # re-read before each run (web UI)
    target: ResolvedTarget | None = None  # the pre-flight check's (headless): every run's scenario speaks it
    session: RunSession | None = None  # the run this process writes or wrote last (local or master)
    context: RunContext | None = None  # what the users share; None between runs
    worker_cpu: CpuMonitor | None = None
    forwarder: RowOutlet | None = None
    user_seq: Iterator[int] = field(default_factory=itertools.count)  # each user's payload seed offset
    report_builder: ReportBuilder | None = None  # the web UI's end-of-run report, registered by the locustfile
    canary: CanaryTraffic | None = None  # a canary run's split between baseline and candidate (loadgen.wiring.canary)
    canary_stage: int = 0  # worker: the last canary stage the master announced, for users that start later

    def bind(
        self, scenario: Scenario, options: RunOptions,
        resolve: Callable[[], tuple[Scenario, RunOptions]] | None = None,
    ) -> None:
        """At init; `resolve` re-reads scenario and options before each run (the web UI's form)."""
        self.scenario, self.options, self.resolve = scenario, options, resolve

    def active(self) -> RunSession | None:
        """The run being written, starting it on first use after `bind` (the shape ticks before test_start)."""
        if self.session is not None and not self.session.finalised:
            return self.session
        if self.options is None or self.scenario is None:
            return None
        if self.resolve is not None:  # the options as they stand now: the web UI's form may have changed them
            self.scenario, self.options = self.resolve()
        host = self.environment.host or self.scenario.target.base_url
        self.session = RunSession(self.environment, self.scenario, self.options, host)
        self.session.start()
        self.context = self.session.ctx
        return self.session

    def current_session(self) -> RunSession | None:
        """The run being written, or None (not started yet, or finalised)."""
        return self.session if self.session is not None and not self.session.finalised else None

    def finalise(self, reason: str) -> None:
        run = self.current_session()
        if run is None:
            return
        run.finalise(reason)
        if self.context is run.ctx:
            self.context = None

    def current_context(self) -> RunContext:
        """What a user needs to send requests; an error while no run has started in this process."""
        if self.context is None:
            raise RuntimeError("no load run is active in this process (the test has not started)")
        return self.context


def attach(environment: Environment) -> RunState:
    """The Environment's RunState, created on first call (Locust's init listener makes that call)."""
    state = getattr(environment, ATTRIBUTE, None)
    if not isinstance(state, RunState):
        state = RunState(environment)
        setattr(environment, ATTRIBUTE, state)
    return state


def state_of(environment: Environment) -> RunState:
    """The Environment's RunState; an error that says how to get one when embedperf was not installed."""
    state = getattr(environment, ATTRIBUTE, None)
    if not isinstance(state, RunState):
        raise RuntimeError(
            "this Locust environment has no embedperf run state: the locustfile must call "
            "loadgen.wiring.plugin.install(...) (or loadgen.lifecycle.run_state.attach(environment))"
        )
    return state
