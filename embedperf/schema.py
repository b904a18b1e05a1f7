"""The run folder: the one contract every stage (load, collectors, analysis, reports) reads and writes.

Writers and readers both import this module; nothing else knows file names or column sets.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from embedperf.errors import RunFolderError

SCHEMA_VERSION = 1

# --------------------------------------------------------------------------------------------
# Request rows: one per request, kept raw; durations are derived in analysis/.
# --------------------------------------------------------------------------------------------
REQUEST_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("worker", pa.string()),
        ("stage_index", pa.int32()),
        ("stage_label", pa.string()),
        ("target_users", pa.int32()),
        ("target_rate", pa.float64()),
        ("t_intended_unix_s", pa.float64()),
        ("t_sent_unix_s", pa.float64()),
        ("t_done_unix_s", pa.float64()),
        ("latency_ms", pa.float64()),
        ("latency_from_intended_ms", pa.float64()),
        ("endpoint", pa.string()),
        ("status_code", pa.int32()),
        ("ok", pa.bool_()),
        ("error", pa.string()),
        ("n_inputs", pa.int32()),
        ("input_chars", pa.int64()),
        ("input_tokens", pa.int64()),
        ("response_bytes", pa.int64()),
        ("srv_queue_ms", pa.float64()),
        ("srv_tokenize_ms", pa.float64()),
        ("srv_compute_ms", pa.float64()),
        ("srv_post_ms", pa.float64()),
        ("srv_total_ms", pa.float64()),
        ("batch_size", pa.int32()),
        ("batch_tokens", pa.int64()),
    ]
)
REQUEST_COLUMNS: tuple[str, ...] = tuple(REQUEST_SCHEMA.names)

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

# --------------------------------------------------------------------------------------------
# Telemetry rows: long format, one row per sample.
# --------------------------------------------------------------------------------------------
TELEMETRY_SCHEMA = pa.schema(
    [
        ("ts_unix_s", pa.float64()),
        ("host", pa.string()),
        ("source", pa.string()),
        ("device", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)
TELEMETRY_COLUMNS: tuple[str, ...] = tuple(TELEMETRY_SCHEMA.names)

TelemetrySource = Literal["npu_smi", "nvml", "psutil", "service", "prometheus"]
TELEMETRY_SOURCES: tuple[str, ...] = ("npu_smi", "nvml", "psutil", "service", "prometheus")

# Canonical metric names, unit in the name. A value a device does not report is absent, never 0.
CANONICAL_METRICS: frozenset[str] = frozenset(
    {
        "device_util_pct",
        "aicore_util_pct",
        "vector_util_pct",
        "aicpu_util_pct",
        "ctrlcpu_util_pct",
        "mem_bw_util_pct",
        "mem_util_pct",
        "mem_used_mb",
        "mem_total_mb",
        "temp_c",
        "power_w",
        "clock_mhz",
        "cpu_util_pct",
        "rss_mb",
        "queue_depth",
        "busy_frac",
        "request_rate_qps",
        "batch_size_mean",
        "tokens_per_s",
        "cache_hit_ratio",
    }
)


@dataclass(frozen=True, slots=True)
class TelemetrySample:
    """One telemetry row; collectors produce these, `TelemetryWriter` stores them."""

    ts_unix_s: float
    host: str
    source: str
    device: str
    metric: str
    value: float


# --------------------------------------------------------------------------------------------
# Manifest
# --------------------------------------------------------------------------------------------
class StageRecord(BaseModel):
    """Real boundaries of one load stage, as it happened (not as planned)."""

    model_config = ConfigDict(extra="forbid")

    index: int
    label: str
    users: int | None = None
    rate: float | None = None
    start_unix_s: float
    end_unix_s: float | None = None
    warmup_s: float = Field(0.0, description="Seconds at the start of the stage the analysis trims.")


class CollectorStatus(BaseModel):
    """Outcome of one telemetry source during the run."""

    model_config = ConfigDict(extra="forbid")

    name: str
    status: Literal["ok", "skipped", "failed", "partial"]
    reason: str = ""
    samples: int = 0
    events: list[dict[str, Any]] = Field(default_factory=list)


class GeneratorCpu(BaseModel):
    """The load generator's own CPU: on a shared host it competes with the service."""

    model_config = ConfigDict(extra="forbid")

    mean_pct: float | None = None
    max_pct: float | None = None
    p95_pct: float | None = None
    saturated: bool = False
    threshold_pct: float = 90.0
    note: str = ""


