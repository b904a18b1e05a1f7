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
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from embedperf.errors import RunFolderError
from embedperf.parts import finalise_parts, iter_part_batches, remove_parts
from scenarios.models import SCENARIO_KINDS, Health, Scenario, Slo, Target

# Bumped when an older reader could not read a new folder. Adding a nullable request column is not
# such a change: readers fill a column an older folder lacks with nulls (Parquet files, Arrow and
# CSV parts alike), and an older reader leaves a column it does not know unread.
SCHEMA_VERSION = 2

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
        # quality probes (payload.quality_probes): cosine of the answer to the stored fp32 reference
        ("probe_cosine", pa.float64()),
        # the X-Request-ID embedperf sent (null: never sent), so the service's log line can be found
        ("request_id", pa.string()),
        # the X-Served-Model the answer named (null: the target does not send it), e.g. a fallback model
        ("served_model", pa.string()),
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
REQUEST_ID_HEADER = "X-Request-ID"  # sent with every request; the service echoes it and logs it
SERVED_MODEL_HEADER = "X-Served-Model"  # the model that produced an answer's vectors (main or fallback)

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


class GeneratorWorker(BaseModel):
    """One worker of a distributed load generator, as the master saw it (loadgen.lifecycle.worker_book)."""

    model_config = ConfigDict(extra="forbid")

    worker: str = Field(description="The worker's name in the request rows' `worker` column.")
    rows: int = Field(0, description="Request rows it forwarded.")
    first_seen_unix_s: float | None = None
    last_seen_unix_s: float | None = None
    final_rows: bool = Field(False, description="It sent its last rows when the run ended.")
    missing_s: float = Field(0.0, description="Seconds of the run's stages it was missing (no batch for 3 s).")
    missing: list[tuple[float, float]] = Field(
        default_factory=list, description="[from, to] unix seconds of each silence (to: when it came back or the end)."
    )


class HostInfo(BaseModel):
    """The machine that generated the load; comparisons warn when it differs between runs."""

    model_config = ConfigDict(extra="forbid")

    hostname: str = ""
    os: str = ""
    machine: str = ""
    cpu_model: str = ""
    cpu_cores_logical: int | None = None
    cpu_cores_physical: int | None = None
    mem_total_mb: int | None = None
    accelerators: list[str] = Field(default_factory=list, description="Visible accelerator tools.")


