"""`embedperf synth`: write a synthetic but realistic run folder (scale benchmark, tests, demos).

Four closed-loop steps (1, 10, 50, 100 users) share the run's duration. Each step's throughput
follows a saturating curve, and its mean latency follows from Little's law (users / QPS), so the
figures agree with each other the way a real run's do. Telemetry: 1 Hz samples for N npu devices
with every canonical device metric, plus psutil host/process rows and service rows.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from embedperf.errors import ConfigError
from embedperf.parts import ROW_GROUP_ROWS
from embedperf.schema import (
    REQUEST_SCHEMA,
    TELEMETRY_SCHEMA,
    CollectorStatus,
    GeneratorCpu,
    HostInfo,
    RunFolder,
    StageRecord,
    new_manifest,
    write_manifest,
)
from scenarios.models import Scenario

STEP_USERS: tuple[int, ...] = (1, 10, 50, 100)
STEP_QPS_WEIGHTS: tuple[float, ...] = (0.1, 0.6, 1.0, 1.05)
STEP_ERROR_RATES: tuple[float, ...] = (0.0002, 0.0003, 0.0005, 0.004)
STEP_QUEUE_SHARE: tuple[float, ...] = (0.05, 0.2, 0.5, 0.65)
STEP_BATCH_LAMBDA: tuple[float, ...] = (0.2, 3.0, 12.0, 24.0)
STEP_DEVICE_UTIL_PCT: tuple[float, ...] = (8.0, 45.0, 85.0, 92.0)
DEFAULT_START_UNIX_S = 1_780_000_000.0
WARMUP_FRACTION = 0.05
WARMUP_MAX_S = 30.0
SERVICE_RSS_MB = 1800.0
CHUNK_ROWS = 1_000_000  # request rows generated and written at a time
CHUNK_SECONDS = 3600  # telemetry seconds generated and written at a time
MODEL = "all-MiniLM-L6-v2"  # what /info names and every ok answer's X-Served-Model


def _strings(values: list[str], codes: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(values)).cast(pa.string())


def _masked(values: np.ndarray, valid: np.ndarray, typ: pa.DataType) -> pa.Array:
    return pa.array(values, type=typ, mask=~valid)


def synth_request_chunks(
    rng: np.random.Generator, run_id: str, stages: list[StageRecord], n_requests: int
) -> Iterator[pa.Table]:
    """Request rows in time order, at most CHUNK_ROWS at a time (each stage cut into equal time slices)."""
    weights = np.array(STEP_QPS_WEIGHTS)
    counts = np.floor(n_requests * weights / weights.sum()).astype(np.int64)
    counts[-1] += n_requests - counts.sum()  # each step's share of the rows, the rest to the last
    first_id = 1
    for k, (stage, n) in enumerate(zip(stages, counts.tolist(), strict=True)):
        start, end = stage.start_unix_s, float(stage.end_unix_s or stage.start_unix_s)
        mean_latency_ms = (stage.users or 1) / (n / (end - start)) * 1000.0
        n_chunks = max(1, -(-n // CHUNK_ROWS))
        span_s = (end - mean_latency_ms / 1000.0 - start) / n_chunks
        for j in range(n_chunks):
            n_chunk = n // n_chunks + (1 if j < n % n_chunks else 0)
            lo = start + j * span_s
            chunk = _request_chunk(rng, run_id, stages, k, n_chunk, (lo, lo + span_s), mean_latency_ms)
            yield _with_ids(chunk, first_id)
            first_id += n_chunk


def _with_ids(chunk: pa.Table, first_id: int) -> pa.Table:
    """Request IDs (`synth-<n>`, unique in the run) and the served model of every ok answer, derived from
    the row's position and outcome alone, so the rows' random draws stay as they were."""
    numbers = pc.cast(pa.array(np.arange(first_id, first_id + chunk.num_rows)), pa.string())
    ids = pc.binary_join_element_wise("synth", numbers, "-")
    served = pc.if_else(chunk.column("ok"), pa.scalar(MODEL), pa.scalar(None, pa.string()))
    return chunk.set_column(chunk.schema.get_field_index("request_id"), "request_id", ids).set_column(
        chunk.schema.get_field_index("served_model"), "served_model", served
    )


def _request_chunk(
    rng: np.random.Generator, run_id: str, stages: list[StageRecord], k: int, n: int,
    sent_window: tuple[float, float], mean_latency_ms: float,
) -> pa.Table:  # fmt: skip
    stage = stages[k]
    sigma = 0.3 + 0.1 * k
    latency = rng.lognormal(np.log(mean_latency_ms) - sigma**2 / 2, sigma, n)
    sent = np.sort(rng.uniform(sent_window[0], sent_window[1], n))
    latency = np.where(sent < stage.start_unix_s + stage.warmup_s, latency * 1.5, latency)
    failed = rng.random(n) < STEP_ERROR_RATES[k]
    timeout = failed & (rng.random(n) < 0.3)
    ok = ~failed
    net = np.minimum(0.8 + rng.exponential(0.7, n), 0.3 * latency)
    srv_total = latency - net
    shares = np.stack([
        STEP_QUEUE_SHARE[k] * rng.uniform(0.5, 1.5, n), 0.05 * rng.uniform(0.5, 1.5, n),
        (0.88 - STEP_QUEUE_SHARE[k]) * rng.uniform(0.8, 1.2, n), 0.03 * rng.uniform(0.5, 1.5, n),
        np.full(n, 0.02),
    ])  # fmt: skip
    shares /= shares.sum(axis=0)
    batch = np.minimum(rng.poisson(STEP_BATCH_LAMBDA[k], n) + 1, 32)
    worker_code = rng.integers(0, 4, n)
    input_tokens = rng.integers(16, 128, n)
    error_code = np.where(timeout, 1, np.where(failed, 2, 0))
    errors = np.array([None, "timeout: no response within 30 s", "503 Service Unavailable: queue full"])
    stages_ms = ("srv_queue_ms", "srv_tokenize_ms", "srv_compute_ms", "srv_post_ms")
    srv = {name: srv_total * shares[j] for j, name in enumerate(stages_ms)} | {"srv_total_ms": srv_total}
    columns = {
        "run_id": _strings([run_id], np.zeros(n, np.int32)),
        "worker": _strings(["w0", "w1", "w2", "w3"], worker_code),
        "stage_index": pa.array(np.full(n, stage.index), pa.int32()),
        "stage_label": _strings([stage.label], np.zeros(n, np.int32)),
        "target_users": pa.array(np.full(n, stage.users or 0), pa.int32()),
        "t_intended_unix_s": pa.array(sent),
        "t_sent_unix_s": pa.array(sent),
        "t_done_unix_s": pa.array(sent + latency / 1000.0),
        "latency_ms": pa.array(latency),
        "latency_from_intended_ms": pa.array(latency),
        "endpoint": _strings(["embeddings"], np.zeros(n, np.int32)),
        "status_code": pa.array(np.where(timeout, 504, np.where(failed, 503, 200)), pa.int32()),
        "ok": pa.array(ok),
        "error": pa.array(errors[error_code], pa.string()),
        "n_inputs": pa.array(np.ones(n, np.int32)),
        "input_chars": pa.array(input_tokens * 4),
        "input_tokens": pa.array(input_tokens),
        "response_bytes": _masked(np.full(n, 2100), ok, pa.int64()),
        **{name: _masked(values, ok, pa.float64()) for name, values in srv.items()},
        "batch_size": _masked(batch, ok, pa.int32()),
        "batch_tokens": _masked(batch * 64, ok, pa.int64()),
    }
    # every other column is null (request_id and served_model: filled by _with_ids)
    table = {f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in REQUEST_SCHEMA}
    return pa.table(table).cast(REQUEST_SCHEMA)


def synth_telemetry_chunks(
    rng: np.random.Generator, stages: list[StageRecord], n_devices: int
) -> Iterator[pa.Table]:
    """1 Hz telemetry, CHUNK_SECONDS of samples at a time."""
    t0, t1 = stages[0].start_unix_s, float(stages[-1].end_unix_s or stages[-1].start_unix_s)
    all_ts = np.arange(np.floor(t0), np.ceil(t1) + 1.0)
    for lo in range(0, len(all_ts), CHUNK_SECONDS):
        yield _telemetry_chunk(rng, stages, n_devices, all_ts[lo : lo + CHUNK_SECONDS])


def _telemetry_chunk(
    rng: np.random.Generator, stages: list[StageRecord], n_devices: int, ts: np.ndarray
) -> pa.Table:
    starts = np.array([s.start_unix_s for s in stages])
    step = np.clip(np.searchsorted(starts, ts, side="right") - 1, 0, len(stages) - 1)
    util_base = np.array(STEP_DEVICE_UTIL_PCT)[step]
    n_t = len(ts)
    series: list[tuple[int, int, int, np.ndarray]] = []  # (device, source, metric) codes and values
    others = ["cpu", "proc:generator", "proc:service", "service"]  # psutil's host and processes, the service
    devices = [f"npu{d}.chip0" for d in range(n_devices)] + others
    metrics: list[str] = []

    def emit(device: int, source: int, metric: str, values: np.ndarray) -> None:
        if metric not in metrics:
            metrics.append(metric)
        series.append((device, source, metrics.index(metric), values))

    for d in range(n_devices):
        util = np.clip(util_base + rng.normal(0, 4, n_t), 0, 100)
        emit(d, 0, "device_util_pct", util)
        emit(d, 0, "aicore_util_pct", util * 0.95)
        emit(d, 0, "vector_util_pct", util * 0.3)
        emit(d, 0, "mem_bw_util_pct", np.clip(util * 0.7 + rng.normal(0, 2, n_t), 0, 100))
        emit(d, 0, "mem_used_mb", 12_000 + 300 * step + rng.normal(0, 20, n_t))
        emit(d, 0, "mem_total_mb", np.full(n_t, 65_536.0))
        emit(d, 0, "temp_c", 42 + 0.3 * util + rng.normal(0, 0.5, n_t))
        emit(d, 0, "power_w", 90 + 2.1 * util + rng.normal(0, 3, n_t))
        emit(d, 0, "clock_mhz", np.full(n_t, 1800.0))
    base = n_devices
    emit(base, 1, "cpu_util_pct", np.clip(15 + 12 * step + rng.normal(0, 3, n_t), 0, 100))
    emit(base + 1, 1, "cpu_util_pct", np.clip(8 + 9 * step + rng.normal(0, 2, n_t), 0, 100))
    emit(base + 1, 1, "rss_mb", 350 + rng.normal(0, 2, n_t))
    emit(base + 2, 1, "cpu_util_pct", np.clip(20 + 15 * step + rng.normal(0, 3, n_t), 0, 400))
    emit(base + 2, 1, "rss_mb", SERVICE_RSS_MB + rng.normal(0, 3, n_t))
    queue = np.maximum(rng.poisson(np.array(STEP_BATCH_LAMBDA)[step]), 0).astype(float)
    emit(base + 3, 2, "queue_depth", queue)
    emit(base + 3, 2, "busy_frac", util_base / 100.0)
    codes = np.array([s[:3] for s in series], np.int32)  # a (device, source, metric) row per series
    device, source, metric = (np.repeat(codes[:, i], n_t) for i in range(3))
    return pa.table({
        "ts_unix_s": pa.array(np.tile(ts, len(series))),
        "host": _strings(["synthetic-host"], np.zeros(n_t * len(series), np.int32)),
        "source": _strings(["npu_smi", "psutil", "service"], source),
        "device": _strings(devices, device),
        "metric": _strings(metrics, metric),
        "value": pa.array(np.concatenate([values for *_, values in series])),
    }).cast(TELEMETRY_SCHEMA)  # fmt: skip


def _write_chunks(path: Path, schema: pa.Schema, chunks: Iterator[pa.Table]) -> None:
    """Chunk by chunk into one Parquet file: memory holds one chunk, whatever the run's size."""
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for chunk in chunks:
            writer.write_table(chunk, row_group_size=ROW_GROUP_ROWS)


