"""Build small run folders with known answers (golden folders and per-test fixtures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from decisions.search.state import ProbeMeasurement, SearchRecord, SearchState
from embedperf.schema import (
    REQUEST_SCHEMA,
    TELEMETRY_SCHEMA,
    CollectorStatus,
    HostInfo,
    RunFolder,
    StageRecord,
    new_manifest,
    write_manifest,
    write_requests_parquet,
    write_telemetry_parquet,
)
from scenarios.models import Scenario, Search, Slo

T0_UNIX_S = 1_780_000_000.0
SCRIPT_ERROR = '<script>alert("x")</script> upstream said no'


def request_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as the request schema's table; a column a row lacks is null in that row."""
    return pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)


def telemetry_table(rows: list[tuple[float, str, str, str, float]]) -> pa.Table:
    ts, source, device, metric, value = zip(*rows, strict=True) if rows else ([], [], [], [], [])
    return pa.table(
        {
            "ts_unix_s": list(ts),
            "host": ["golden"] * len(ts),
            "source": list(source),
            "device": list(device),
            "metric": list(metric),
            "value": list(value),
        },
        schema=TELEMETRY_SCHEMA,
    )


def ok_row(stage: int, t_sent: float, latency_ms: float, users: int = 10, **extra: Any) -> dict[str, Any]:
    row = {
        "run_id": "golden",
        "worker": "w0",
        "stage_index": stage,
        "stage_label": f"users={users}",
        "target_users": users,
        "t_intended_unix_s": t_sent,
        "t_sent_unix_s": t_sent,
        "t_done_unix_s": t_sent + latency_ms / 1000.0,
        "latency_ms": latency_ms,
        "latency_from_intended_ms": latency_ms,
        "endpoint": "embeddings",
        "status_code": 200,
        "ok": True,
        "n_inputs": 1,
        "srv_total_ms": latency_ms - 2.0,
        "srv_queue_ms": 0.2 * latency_ms,
        "srv_tokenize_ms": 1.0,
        "srv_compute_ms": 0.5 * latency_ms,
        "srv_post_ms": 0.5,
        "batch_size": 4,
    }
    row.update(extra)
    return row


def scenario_for_stages(
    stages: list[StageRecord], name: str = "golden", kind: str = "ramp", **fields: Any
) -> Scenario:
    """The scenario a run with these stages was driven by (what the load run would have resolved)."""
    steps = []
    for stage in stages:
        duration_s = (stage.end_unix_s or stage.start_unix_s + 1.0) - stage.start_unix_s
        step: dict[str, Any] = {"label": stage.label, "duration_s": duration_s, "warmup_s": stage.warmup_s}
        step["rate" if kind == "openloop" else "users"] = stage.rate if kind == "openloop" else stage.users
        steps.append(step)
    return Scenario.model_validate({"name": name, "kind": kind, "steps": steps, **fields})


def write_run(
    root: Path,
    requests: list[dict[str, Any]],
    telemetry: list[tuple[float, str, str, str, float]],
    stages: list[StageRecord],
    scenario: Scenario | None = None,
    **manifest: Any,
) -> RunFolder:
    """A run folder through the writers: new_manifest (as the load run), then the row tables."""
    folder = RunFolder(root).create()
    write_requests_parquet(folder, request_table(requests))
    if telemetry:
        write_telemetry_parquet(folder, telemetry_table(telemetry))
    if scenario is None:
        kind = "openloop" if manifest.get("kind") == "open_loop" else "ramp"
        scenario = scenario_for_stages(stages, kind=kind, slo={"p99_ms": 995.0, "error_budget_pct": 1.0})
    fields: dict[str, Any] = {
        "service_info": {"model": "golden-model", "device": "cpu", "precision": "fp32"},
        "host": HostInfo(hostname="golden-host", cpu_model="golden-cpu"),
        "start_unix_s": stages[0].start_unix_s,
        "end_unix_s": stages[-1].end_unix_s,
        "stages": stages,
        "collectors": [CollectorStatus(name="psutil", status="ok")],
        "complete": True,
    }
    fields.update(manifest)
    write_manifest(folder, new_manifest(root.name, scenario, "http://127.0.0.1:8086", **fields))
    return folder