class Manifest(BaseModel):
    """manifest.json. Unknown keys are kept (extra="allow") so older readers tolerate newer writers."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: Literal["closed_loop", "open_loop", "synthetic"] = "closed_loop"
    scenario: dict[str, Any] = Field(default_factory=dict)
    target_url: str = ""
    label: str = ""
    service_info: dict[str, Any] | None = None
    host: dict[str, Any] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    git: dict[str, Any] = Field(default_factory=dict)
    start_unix_s: float | None = None
    end_unix_s: float | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    collectors: list[CollectorStatus] = Field(default_factory=list)
    generator_cpu: GeneratorCpu = Field(default_factory=GeneratorCpu)
    slo: dict[str, Any] = Field(default_factory=dict)
    complete: bool = Field(False, description="False while running or after a crash.")
    notes: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_.-]+$")


def make_run_id(scenario: str, label: str = "", now: datetime | None = None) -> str:
    """`<UTC yyyymmddThhmmssZ>-<scenario>[-<label>]`, safe as a folder name."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parts = [stamp, _slug(scenario)]
    if label:
        parts.append(_slug(label))
    return "-".join(parts)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_")
    return slug or "run"


@dataclass(frozen=True)
class RunFolder:
    """Paths inside one run folder. Construct with the folder; nothing is created until asked."""

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def requests(self) -> Path:
        return self.root / "requests.parquet"

    @property
    def requests_parts(self) -> Path:
        """Incremental CSV parts, one file per writer; compacted into requests.parquet at the end."""
        return self.root / "requests.parts"

    @property
    def telemetry(self) -> Path:
        return self.root / "telemetry.parquet"

    @property
    def telemetry_parts(self) -> Path:
        return self.root / "telemetry.parts"

    @property
    def collectors_status(self) -> Path:
        """Written by `python -m collectors`; merged into the manifest by the load run."""
        return self.root / "collectors.json"

    @property
    def precision(self) -> Path:
        """Precision check of the configuration the run measured (embedperf precision / matrix)."""
        return self.root / "precision.json"

    @property
    def locust(self) -> Path:
        return self.root / "locust"

    @property
    def analysis(self) -> Path:
        return self.root / "analysis"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def create(self) -> RunFolder:
        self.root.mkdir(parents=True, exist_ok=True)
        return self


def new_run_folder(runs_dir: Path, scenario: str, label: str = "") -> RunFolder:
    """A fresh, uniquely named folder under runs_dir (a suffix is added if the second is taken)."""
    base = make_run_id(scenario, label)
    root = runs_dir / base
    n = 1
    while root.exists():
        n += 1
        root = runs_dir / f"{base}-{n}"
    return RunFolder(root).create()


def open_run_folder(path: str | os.PathLike[str]) -> RunFolder:
    """A run folder that must already exist and hold a manifest."""
    folder = RunFolder(Path(path))
    if not folder.root.is_dir():
        raise RunFolderError(f"{folder.root} is not a directory; pass a run folder such as runs/<run_id>")
    if not folder.manifest.is_file():
        raise RunFolderError(
            f"{folder.root} has no manifest.json; it is not a run folder (or the run never started)"
        )
    return folder


def latest_run_folder(runs_dir: Path) -> RunFolder:
    """The newest run folder under runs_dir (by name, which starts with the UTC start time)."""
    candidates = sorted(p for p in runs_dir.glob("*") if (p / "manifest.json").is_file())
    if not candidates:
        raise RunFolderError(f"no run folders under {runs_dir}; run `make bench` or a locustfile first")
    return RunFolder(candidates[-1])


def resolve_run_folder(run_dir: Path | None, latest: bool, runs_dir: Path) -> RunFolder:
    """RUN_DIR, or the newest run under runs_dir with --latest (the choice every per-run command offers)."""
    if latest:
        return latest_run_folder(runs_dir)
    if run_dir is None:
        raise RunFolderError("pass a run folder (RUN_DIR) or --latest [--runs-dir DIR]")
    return open_run_folder(run_dir)


