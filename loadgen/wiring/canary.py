"""Wire a canary into Locust: the stage weight for the users, the live judge on the shape's tick, the stop.

The canary's stages are the scenario's steps, so ScenarioShape runs them (closed or open loop, local or
distributed); CanaryShape adds telling the users which stage runs, the monitor's judgement of each window
(loadgen.lifecycle.canary_monitor), and the end of the run, as a shape ends any, as soon as a rollback trigger
fires, or once the last window's verdict is in."""

from __future__ import annotations

import logging
import sys
import time
from contextlib import suppress
from typing import Any

from locust import events
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, Runner, WorkerRunner

from embedperf.parts import FLUSH_INTERVAL_S
from loadgen.distributed import rows as distributed
from loadgen.lifecycle.canary_monitor import CanaryMonitor
from loadgen.lifecycle.run_state import state_of
from loadgen.lifecycle.session import RunSession
from loadgen.traffic.canary_split import CanaryTraffic
from loadgen.traffic.context import fetch_service_info
from loadgen.wiring.shapes import STOP_RATE, ScenarioShape

log = logging.getLogger("embedperf.loadgen")
STAGE_MSG = "embedperf_canary_stage"  # master -> workers: the stage now running (closed loop)
# A window is judged this long after it ends (plus its slowest answer), for the requests in flight then; a
# temperature trigger also waits a telemetry flush, a distributed run a worker's forward interval.
SETTLE_MARGIN_S = 1.5
TELEMETRY_SETTLE_S = FLUSH_INTERVAL_S + SETTLE_MARGIN_S
DISTRIBUTED_SETTLE_S = TELEMETRY_SETTLE_S + distributed.FORWARD_INTERVAL_S


def traffic_of(environment: Environment) -> CanaryTraffic:
    traffic = state_of(environment).canary
    if traffic is None:
        raise RuntimeError(
            "this Locust environment has no canary traffic: run canaries with `embedperf canary` "
            "(locustfiles/canary.py or canary_openloop.py install it)"
        )
    return traffic


def _on_init(environment: Environment, runner: Runner, **_: Any) -> None:
    if isinstance(runner, WorkerRunner):

        def on_stage(environment: Environment, msg: Message, **_kw: Any) -> None:
            # Locust calls a message listener as listener(environment=..., msg=...)
            state = state_of(environment)
            state.canary_stage = int(msg.data)  # for users that start later
            if state.canary is not None:
                state.canary.stage_index = state.canary_stage

        runner.register_message(STAGE_MSG, on_stage)


def _on_test_start(environment: Environment, **_: Any) -> None:
    """After embedperf's own listener has built the run's context (local process or worker)."""
    if isinstance(environment.runner, MasterRunner):
        return
    state = state_of(environment)
    ctx = state.context
    if ctx is None:
        return
    canary = ctx.scenario.canary
    if not canary.enabled:
        print("embedperf: error: this locustfile runs canaries; start it with `embedperf canary`", file=sys.stderr)
        sys.exit(2)
    info = fetch_service_info(canary.candidate_url.rstrip("/"), ctx.scenario)
    traffic = CanaryTraffic.build(ctx, info)
    if isinstance(environment.runner, WorkerRunner):  # a stage the master announced before this run's users
        traffic.stage_index = state.canary_stage
    state.canary = traffic


def install_canary() -> None:
    """Register the canary's listeners after plugin.install's (they need the run's state); idempotent."""
    for hook, listener in ((events.init, _on_init), (events.test_start, _on_test_start)):
        with suppress(ValueError):  # not registered yet
            hook.remove_listener(listener)
        hook.add_listener(listener)


