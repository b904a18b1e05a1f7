"""Adaptive open-loop steps in distributed mode: the master tells every worker where a step ended.

The master decides from the rows its workers forward (loadgen.recording.until_watch) and places the cut
CUT_LEAD_S ahead of now, longer than a message takes to reach a worker, so each worker's dispatcher applies it
before its schedule gets there (loadgen.traffic.schedule.StageCuts)."""

from __future__ import annotations

from typing import Any

from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner, WorkerRunner

from loadgen.lifecycle.run_state import state_of

CUT_MSG = "embedperf_stage_cut"
CUT_LEAD_S = 1.0


def register_worker_cuts(runner: WorkerRunner) -> None:
    def on_cut(environment: Environment, msg: Message, **_: Any) -> None:
        ctx = state_of(environment).context
        if ctx is not None and ctx.stage_cuts is not None:
            ctx.stage_cuts.cut(int(msg.data["index"]), float(msg.data["planned_offset_s"]))

    runner.register_message(CUT_MSG, on_cut)


def publish_cut(runner: MasterRunner, index: int, planned_offset_s: float) -> None:
    runner.send_message(CUT_MSG, {"index": index, "planned_offset_s": planned_offset_s})
