"""The row tables of a run folder: request and telemetry schemas, canonical metrics, Parquet compaction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa

from embedperf.parts import finalise_parts, iter_part_batches, remove_parts
from embedperf.schema.request_row import REQUEST_COLUMNS, REQUEST_SCHEMA

# Bumped when an older reader could not read a new folder. Adding a nullable request column is not
# such a change: readers fill a column an older folder lacks with nulls (Parquet files, Arrow and
# CSV parts alike), and an older reader leaves a column it does not know unread.
SCHEMA_VERSION = 2

# Request rows (one per request, kept raw; the record and its schema live in request_row):
# Server-Timing metric name -> request column.
SERVER_TIMING_COLUMNS: Mapping[str, str] = {
    "queue": "srv_queue_ms",
    "tokenize": "srv_tokenize_ms",
    "compute": "srv_compute_ms",
    "post": "srv_post_ms",
    "total": "srv_total_ms",
}
BATCH_SIZE_HEADER = "X-Batch-Size"
BATCH_TOKENS_HEADER = "X-Batch-Tokens"
REQUEST_ID_HEADER = "X-Request-ID"  # sent with every request; the service echoes it and logs it
SERVED_MODEL_HEADER = "X-Served-Model"  # the model that produced an answer's vectors (main or fallback)

# Canonical metric names, unit in the name. A value a device does not report is absent, never 0.
CANONICAL_METRICS: frozenset[str] = frozenset({
    "device_util_pct", "aicore_util_pct", "vector_util_pct", "aicpu_util_pct", "ctrlcpu_util_pct",
    "mem_bw_util_pct", "mem_util_pct", "mem_used_mb", "mem_total_mb", "temp_c", "power_w", "clock_mhz",
    "cpu_util_pct", "rss_mb", "queue_depth", "busy_frac", "request_rate_qps", "batch_size_mean",
    "tokens_per_s", "cache_hit_ratio",
})  # fmt: skip


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """One telemetry row (long format, one row per sample); collectors produce these, `TelemetryWriter`
    stores them, and TELEMETRY_SCHEMA is derived from its fields."""

    ts_unix_s: float
    host: str
    source: str  # npu_smi | nvml | psutil | service | prometheus
    device: str
    metric: str
    value: float


_ARROW_TYPES: Mapping[str, pa.DataType] = {"float": pa.float64(), "str": pa.string()}
TELEMETRY_SCHEMA = pa.schema([(f.name, _ARROW_TYPES[str(f.type)]) for f in fields(TelemetrySample)])
TELEMETRY_COLUMNS: tuple[str, ...] = tuple(TELEMETRY_SCHEMA.names)

# Row tables: incremental Arrow parts -> one Parquet file, sorted so a step or a window reads alone
REQUEST_SORT_KEYS: tuple[str, ...] = ("stage_index", "t_sent_unix_s")
TELEMETRY_SORT_KEYS: tuple[str, ...] = ("ts_unix_s",)


def read_parts(parts_dir: Path, schema: pa.Schema) -> pa.Table:
    """Every complete row of every part (Arrow streams, or CSV parts of older runs)."""
    batches = list(iter_part_batches(parts_dir, schema))
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def compact_parts(parts_dir: Path, target: Path, schema: pa.Schema) -> int:
    """Stream parts (and an existing target) into target Parquet, sorted; then delete the parts. Returns rows.
    Memory stays bounded by one batch plus the sort's spill budget, whatever the run's length."""
    sort_keys = REQUEST_SORT_KEYS if schema.equals(REQUEST_SCHEMA) else TELEMETRY_SORT_KEYS
    rows = finalise_parts(parts_dir, target, schema, sort_keys)
    remove_parts(parts_dir)
    return rows


def empty_request_row() -> dict[str, Any]:
    """A row with every column present and None; writers fill what they know."""
    return dict.fromkeys(REQUEST_COLUMNS)
