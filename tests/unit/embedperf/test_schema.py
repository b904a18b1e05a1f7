"""The run-folder contract: ids, manifest round trip, parts -> Parquet, torn rows, version checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from embedperf import schema
from embedperf.errors import RunFolderError
from embedperf.parts import PartsWriter


def test_run_id_format_and_uniqueness(tmp_path: Path) -> None:
    run_id = schema.make_run_id("ramp", "int8 / bs16", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert run_id == "20260102T030405Z-ramp-int8_bs16"
    assert schema.RUN_ID_RE.match(run_id)
    first = schema.new_run_folder(tmp_path, "smoke")
    second = schema.new_run_folder(tmp_path, "smoke")
    assert first.root != second.root and first.root.is_dir() and second.root.is_dir()


def test_manifest_round_trip_keeps_unknown_keys(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    manifest = schema.Manifest(
        run_id=folder.run_id,
        stages=[schema.StageRecord(index=0, label="u1", users=1, start_unix_s=10.0, end_unix_s=20.0)],
    )
    schema.write_manifest(folder, manifest)
    raw = json.loads(folder.manifest.read_text())
    raw["future_field"] = {"x": 1}
    folder.manifest.write_text(json.dumps(raw))
    back = schema.read_manifest(folder)
    assert back.stages[0].users == 1 and back.stages[0].end_unix_s == 20.0
    assert back.model_extra == {"future_field": {"x": 1}}


def test_manifest_from_newer_schema_is_refused(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    folder.manifest.write_text(json.dumps({"schema_version": schema.SCHEMA_VERSION + 1, "run_id": "x"}))
    with pytest.raises(RunFolderError, match="Upgrade embedperf"):
        schema.read_manifest(folder)


def test_open_run_folder_explains_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="not a directory"):
        schema.open_run_folder(tmp_path / "missing")
    with pytest.raises(RunFolderError, match="no manifest.json"):
        schema.open_run_folder(tmp_path)
    with pytest.raises(RunFolderError, match="no run folders"):
        schema.latest_run_folder(tmp_path)


def test_parts_compact_to_parquet_with_nulls_and_quoting(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    with PartsWriter(folder.requests_parts, schema.REQUEST_SCHEMA, "w0") as writer:
        for i in range(5):
            row = schema.empty_request_row()
            row.update(
                run_id="r",
                worker="w0",
                stage_index=i,
                latency_ms=float(i),
                ok=i % 2 == 0,
                status_code=200,
                error='bad "quote", comma\nnewline' if i == 1 else None,
            )
            writer.write(row)
    rows = schema.compact_parts(folder.requests_parts, folder.requests, schema.REQUEST_SCHEMA)
    assert rows == 5
    assert not folder.requests_parts.exists()
    frame = schema.read_requests_table(folder).to_pandas()
    assert list(frame["latency_ms"]) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert list(frame["ok"]) == [True, False, True, False, True]
    assert frame["error"][1] == 'bad "quote", comma\nnewline'
    assert frame["srv_total_ms"].isna().all()  # absent, never 0


def test_torn_last_row_is_dropped_not_fatal(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    writer = PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "psutil")
    writer.write([1.0, "h", "psutil", "cpu", "cpu_util_pct", 12.5])
    writer.close()
    with open(writer.path, "a") as fh:
        fh.write("2.0,h,psutil,cpu,cpu_ut")  # crash mid-row
    table = schema.read_telemetry_table(folder)
    assert table.num_rows == 1
    assert table.column("value").to_pylist() == [12.5]


def test_reader_merges_parquet_and_leftover_parts(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "a") as w:
        w.write([1.0, "h", "psutil", "cpu", "cpu_util_pct", 1.0])
    schema.compact_parts(folder.telemetry_parts, folder.telemetry, schema.TELEMETRY_SCHEMA)
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "b") as w:
        w.write([2.0, "h", "psutil", "cpu", "cpu_util_pct", 2.0])
    assert schema.read_telemetry_table(folder).column("value").to_pylist() == [1.0, 2.0]
