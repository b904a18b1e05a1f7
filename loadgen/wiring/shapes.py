"""Locust load shapes built from a scenario; they also record each stage's real start and end."""

from __future__ import annotations

import time

from locust import LoadTestShape

from loadgen.distributed import rows as distributed
from loadgen.lifecycle import session
from loadgen.lifecycle.run_state import RunState, state_of
from loadgen.traffic.schedule import StageCuts, stage_offsets_s
from loadgen.traffic.shares import ScheduleShare

DEFAULT_SPAWN_RATE_FACTOR = 10.0  # users per second = users x this: a step's users start within 0.1 s
LOCAL_START_LEAD_S = 0.25  # open loop: the schedule's origin lies this far ahead of the first tick
DISPATCHER_SPAWN_RATE = 100.0
STOP_RATE = 1000.0  # users stopped at once when a run ends or stops


class ScenarioShape(LoadTestShape):
    """Steps of the active scenario. Closed loop: users per step. Open loop: one dispatcher per sending
    process (with its share of the arrivals) for the schedule plus a drain; stages at the schedule's own
    instants."""

    def __init__(self) -> None:
        super().__init__()
        self._run: session.RunSession | None = None
        self._stage_index = -1
        self._stage_end_run_s = 0.0  # closed loop: the scenario clock's reading when this step ends
        self._users_stopped = False
        self._origin_unix_s: float | None = None
        self._dispatchers = 1
        self._cuts: StageCuts | None = None  # open loop with steps.until: where steps ended early

    def _new_run(self, run: session.RunSession) -> None:
        """A run's clock starts at its first tick (starting the session is no part of step 0); Locust's own
        reset_time calls only re-zero the clock, never begin a stage again."""
        self._run = run
        self._stage_index = -1
        self._stage_end_run_s = 0.0
        self._users_stopped = False
        self._origin_unix_s = None
        self._cuts = None
        self.reset_time()

    def _state(self) -> RunState:
        """The run's state, on the Environment of the runner Locust gave this shape."""
        if self.runner is None:
            raise RuntimeError("the load shape ticks before Locust gave it a runner")
        return state_of(self.runner.environment)

    def tick(self) -> tuple[int, float] | None:
        run = self._state().active()
        if run is None:
            return None
        if run is not self._run:  # the web UI starts several runs with one shape
            self._new_run(run)
        scenario = run.scenario
        if scenario.search.enabled:
            return self._search_tick(run)
        if scenario.is_open_loop:
            return self._open_loop_tick(run)
        return self._closed_loop_tick(run)

    def _closed_loop_tick(self, run: session.RunSession) -> tuple[int, float] | None:
        """A step begins at the first tick past the previous one's whole duration and lasts its own from
        there: a late tick delays the next step, never skips one."""
        steps = run.scenario.steps
        run_time_s = self.get_run_time()
        if self._stage_index < 0 or (self._stage_index < len(steps) and self._step_done(run, run_time_s)):
            self._stage_index += 1
            if self._stage_index < len(steps):
                self._stage_end_run_s = run_time_s + steps[self._stage_index].duration_s
                self._begin(run, time.time(), closed_loop=True)
            else:
                run.timeline.end(time.time())
        if self._stage_index < len(steps):
            step = steps[self._stage_index]
            users = step.users or 1
            return (users, step.spawn_rate or users * DEFAULT_SPAWN_RATE_FACTOR)
        return self._finish(run)

    def _step_done(self, run: session.RunSession, run_time_s: float) -> bool:
        """The step ran its duration, or (steps.until) its P99 interval is narrow enough (its ending)."""
        ending = run.until.converged(time.time())
        if ending is None and run_time_s >= self._stage_end_run_s:
            ending = run.until.timed_out()
            if ending is None:
                return True  # a fixed step
        if ending is None:
            return False
        run.timeline.record_ending(self._stage_index, ending)
        return True

    def _open_loop_tick(self, run: session.RunSession) -> tuple[int, float] | None:
        """Stages begin at the schedule's instants, not the ticks noticing them; adaptive steps end early."""
        scenario = run.scenario
        steps = scenario.steps
        if self._origin_unix_s is None:
            self._origin_unix_s = self._publish_origin()
            self._cuts = self._stage_cuts(run)
        origin = self._origin_unix_s
        cuts = self._cuts
        offsets = cuts.starts_s() if cuts is not None else stage_offsets_s(steps)
        end_offset_s = cuts.end_s() if cuts is not None else offsets[-1] + steps[-1].duration_s
        elapsed_s = time.time() - origin
        if elapsed_s < end_offset_s:
            current = max(i for i, offset in enumerate(offsets) if offset <= max(elapsed_s, 0.0))
            self._begin_through(run, current, origin, offsets)
            if cuts is not None:
                self._cut_if_known(run, cuts, elapsed_s)
            return (self._dispatchers, DISPATCHER_SPAWN_RATE)
        if self._stage_index != len(steps):
            self._begin_through(run, len(steps) - 1, origin, offsets)
            self._record_timeout(run, len(steps) - 1)
            self._stage_index = len(steps)
            run.timeline.end(origin + end_offset_s)
        if elapsed_s < end_offset_s + scenario.drain_s:
            return (self._dispatchers, DISPATCHER_SPAWN_RATE)
        return self._finish(run)

    def _begin_through(self, run: session.RunSession, index: int, origin: float, offsets: list[float]) -> None:
        """Begin every stage up to `index` not begun yet, each at its own instant."""
        while self._stage_index < index:
            if self._stage_index >= 0:
                self._record_timeout(run, self._stage_index)
            self._stage_index += 1
            self._begin(run, origin + offsets[self._stage_index])

    def _begin(self, run: session.RunSession, t_unix_s: float, closed_loop: bool = False) -> None:
        """Begin step `_stage_index` at t: its stage record (users only closed loop), its adaptive watch."""
        step = run.scenario.steps[self._stage_index]
        users = step.users if closed_loop else None
        run.timeline.begin(self._stage_index, step.label, t_unix_s, users=users, rate=step.rate, warmup_s=step.warmup_s)
        run.until.begin(self._stage_index, t_unix_s, step.warmup_s, step.until)

    def _stage_cuts(self, run: session.RunSession) -> StageCuts | None:
        """Where adaptive open-loop steps end: this process's dispatcher's (local), or the master's own copy."""
        if not any(step.until is not None for step in run.scenario.steps):
            return None
        if distributed.is_distributed(self.runner):
            return StageCuts(run.scenario.steps)
        ctx = self._state().context
        return ctx.stage_cuts if ctx is not None else None

    def _cut_if_known(self, run: session.RunSession, cuts: StageCuts, elapsed_s: float) -> None:
        """End the current adaptive step CUT_LEAD_S from now once its P99 is known, on every dispatcher."""
        index = self._stage_index
        if index < 0 or index in cuts.cut_s or run.until.last_reason == "converged":
            return
        ending = run.until.converged(time.time())
        if ending is None:
            return
        run.timeline.record_ending(index, ending)
        planned = elapsed_s + distributed.CUT_LEAD_S + cuts.shift_s(index)
        cuts.cut(index, planned)
        if index in cuts.cut_s and distributed.is_distributed(self.runner):
            distributed.publish_cut(self.runner, index, planned)  # type: ignore[arg-type]

    def _record_timeout(self, run: session.RunSession, index: int) -> None:
        """An adaptive step left without a decision ran to its longest time: its stage record says so."""
        if run.until.last_reason is None:
            ending = run.until.timed_out()
            if ending is not None:
                run.timeline.record_ending(index, ending)

    def _publish_origin(self) -> float:
        """Fix the schedule's origin and hand out the shares: to the workers (distributed) or this process."""
        if distributed.is_distributed(self.runner):
            origin = time.time() + distributed.START_LEAD_S
            self._dispatchers = distributed.publish_shares(self.runner, origin)  # type: ignore[arg-type]
            return origin
        origin = time.time() + LOCAL_START_LEAD_S
        self._dispatchers = 1
        ctx = self._state().context
        if ctx is not None:
            ctx.schedule_share = ScheduleShare(0, 1, origin)
        return origin

    def _finish(self, run: session.RunSession) -> tuple[int, float] | None:
        if self._collect_workers(run):
            return (0, STOP_RATE)
        run.shape_completed = True
        return None

    def _collect_workers(self, run: session.RunSession) -> bool:
        """Distributed: first a tick without users (True) so workers finish, then collect their last rows."""
        if not distributed.is_distributed(self.runner):
            return False
        if not self._users_stopped:
            self._users_stopped = True
            return True
        distributed.collect_final_rows(run, self.runner)  # type: ignore[arg-type]
        return False

    def _search_tick(self, run: session.RunSession) -> tuple[int, float] | None:
        """A capacity search decides its own stages (loadgen.shaping.search); keep its dispatcher until it is done."""
        if distributed.is_distributed(self.runner):
            run.manifest.notes.append("capacity search needs one process: run it without Locust workers")
            return None
        ctx = self._state().context
        if ctx is None or ctx.search is None:
            return (1, 100.0)
        run.shape_completed = True
        return None