def known_percentiles(root: Path) -> RunFolder:
    """One 100 s stage: latencies 1..1000 ms (ok), 5 errors (one with markup), 2 timeouts, 3 validation
    probes, 50 warm-up rows at 5000 ms (trimmed), 4 rows outside any stage (dropped); two devices."""
    rng = np.random.default_rng(7)
    stage = StageRecord(
        index=0,
        label="users=10",
        users=10,
        start_unix_s=T0_UNIX_S,
        end_unix_s=T0_UNIX_S + 110.0,
        warmup_s=10.0,
    )
    latencies = rng.permutation(np.arange(1.0, 1001.0))
    sent = np.sort(rng.uniform(T0_UNIX_S + 10.0, T0_UNIX_S + 108.0, len(latencies)))
    rows = [ok_row(0, float(t), float(v)) for t, v in zip(sent, latencies, strict=True)]
    for i in range(50):
        rows.append(ok_row(0, T0_UNIX_S + 0.1 * i, 5000.0))
    failed: dict[str, Any] = {"ok": False, "srv_total_ms": None, "srv_queue_ms": None}
    failed |= {"srv_tokenize_ms": None, "srv_compute_ms": None, "srv_post_ms": None, "batch_size": None}
    for i in range(5):
        error = SCRIPT_ERROR if i == 0 else "503 Service Unavailable: queue full"
        rows.append(ok_row(0, T0_UNIX_S + 20.0 + i, 3.0, status_code=503, error=error, **failed))
    for i in range(2):
        rows.append(ok_row(0, T0_UNIX_S + 30.0 + i, 30000.0, status_code=504, error="timeout", **failed))
    for i in range(3):
        rows.append(
            ok_row(0, T0_UNIX_S + 40.0 + i, 2.0, status_code=422, endpoint="validation_empty", **failed)
        )
    for i in range(4):
        rows.append(ok_row(7, T0_UNIX_S + 50.0 + i, 10.0))
    telemetry = []
    for s in range(0, 111):
        ts = T0_UNIX_S + s
        for device, util, temp in (("npu0.chip0", 50.0, 60.0), ("npu1.chip0", 70.0, 90.0)):
            telemetry += [
                (ts, "npu_smi", device, "device_util_pct", util),
                (ts, "npu_smi", device, "temp_c", temp),
                (ts, "npu_smi", device, "power_w", 100.0),
                (ts, "npu_smi", device, "mem_used_mb", 1000.0),
                (ts, "npu_smi", device, "mem_total_mb", 4000.0),
            ]
        telemetry += [
            (ts, "psutil", "proc:generator", "cpu_util_pct", 30.0),
            (ts, "psutil", "proc:service", "cpu_util_pct", 150.0),
            (ts, "psutil", "proc:service", "rss_mb", 900.0),
        ]
    return write_run(root, rows, telemetry, [stage])


REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


def stepped_run(
    root: Path,
    users: list[int],
    step_s: float,
    qps_per_user: float = 10.0,
    latency_ms: float = 20.0,
    refused: bool = False,
    seed: int = 0,
    slo: dict[str, Any] | None = None,
    **manifest: Any,
) -> RunFolder:
    """A closed-loop run, one step per entry of users, each step_s long with 1 s warm-up.

    Requests arrive uniformly at random at qps_per_user x users per second on average; latencies
    scatter around latency_ms.
    refused=True models a dead target: every request fails with connection refused in ~1 ms.
    """
    rng = np.random.default_rng(seed)
    stages, rows = [], []
    for i, u in enumerate(users):
        start = T0_UNIX_S + i * step_s
        stages.append(
            StageRecord(
                index=i,
                label=f"users={u}",
                users=u,
                start_unix_s=start,
                end_unix_s=start + step_s,
                warmup_s=1.0,
            )
        )
        n = int(qps_per_user * u * step_s)
        sent = np.sort(rng.uniform(start, start + step_s, n)).tolist()
        if refused:
            failed = dict.fromkeys(("srv_total_ms", "srv_queue_ms", "srv_tokenize_ms", "srv_compute_ms"))
            failed |= {"srv_post_ms": None, "batch_size": None, "status_code": None}
            rows += [ok_row(i, t, 1.0, users=u, ok=False, error=REFUSED, **failed) for t in sent]
        else:  # the same draws as one uniform(0.8, 1.2) per row, in row order
            scale = rng.uniform(0.8, 1.2, n).tolist()
            rows += [ok_row(i, t, latency_ms * k, users=u) for t, k in zip(sent, scale, strict=True)]
    if slo is not None:
        manifest["scenario"] = scenario_for_stages(stages, slo=slo)
    return write_run(root, rows, [], stages, **manifest)


SEARCH_LIMIT_RPS = 137.0  # search_record's target: P99 crosses the SLO above this rate
SEARCH_SLO_MS = 100.0


def search_record(limit_rps: float = SEARCH_LIMIT_RPS, slo_ms: float = SEARCH_SLO_MS) -> SearchRecord:
    """The search state machine driven by a target whose P99 crosses the SLO at limit_rps."""
    spec = Search.model_validate(
        {
            "start_rate": 40.0,
            "min_ok_requests": 400,
            "min_probe_s": 2.0,
            "warmup_s": 0.5,
            "max_duration_s": 1e6,
        }
    )
    state = SearchState(spec, Slo(p99_ms=slo_ms, error_budget_pct=0.1), "poisson")
    stage, elapsed = 0, 0.0
    while (plan := state.next_probe(elapsed)) is not None:
        n = int(plan.rate * (plan.duration_s - spec.warmup_s))
        latency_ms = 20.0 if plan.rate <= limit_rps else 400.0
        m = ProbeMeasurement(
            rate=plan.rate,
            duration_s=plan.duration_s - spec.warmup_s,
            scheduled=n,
            ok=n,
            errors=0,
            ok_done=n,
            ok_latency_ms=[latency_ms + (i % 7) for i in range(n)],
        )
        state.add(plan, stage, f"{plan.phase}:{plan.rate:g}", m)
        stage, elapsed = stage + 1, elapsed + plan.duration_s
    return state.record
