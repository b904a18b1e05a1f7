"""What the users of one load run share: the scenario, where rows go, the expected dimension.

A RunContext is built at test start and kept on the run's state (loadgen.lifecycle.run_state), which lives on
Locust's Environment; nothing here is held in a module global."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from embedperf.schema import RequestRow
from loadgen.traffic.protocols import registry
from loadgen.traffic.protocols.base import TargetProtocol
from loadgen.traffic.request_ids import request_ids
from loadgen.traffic.schedule import StageCuts
from loadgen.traffic.shares import ScheduleShare
from scenarios.models import Scenario

RowSink = Callable[[RequestRow], None]  # receives one request's row
Stage = tuple[int, str, int | None, float | None]  # stage_index, stage_label, target_users, target_rate
INFO_TIMEOUT_S = 3.0


@dataclass
class RunContext:
    """What every user of a run shares. Built at test start; read by users and shapes."""

    scenario: Scenario
    host: str
    sink: RowSink
    worker: str = "local"
    expected_dim: int | None = None
    dim_source: str = ""
    service_info: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    open_loop_stats: dict[str, float] = field(default_factory=dict)
    connection_backoffs: dict[int, int] = field(default_factory=dict)  # per stage index (loadgen.wiring.users)
    search: dict[str, Any] | None = None  # the capacity search's record (loadgen.shaping.search), when one ran
    schedule_share: ScheduleShare | None = None  # open loop: this process's arrivals (loadgen.traffic.shares)
    share_claimed: bool = False
    stage_cuts: StageCuts | None = None  # open loop with steps.until: the steps ended early (set at build)
    request_ids: Iterator[str] = field(default_factory=request_ids)  # X-Request-ID of each request sent
    protocol: TargetProtocol = registry.DEFAULT  # builds each request and judges its answer (target.protocol)

    def claim_share(self) -> ScheduleShare | None:
        """The share to dispatch, once per run (a second dispatcher must not send the same arrivals)."""
        if self.share_claimed:
            return None
        self.share_claimed = True
        return self.schedule_share or ScheduleShare()

    def learn_dim(self, dim: int) -> None:
        """The first good answer fixes the expected dimension when neither /info nor the scenario did."""
        if self.expected_dim is None:
            self.expected_dim = dim
            self.dim_source = "first answer"


def request_headers(scenario: Scenario) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    api_key = os.environ.get(scenario.target.api_key_env, "")
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def fetch_service_info(host: str, scenario: Scenario) -> dict[str, Any] | None:
    """GET the target's info path as its protocol reads it; None when there is none or no answer."""
    target = scenario.target
    protocol = registry.get(target.protocol)
    url = host.rstrip("/") + (target.info_path or protocol.info_path(target))
    req = urllib.request.Request(url, headers=request_headers(scenario))
    try:
        with urllib.request.urlopen(req, timeout=INFO_TIMEOUT_S) as resp:  # noqa: S310 - user-given target
            if resp.status != 200:
                return None
            data = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    return protocol.service_info(data, target.model)


def info_dimension(info: dict[str, Any] | None) -> int | None:
    keys = ("dimension", "dim", "embedding_dim")
    return next((v for key in keys if isinstance(v := (info or {}).get(key), int) and v > 0), None)


def build_context(
    scenario: Scenario, host: str, sink: RowSink, worker: str, service_info: dict[str, Any] | None
) -> RunContext:
    """Expected dimension: /info, else `target.dimension`, else the first answer; unset targets defaulted."""
    target = registry.default_target(scenario.target, scenario.payload.task)
    if target is not scenario.target:
        scenario = scenario.model_copy(update={"target": target})
    ctx = RunContext(
        scenario=scenario, host=host, sink=sink, worker=worker, service_info=service_info,
        headers=request_headers(scenario), protocol=registry.get(scenario.target.protocol),
    )
    if scenario.is_open_loop and any(step.until is not None for step in scenario.steps):
        ctx.stage_cuts = StageCuts(scenario.steps)
    dim = info_dimension(service_info)
    if dim is not None:
        ctx.expected_dim, ctx.dim_source = dim, "service /info"
    elif scenario.target.dimension is not None:
        ctx.expected_dim, ctx.dim_source = scenario.target.dimension, "scenario target.dimension"
    return ctx


def worker_name(client_id: str | None, index: int | None = None) -> str:
    if client_id is None:
        return "local"
    return f"w{index}-{client_id}" if index is not None and index >= 0 else client_id