def synthesize(
    out_dir: Path, n_requests: int = 1_000_000, n_devices: int = 16, hours: float = 1.0, seed: int = 0,
    start_unix_s: float = DEFAULT_START_UNIX_S, latency_scale: float = 1.0,
) -> RunFolder:  # fmt: skip
    """Write the run folder at out_dir. latency_scale < 1 models a faster candidate (more QPS, same users)."""
    if n_requests < 100 or n_devices < 1 or hours <= 0:
        raise ConfigError("synth needs --requests >= 100, --devices >= 1 and --hours > 0")
    rng = np.random.default_rng(seed)
    folder = RunFolder(out_dir).create()
    step_s = hours * 3600.0 / len(STEP_USERS)
    warmup_s = min(WARMUP_MAX_S, WARMUP_FRACTION * step_s)
    stages = [
        StageRecord(
            index=i, label=f"users={u}", users=u, start_unix_s=start_unix_s + i * step_s,
            end_unix_s=start_unix_s + (i + 1) * step_s, warmup_s=warmup_s,
        )
        for i, u in enumerate(STEP_USERS)
    ]  # fmt: skip
    n_total = int(round(n_requests / latency_scale))
    _write_chunks(folder.requests, REQUEST_SCHEMA, synth_request_chunks(rng, folder.run_id, stages, n_total))
    _write_chunks(folder.telemetry, TELEMETRY_SCHEMA, synth_telemetry_chunks(rng, stages, n_devices))
    steps = [{"label": s.label, "users": s.users, "duration_s": step_s, "warmup_s": warmup_s} for s in stages]
    slo = {"p99_ms": 300.0, "error_budget_pct": 0.1}
    scenario = Scenario.model_validate({"name": "synthetic-ramp", "kind": "ramp", "steps": steps, "slo": slo})
    manifest = new_manifest(
        folder.run_id, scenario, "http://127.0.0.1:8086", kind="synthetic", label="synthetic",
        service_info={
            "model": MODEL, "dimension": 384, "device": f"npu (x{n_devices}, synthetic)", "precision": "fp16",
            "config": {"batching": True, "max_batch_size": 32, "max_wait_ms": 5},
            "versions": {"torch": "synthetic"},
        },
        host=HostInfo(hostname="synthetic-host", cpu_model="synthetic", cpu_cores_logical=64, mem_total_mb=524288),
        versions={"embedperf": "synthetic"}, git={"commit": "0" * 40, "dirty": False}, stages=stages,
        start_unix_s=start_unix_s, end_unix_s=start_unix_s + hours * 3600.0,
        collectors=[CollectorStatus(name=name, status="ok") for name in ("npu_smi", "psutil", "service")],
        generator_cpu=GeneratorCpu(mean_pct=26.0, max_pct=45.0, p95_pct=40.0, saturated=False),
        complete=True, notes=["synthetic run written by `embedperf synth`; not a measurement"],
    )  # fmt: skip
    write_manifest(folder, manifest)
    return folder


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="embedperf synth", description=__doc__)
    parser.add_argument("out_dir", type=Path, help="run folder to write (created)")
    parser.add_argument("--requests", type=int, default=1_000_000, help="request rows (default 1,000,000)")
    parser.add_argument("--devices", type=int, default=16, help="npu devices in the telemetry (default 16)")
    parser.add_argument("--hours", type=float, default=1.0, help="run duration in hours (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    folder = synthesize(args.out_dir, args.requests, args.devices, args.hours, args.seed)
    print(folder.root)
    return 0
