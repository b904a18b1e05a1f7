"""Read a run folder into pandas frames holding only the columns the analysis needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from embedperf.schema import (
    Manifest,
    RunFolder,
    read_manifest,
    read_requests_table,
    read_telemetry_table,
)

REQUEST_ANALYSIS_COLUMNS: tuple[str, ...] = (
    "stage_index",
    "t_intended_unix_s",
    "t_sent_unix_s",
    "t_done_unix_s",
    "latency_ms",
    "latency_from_intended_ms",
    "endpoint",
    "status_code",
    "ok",
    "error",
    "srv_queue_ms",
    "srv_tokenize_ms",
    "srv_compute_ms",
    "srv_post_ms",
    "srv_total_ms",
    "batch_size",
    "n_inputs",
    "input_tokens",
    "documents",
    "probe_cosine",
    "worker",
    "request_id",
    "served_model",
)
TELEMETRY_ANALYSIS_COLUMNS: tuple[str, ...] = ("ts_unix_s", "host", "source", "device", "metric", "value")

_STRING_COLUMNS = frozenset(
    {"endpoint", "error", "host", "source", "device", "metric", "worker", "served_model"}
)


@dataclass(frozen=True)
class RunData:
    """One run folder in memory: manifest, request rows and telemetry rows (long format)."""

    folder: RunFolder
    manifest: Manifest
    requests: pd.DataFrame
    telemetry: pd.DataFrame


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Strings become categoricals (1M rows of repeated labels stay small); nullable ints become float."""
    columns: dict[str, object] = {}
    for name in table.column_names:
        column = table.column(name)
        if name in _STRING_COLUMNS:
            encoded = column if pa.types.is_dictionary(column.type) else column.dictionary_encode()
            columns[name] = encoded.to_pandas()
        elif name == "ok":
            columns[name] = column.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        elif pa.types.is_integer(column.type):
            columns[name] = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
        else:
            columns[name] = column.to_numpy(zero_copy_only=False)
    return pd.DataFrame(columns)


def load_requests(folder: RunFolder) -> pd.DataFrame:
    return to_frame(read_requests_table(folder, REQUEST_ANALYSIS_COLUMNS))


def load_telemetry(folder: RunFolder) -> pd.DataFrame:
    table = read_telemetry_table(folder, TELEMETRY_ANALYSIS_COLUMNS)
    table = table.filter(pc.invert(pc.is_null(table.column("value"))))
    frame = to_frame(table)
    frame["value"] = frame["value"].astype(np.float64)
    return frame


def load_run(folder: RunFolder) -> RunData:
    return RunData(
        folder=folder,
        manifest=read_manifest(folder),
        requests=load_requests(folder),
        telemetry=load_telemetry(folder),
    )