class ServiceDevice(BaseModel):
    """One device the target runs inference on, as its /info lists it."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["npu", "cuda", "cpu"]
    index: int = 0
    name: str = ""


class ServiceInfo(BaseModel):
    """The target's /info: the fields embedperf reads are typed, anything else a target says is kept."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    dimension: int | None = None
    device: str | None = None
    precision: str | None = None
    config: dict[str, Any] | None = None
    devices: list[ServiceDevice] = Field(default_factory=list)
    fallback_model: str | None = Field(
        default=None,
        description="The lighter model the target degrades to under load; answers it produced name it.",
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _known_devices(cls, value: object) -> object:
        """Any target may answer /info: entries embedperf cannot read are left out, never fatal."""
        if not isinstance(value, list):
            return []
        return [d for d in value if isinstance(d, dict) and d.get("kind") in ("npu", "cuda", "cpu")]

    @field_validator("fallback_model", mode="before")
    @classmethod
    def _model_id(cls, value: object) -> object:
        """A fallback named other than by a string id cannot match an answer's header: treated as none."""
        return value if isinstance(value, str) and value else None

    def accelerator_indices(self) -> list[int]:
        return sorted({d.index for d in self.devices if d.kind in ("npu", "cuda")})


ServingRule = Literal["explicit", "service_info", "busy", "none"]


class ServingDevices(BaseModel):
    """Which accelerator indices serve the target and by which rule (explicit > /info > busy under load)."""

    model_config = ConfigDict(extra="forbid")

    rule: ServingRule = "none"
    indices: list[int] = Field(
        default_factory=list, description="NPU/GPU indices as npu-smi / NVML number them."
    )


class AgentRecord(BaseModel):
    """One `embedperf agent` the run pulled telemetry from, with the clock offset to it."""

    model_config = ConfigDict(extra="forbid")

    url: str
    host: str = ""
    status: Literal["ok", "partial", "failed"] = "ok"
    reason: str = ""
    samples: int = 0
    offset_s: float | None = Field(
        None, description="Agent clock minus generator clock (mean of start and end estimates)."
    )
    offset_uncertainty_s: float | None = Field(
        None, description="Half the round trip of the best probe, plus the drift between start and end."
    )
    missing_s: list[int] = Field(
        default_factory=list, description="Whole seconds of the run (unix, generator clock) without samples."
    )


def _v1_scenario(raw: dict[str, Any], stages: list[Any], kind: str | None) -> dict[str, Any]:
    """A version-1 scenario that does not validate (hand-built, synthetic) rebuilt from its name and stages."""
    try:
        return Scenario.model_validate(raw).model_dump(mode="json")
    except ValidationError:
        pass
    scenario_kind = raw.get("kind") if raw.get("kind") in SCENARIO_KINDS else None
    if scenario_kind is None:
        scenario_kind = "openloop" if kind == "open_loop" else "ramp"
    steps = []
    for stage in stages:
        st = dict(stage) if isinstance(stage, dict) else stage.model_dump()
        end = st.get("end_unix_s")
        duration_s = max(float(end) - float(st["start_unix_s"]), 1.0) if end is not None else 1.0
        step: dict[str, Any] = {"label": st.get("label", ""), "duration_s": duration_s}
        step["warmup_s"] = min(float(st.get("warmup_s") or 0.0), duration_s / 2)
        if scenario_kind == "openloop":
            step["rate"] = st.get("rate") or 1.0
        else:
            step["users"] = st.get("users") or 1
        steps.append(step)
    if not steps:
        steps = [
            {"duration_s": 1.0, "rate": 1.0}
            if scenario_kind == "openloop"
            else {"duration_s": 1.0, "users": 1}
        ]
    return {"name": str(raw.get("name") or "unknown"), "kind": scenario_kind, "steps": steps}


_V1_HEALTH_KEYS: dict[str, tuple[str, float]] = {
    "temp_max_c": ("max_device_temp_c", 1.0),
    "mem_max_pct": ("max_device_mem_pct", 1.0),
    "error_rate_max": ("max_error_rate_pct", 100.0),
    "mean_latency_max_ms": ("max_mean_latency_ms", 1.0),
}
_V1_HOST_KEYS: dict[str, tuple[str, float]] = {
    "cpu": ("cpu_model", 1.0),
    "cores": ("cpu_cores_logical", 1.0),
    "memory_gb": ("mem_total_mb", 1024.0),
}


def _renamed(
    raw: dict[str, Any], renames: dict[str, tuple[str, float]], model: type[BaseModel]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in renames:
            new_key, factor = renames[key]
            out.setdefault(
                new_key, value * factor if isinstance(value, int | float) and factor != 1.0 else value
            )
        elif key in model.model_fields:
            out[key] = value
    return out


def upgrade_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """Version-1 manifest -> version 2: typed scenario/slo/health/host/target, the reader-side names mapped."""
    data = dict(raw)
    scenario_raw: dict[str, Any] = data["scenario"] if isinstance(data.get("scenario"), dict) else {}
    scenario = _v1_scenario(scenario_raw, list(data.get("stages") or []), data.get("kind"))
    slo = dict(data.get("slo") or scenario.get("slo") or {})
    if "error_budget" in slo:  # v1 readers' name: a fraction, not a percentage
        slo.setdefault("error_budget_pct", float(slo.pop("error_budget")) * 100.0)
    health = data.get("health") or scenario.get("health") or {}
    scenario["slo"] = {k: v for k, v in slo.items() if k in Slo.model_fields}
    scenario["health"] = _renamed(dict(health), _V1_HEALTH_KEYS, Health)
    data["scenario"] = scenario
    data["slo"], data["health"] = scenario["slo"], scenario["health"]
    data["host"] = _renamed(dict(data.get("host") or {}), _V1_HOST_KEYS, HostInfo)
    data["schema_version"] = SCHEMA_VERSION
    return data


class Manifest(BaseModel):
    """manifest.json. Unknown keys are kept (extra="allow") so older readers tolerate newer writers.

    scenario, target, slo, health, host and service_info are the typed models the writer used, so a
    reader gets back exactly what was written. Build new manifests with `new_manifest`.
    """

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    kind: Literal["closed_loop", "open_loop", "synthetic"] = "closed_loop"
    scenario: Scenario
    target: Target = Field(description="The scenario's target with base_url the host actually loaded.")
    target_url: str = ""
    label: str = ""
    service_info: ServiceInfo | None = None
    host: HostInfo = Field(default_factory=HostInfo)
    versions: dict[str, str] = Field(default_factory=dict)
    git: dict[str, Any] = Field(default_factory=dict)
    start_unix_s: float | None = None
    end_unix_s: float | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    collectors: list[CollectorStatus] = Field(default_factory=list)
    generator_cpu: GeneratorCpu = Field(default_factory=GeneratorCpu)
    slo: Slo
    health: Health
    serving_devices: ServingDevices = Field(default_factory=ServingDevices)
    agents: list[AgentRecord] = Field(default_factory=list)
    complete: bool = Field(False, description="False while running or after a crash.")
    notes: list[str] = Field(default_factory=list)
    workers: list[GeneratorWorker] = Field(
        default_factory=list, description="Distributed runs: every load-generator worker, its rows and missing time."
    )

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if int(data.get("schema_version", SCHEMA_VERSION)) < 2:
            data = upgrade_v1(data)
        if (
            isinstance(data.get("scenario"), dict | Scenario)
            and not {"target", "slo", "health"} <= data.keys()
        ):
            scenario = Scenario.model_validate(data["scenario"])
            data = {"slo": scenario.slo, "health": scenario.health, **data}
        if "target" not in data and isinstance(data.get("scenario"), dict | Scenario):
            scenario = Scenario.model_validate(data["scenario"])
            base_url, path = _split_target_url(str(data.get("target_url") or ""), scenario.target)
            data = {**data, "target": scenario.target.model_copy(update={"base_url": base_url, "path": path})}
        return data


def _split_target_url(url: str, target: Target) -> tuple[str, str]:
    if not url:
        return target.base_url, target.path
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}", parts.path or target.path


def new_manifest(
    run_id: str,
    scenario: Scenario,
    base_url: str,
    *,
    service_info: dict[str, Any] | ServiceInfo | None = None,
    host: HostInfo | None = None,
    serving_devices: ServingDevices | None = None,
    **fields: Any,
) -> Manifest:
    """The writer's one way to start a manifest: slo, health and target come from the scenario itself."""
    base = base_url.rstrip("/")
    info = ServiceInfo.model_validate(service_info) if isinstance(service_info, dict) else service_info
    return Manifest(
        run_id=run_id,
        kind=fields.pop("kind", "open_loop" if scenario.is_open_loop else "closed_loop"),
        scenario=scenario,
        target=scenario.target.model_copy(update={"base_url": base}),
        target_url=base + scenario.target.path,
        service_info=info,
        host=host or HostInfo(),
        slo=scenario.slo,
        health=scenario.health,
        serving_devices=serving_devices or ServingDevices(),
        **fields,
    )


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
        """Incremental Arrow stream parts, one file per writer; compacted into requests.parquet at the end."""
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
    def agents_status(self) -> Path:
        """Written by the collectors' agent pulls (clock offsets, missing seconds); merged into the manifest."""
        return self.root / "agents.json"

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
# Row tables: incremental Arrow parts -> one Parquet file, sorted so a step or a window reads alone
# --------------------------------------------------------------------------------------------
REQUEST_SORT_KEYS: tuple[str, ...] = ("stage_index", "t_sent_unix_s")
TELEMETRY_SORT_KEYS: tuple[str, ...] = ("ts_unix_s",)


def _sort_keys(schema: pa.Schema) -> tuple[str, ...]:
    return REQUEST_SORT_KEYS if schema.equals(REQUEST_SCHEMA) else TELEMETRY_SORT_KEYS


def read_parts(parts_dir: Path, schema: pa.Schema) -> pa.Table:
    """Every complete row of every part (Arrow streams, or CSV parts of older runs)."""
    batches = list(iter_part_batches(parts_dir, schema))
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def compact_parts(parts_dir: Path, target: Path, schema: pa.Schema) -> int:
    """Stream parts (and an existing target) into target Parquet, sorted; then delete the parts. Returns rows.

    Memory stays bounded by one batch plus the sort's spill budget, whatever the run's length.
    """
    rows = finalise_parts(parts_dir, target, schema, _sort_keys(schema))
    remove_parts(parts_dir)
    return rows


def _read_table(parquet: Path, parts_dir: Path, schema: pa.Schema, columns: Iterable[str] | None) -> pa.Table:
    tables = []
    if parquet.is_file():
        tables.append(pq.read_table(parquet, schema=schema))
    if parts_dir.is_dir():
        tables.append(read_parts(parts_dir, schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.select(list(columns)) if columns is not None else table


def read_requests_table(folder: RunFolder, columns: Iterable[str] | None = None) -> pa.Table:
    """All request rows in memory (small runs, tests): the Parquet plus parts left by an interrupted run."""
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