class CanaryShape(ScenarioShape):
    """The canary's stages, judged window by window, stopped by a trigger. Closed loop, a stage is held past
    its last window until that window is judged (the shape's clock pauses meanwhile); an open-loop schedule is
    fixed, so its stage's last window is judged the settle time into the next stage."""

    def __init__(self) -> None:
        super().__init__()
        self._monitor: CanaryMonitor | None = None
        self._published = -1
        self._stopping = False
        self._held_s = 0.0
        self._hold_since: float | None = None
        self._last: tuple[int, float] | None = None

    def _new_run(self, run: RunSession) -> None:
        super()._new_run(run)
        if distributed.is_distributed(self.runner):
            self._monitor = CanaryMonitor(run, DISTRIBUTED_SETTLE_S)
        else:
            reads_telemetry = run.collectors is not None and run.scenario.rollback.max_temp_c is not None
            settle_s = TELEMETRY_SETTLE_S if reads_telemetry else SETTLE_MARGIN_S
            self._monitor = CanaryMonitor(run, settle_s, flush=run.recorder.flush)
        self._published = -1
        self._stopping = False
        self._held_s = 0.0
        self._hold_since = None

    def get_run_time(self) -> float:
        """The scenario's clock: real run time less the time stages were held for their judgement."""
        held = self._held_s + (time.monotonic() - self._hold_since if self._hold_since is not None else 0.0)
        return super().get_run_time() - held

    def _holding(self, run: RunSession, monitor: CanaryMonitor) -> bool:
        """Closed loop: at a stage's planned end, hold it until its windows are judged."""
        stage = run.timeline.current
        if run.scenario.is_open_loop or stage is None or stage.end_unix_s is not None:
            return False
        if stage.index + 1 >= len(run.scenario.steps):  # the last stage is held by _finish
            return False
        if self._hold_since is None:
            boundary_s = self._stage_end_run_s
            run_time_s = self.get_run_time()
            if run_time_s < boundary_s:
                return False
            # a late tick (a generator stalled by a busy host) finds the clock past the boundary, maybe
            # past the next stage's end too: the hold starts at the boundary, so no stage is skipped
            self._hold_since = time.monotonic() - (run_time_s - boundary_s)
        if not monitor.stage_judged(stage) and monitor.verdict.status == "running":
            return True
        self._held_s += time.monotonic() - self._hold_since
        self._hold_since = None
        return False

    def tick(self) -> tuple[int, float] | None:
        run, monitor = self._run, self._monitor
        if run is not None and monitor is not None:
            if self._stopping:
                return self._stop(run)
            if self._holding(run, monitor):
                if monitor.poll().status == "rollback":
                    return self._roll_back(run, monitor)
                return self._last
        result = super().tick()
        run, monitor = self._run, self._monitor
        if result is None or run is None or monitor is None:
            return result
        self._last = result
        self._publish_stage(run)
        if monitor.poll().status == "rollback":
            return self._roll_back(run, monitor)
        return result

    def _roll_back(self, run: RunSession, monitor: CanaryMonitor) -> tuple[int, float] | None:
        log.warning("embedperf canary: %s", monitor.verdict.line)
        run.manifest.notes.append(f"canary stopped: {monitor.verdict.line}")
        self._stopping = True
        return self._stop(run)

    def _publish_stage(self, run: RunSession) -> None:
        """Closed-loop users draw each request's side with the running stage's weight."""
        stage = run.timeline.current
        if stage is None or stage.index == self._published or self.runner is None:
            return
        self._published = stage.index
        if self._monitor is not None:
            self._monitor.stage_started(stage.index)
        if distributed.is_distributed(self.runner):
            self.runner.send_message(STAGE_MSG, stage.index)
            return
        traffic = state_of(self.runner.environment).canary
        if traffic is not None:
            traffic.stage_index = stage.index

    def _stop(self, run: RunSession) -> tuple[int, float] | None:
        """Stop now: no further stage; a distributed run first collects its workers' last rows."""
        return (0, STOP_RATE) if self._collect_workers(run) else None

    def _finish(self, run: RunSession) -> tuple[int, float] | None:
        """Every stage ran: keep the load on until the last window is judged, give the verdict, end."""
        monitor = self._monitor
        if monitor is not None and monitor.verdict.status == "running":
            last = run.timeline.current
            verdict = monitor.poll()
            if verdict.status == "running" and last is not None and not monitor.stage_judged(last):
                return self._last
            verdict = monitor.poll(finished=True)
            log.warning("embedperf canary: %s", verdict.line)
        return super()._finish(run)
