"""The run folder: the one contract every stage (load, collectors, analysis, reports) reads and writes.

Writers and readers import this package; nothing else knows file names or column sets. Its parts:
request_row (the typed request record and its Arrow schema), tables (telemetry row schema, canonical
metrics, Parquet compaction), manifest (the typed manifest.json), upgrade (reading version-1
manifests), folder (run ids, paths, reading and writing).
"""

from embedperf.schema.folder import (
    RUN_ID_RE,
    RunFolder,
    latest_run_folder,
    make_run_id,
    new_run_folder,
    open_run_folder,
    read_manifest,
    read_requests_table,
    read_telemetry_table,
    resolve_run_folder,
    write_manifest,
    write_requests_parquet,
    write_telemetry_parquet,
)
from embedperf.schema.manifest import (
    AgentRecord,
    CollectorStatus,
    GeneratorCpu,
    GeneratorWorker,
    HostInfo,
    Manifest,
    ServiceInfo,
    ServingDevices,
    ServingRule,
    StageRecord,
    StepEnding,
    new_manifest,
)
from embedperf.schema.request_row import RequestRow
from embedperf.schema.tables import (
    BATCH_SIZE_HEADER,
    BATCH_TOKENS_HEADER,
    CANONICAL_METRICS,
    REQUEST_COLUMNS,
    REQUEST_ID_HEADER,
    REQUEST_SCHEMA,
    REQUEST_SORT_KEYS,
    SCHEMA_VERSION,
    SERVED_MODEL_HEADER,
    SERVER_TIMING_COLUMNS,
    TELEMETRY_COLUMNS,
    TELEMETRY_SCHEMA,
    TelemetrySample,
    compact_parts,
    empty_request_row,
)

__all__ = [
    "RequestRow", "SCHEMA_VERSION", "REQUEST_SCHEMA", "REQUEST_COLUMNS", "SERVER_TIMING_COLUMNS",
    "BATCH_SIZE_HEADER", "BATCH_TOKENS_HEADER", "REQUEST_ID_HEADER", "SERVED_MODEL_HEADER",
    "TELEMETRY_SCHEMA", "TELEMETRY_COLUMNS", "CANONICAL_METRICS", "TelemetrySample", "REQUEST_SORT_KEYS",
    "compact_parts", "empty_request_row", "StageRecord", "StepEnding", "CollectorStatus", "GeneratorCpu",
    "GeneratorWorker", "HostInfo", "ServiceInfo", "ServingRule", "ServingDevices", "AgentRecord",
    "Manifest", "new_manifest", "RUN_ID_RE", "make_run_id", "RunFolder", "new_run_folder",
    "open_run_folder", "latest_run_folder", "resolve_run_folder", "write_manifest", "read_manifest",
    "read_requests_table", "read_telemetry_table", "write_requests_parquet", "write_telemetry_parquet",
]  # fmt: skip
