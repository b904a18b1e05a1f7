"""Locust load shapes built from a scenario; they also record each stage's real start and end."""

from __future__ import annotations

import time

from locust import LoadTestShape

from loadgen import distributed, session

DEFAULT_SPAWN_RATE_FACTOR = 10.0  # users per second = users x this: a step's users start within 0.1 s


class ScenarioShape(LoadTestShape):
    """Steps of the active scenario. Closed loop: users per step. Open loop: one dispatcher user
    for the whole schedule plus a drain period; stages still follow the steps' rates."""

    def __init__(self) -> None:
        super().__init__()
        self._stage_index = -1
        self._users_stopped = False

    def reset_time(self) -> None:
        super().reset_time()
        self._stage_index = -1
        self._users_stopped = False

    def tick(self) -> tuple[int, float] | None:
        run = session.active()
        if run is None:
            return None
        scenario = run.scenario
        run_time = self.get_run_time()
        elapsed = 0.0
        for index, step in enumerate(scenario.steps):
            elapsed += step.duration_s
            if run_time < elapsed:
                if index != self._stage_index:
                    self._stage_index = index
                    run.timeline.begin(
                        index,
                        step.label,
                        time.time(),
                        users=step.users,
                        rate=step.rate,
                        warmup_s=step.warmup_s,
                    )
                if scenario.is_open_loop:
                    return (1, 100.0)
                users = step.users or 1
                return (users, step.spawn_rate or users * DEFAULT_SPAWN_RATE_FACTOR)
        if self._stage_index != len(scenario.steps):
            self._stage_index = len(scenario.steps)
            run.timeline.end(time.time())
        if scenario.is_open_loop and run_time < elapsed + scenario.drain_s:
            return (1, 100.0)
        if distributed.is_distributed(self.runner):
            if not self._users_stopped:  # one more tick with no users, so workers finish their requests
                self._users_stopped = True
                return (0, 1000.0)
            distributed.collect_final_rows(run, self.runner)  # type: ignore[arg-type]
        run.shape_completed = True
        return None
