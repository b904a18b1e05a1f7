"""Telemetry read with DuckDB: the rows the analysis uses, split by role and sorted, without pandas copies.

A 24 h run with 16 devices is 13M telemetry rows; pandas sorting and splitting them (what
TelemetryIndex does with a frame) holds three copies at once. Here DuckDB sorts (spilling if it must)
and hands over each role's frame once; gaps and sources are SQL aggregates.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from analysis.engine.views import table_files
from analysis.model.telemetry import ACCELERATOR_SOURCES, TelemetryIndex
from embedperf.schema import TELEMETRY_SCHEMA, RunFolder

TELEMETRY_ANALYSIS_COLUMNS: tuple[str, ...] = ("ts_unix_s", "host", "source", "device", "metric", "value")
_ACCELERATOR = "source IN ({})".format(", ".join(f"'{s}'" for s in sorted(ACCELERATOR_SOURCES)))


def telemetry_files(folder: RunFolder, work_dir: Path) -> list[Path]:
    """telemetry.parquet, plus the parts an interrupted run left, streamed into a Parquet beside it."""
    leftover = work_dir / "telemetry.parts.parquet"
    return table_files(folder.telemetry, folder.telemetry_parts, leftover, TELEMETRY_SCHEMA, ["ts_unix_s"])


def create_view(con: duckdb.DuckDBPyConnection, files: list[Path]) -> None:
    """`tel`: every telemetry row with a value (a value the device does not report is absent)."""
    columns = ", ".join(TELEMETRY_ANALYSIS_COLUMNS)
    paths = ", ".join(f"'{p}'" for p in files)
    con.register("telemetry_empty", TELEMETRY_SCHEMA.empty_table())
    source = f"read_parquet([{paths}], union_by_name = true)" if files else "telemetry_empty"
    con.execute(f"CREATE OR REPLACE VIEW tel AS SELECT {columns} FROM {source} WHERE value IS NOT NULL")


def _role_frame(con: duckdb.DuckDBPyConnection, where: str, labels: dict[str, list[str]]) -> pd.DataFrame:
    """One role's rows sorted by time, fetched a column at a time (stable order: the scan's, as pandas sorts).
    Labels arrive as category codes, never as strings; the peak is the time column, the sort order and
    the frame being filled, whatever DuckDB would need to sort 13M rows itself.
    """

    def column(expr: str) -> np.ndarray:
        return np.asarray(con.sql(f"SELECT {expr} AS c FROM tel WHERE {where}").fetchnumpy()["c"])

    ts = column("ts_unix_s").astype(np.float64)
    order = np.argsort(ts, kind="stable").astype(np.int32 if len(ts) < 2**31 else np.int64)
    data: dict[str, object] = {"ts_unix_s": ts[order]}
    del ts
    for name, values in labels.items():
        if not values:
            data[name] = pd.Categorical.from_codes(np.full(len(order), -1, np.int8), categories=[])
            continue
        cases = " ".join("WHEN '" + v.replace("'", "''") + f"' THEN {i}" for i, v in enumerate(values))
        code_type = "TINYINT" if len(values) < 127 else "SMALLINT"
        codes = column(f"CASE {name} {cases} ELSE -1 END::{code_type}")[order]
        data[name] = pd.Categorical.from_codes(codes, categories=values)
    data["value"] = column("value::DOUBLE")[order]
    del order
    return pd.DataFrame(data, copy=False)  # the arrays are this frame's alone


def telemetry_index(con: duckdb.DuckDBPyConnection) -> TelemetryIndex:
    """The TelemetryIndex of the `tel` view: accelerator and other rows, each sorted by time."""
    # the distinct values of each label column (a few dozen: hosts, sources, devices, metrics)
    names = [c for c in TELEMETRY_ANALYSIS_COLUMNS if c not in ("ts_unix_s", "value")]
    [row] = con.execute("SELECT " + ", ".join(f"list(DISTINCT {c})" for c in names) + " FROM tel").fetchall()
    labels = {c: sorted(str(v) for v in (values or [])) for c, values in zip(names, row, strict=True)}
    return TelemetryIndex(
        _role_frame(con, _ACCELERATOR, labels), _role_frame(con, f"NOT {_ACCELERATOR}", labels)
    )


def sources(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {str(s) for (s,) in con.execute("SELECT DISTINCT source FROM tel").fetchall()}


def telemetry_gaps(con: duckdb.DuckDBPyConnection, t0: float | None, t1: float | None) -> dict[str, int]:
    """The in-memory telemetry_gaps (tests/oracles/in_memory/figures.py): missing whole seconds per source within [t0, t1]."""
    if t0 is None or t1 is None or t1 <= t0:
        return {}
    lo, hi = float(np.floor(t0)), float(np.floor(t1))
    expected = int(hi - lo) + 1
    rows = con.execute(
        "SELECT source, count(DISTINCT floor(ts_unix_s)) FROM tel WHERE ts_unix_s >= ? AND ts_unix_s < ? "
        "GROUP BY source",
        [lo, hi + 1],
    ).fetchall()
    return {str(source): max(expected - int(present), 0) for source, present in rows}