# --------------------------------------------------------------------------------------------
# Manifest I/O
# --------------------------------------------------------------------------------------------
def write_manifest(folder: RunFolder, manifest: Manifest) -> None:
    """Atomic write (tmp + rename) so a reader never sees half a manifest."""
    tmp = folder.manifest.with_suffix(".json.tmp")
    tmp.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    os.replace(tmp, folder.manifest)


def read_manifest(folder: RunFolder) -> Manifest:
    try:
        raw = json.loads(folder.manifest.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RunFolderError(f"{folder.manifest} is missing") from exc
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{folder.manifest} is not valid JSON: {exc}") from exc
    version = raw.get("schema_version")
    if version is None or int(version) > SCHEMA_VERSION:
        raise RunFolderError(
            f"{folder.manifest} has schema_version {version!r}; this embedperf reads up to "
            f"{SCHEMA_VERSION}. Upgrade embedperf to read it."
        )
    return Manifest.model_validate(raw)


# --------------------------------------------------------------------------------------------
# Row tables: incremental CSV parts -> one Parquet file
# --------------------------------------------------------------------------------------------
def _csv_convert_options(schema: pa.Schema) -> pacsv.ConvertOptions:
    return pacsv.ConvertOptions(
        column_types={f.name: f.type for f in schema},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        true_values=["true", "True", "1"],
        false_values=["false", "False", "0"],
    )


def read_csv_parts(parts_dir: Path, schema: pa.Schema) -> pa.Table:
    """Read every *.csv part; a torn last line (crash mid-write) is dropped, not fatal."""
    tables = []
    for part in sorted(parts_dir.glob("*.csv")):
        tables.append(_read_one_part(part, schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def _read_one_part(part: Path, schema: pa.Schema) -> pa.Table:
    data = part.read_bytes()
    if not data.strip():
        return schema.empty_table()
    if not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]  # torn final row
    try:
        return pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=None),
            convert_options=_csv_convert_options(schema),
        ).select(schema.names)
    except (pa.ArrowInvalid, KeyError) as exc:
        raise RunFolderError(f"{part} is not a valid parts file: {exc}") from exc


def compact_parts(parts_dir: Path, target: Path, schema: pa.Schema) -> int:
    """Merge parts (and an existing target) into target Parquet, then delete the parts. Returns rows."""
    tables = []
    if target.is_file():
        tables.append(pq.read_table(target, schema=schema))
    if parts_dir.is_dir():
        tables.append(read_csv_parts(parts_dir, schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    tmp = target.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, target)
    if parts_dir.is_dir():
        for part in parts_dir.glob("*.csv"):
            part.unlink()
        parts_dir.rmdir()
    return table.num_rows


def _read_table(parquet: Path, parts_dir: Path, schema: pa.Schema, columns: Iterable[str] | None) -> pa.Table:
    tables = []
    if parquet.is_file():
        tables.append(pq.read_table(parquet, schema=schema))
    if parts_dir.is_dir():
        tables.append(read_csv_parts(parts_dir, schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.select(list(columns)) if columns is not None else table


def read_requests_table(folder: RunFolder, columns: Iterable[str] | None = None) -> pa.Table:
    """All request rows: the compacted Parquet plus any parts left by an interrupted run."""
    return _read_table(folder.requests, folder.requests_parts, REQUEST_SCHEMA, columns)


def read_telemetry_table(folder: RunFolder, columns: Iterable[str] | None = None) -> pa.Table:
    return _read_table(folder.telemetry, folder.telemetry_parts, TELEMETRY_SCHEMA, columns)


def write_requests_parquet(folder: RunFolder, table: pa.Table) -> None:
    """Write a complete requests table directly (synthetic runs, tests)."""
    pq.write_table(table.cast(REQUEST_SCHEMA), folder.requests, compression="zstd")


def write_telemetry_parquet(folder: RunFolder, table: pa.Table) -> None:
    pq.write_table(table.cast(TELEMETRY_SCHEMA), folder.telemetry, compression="zstd")


def empty_request_row() -> dict[str, Any]:
    """A row with every column present and None; writers fill what they know."""
    return dict.fromkeys(REQUEST_COLUMNS)
