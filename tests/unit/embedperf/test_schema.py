"""The run-folder contract: ids, manifest round trip, parts -> Parquet, torn rows, version checks."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from embedperf import schema
from embedperf.errors import RunFolderError
from embedperf.parts import PartsWriter
from scenarios.loader import load_scenario
from scenarios.models import Scenario
from tests.golden.fixtures import GOLDEN_DIR


def test_run_id_format_and_uniqueness(tmp_path: Path) -> None:
    run_id = schema.make_run_id("ramp", "int8 / bs16", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert run_id == "20260102T030405Z-ramp-int8_bs16"
    assert schema.RUN_ID_RE.match(run_id)
    first = schema.new_run_folder(tmp_path, "smoke")
    second = schema.new_run_folder(tmp_path, "smoke")
    assert first.root != second.root and first.root.is_dir() and second.root.is_dir()


def test_new_run_folder_is_absolute_whatever_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    """Child processes start elsewhere; a relative runs dir must not move their files out of the folder."""
    monkeypatch.chdir(tmp_path)
    folder = schema.new_run_folder(Path("runs"), "smoke")
    assert folder.root.is_absolute() and folder.root.parent == tmp_path / "runs"


def _scenario(**fields: object) -> Scenario:
    return load_scenario("smoke", overrides={k: str(v) for k, v in fields.items()})


def test_manifest_round_trip_keeps_unknown_keys(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    manifest = schema.new_manifest(
        folder.run_id,
        _scenario(),
        "http://127.0.0.1:9",
        stages=[schema.StageRecord(index=0, label="u1", users=1, start_unix_s=10.0, end_unix_s=20.0)],
    )
    schema.write_manifest(folder, manifest)
    raw = json.loads(folder.manifest.read_text())
    raw["future_field"] = {"x": 1}
    folder.manifest.write_text(json.dumps(raw))
    back = schema.read_manifest(folder)
    assert back.stages[0].users == 1 and back.stages[0].end_unix_s == 20.0
    assert back.model_extra == {"future_field": {"x": 1}}


def test_typed_sections_survive_the_round_trip(tmp_path: Path) -> None:
    """What the writer puts in (overrides included) the reader gets back as the same typed models."""
    folder = schema.RunFolder(tmp_path / "r").create()
    scenario = _scenario(  # as the load run writes it: the target's path resolved by the pre-flight check
        **{
            "slo.error_budget_pct": 5,
            "health.max_device_temp_c": 70,
            "target.devices": "[3,5]",
            "target.path": "/v1/embeddings",
        }
    )
    info = {"model": "m", "devices": [{"kind": "npu", "index": 3, "name": "npu:3"}], "weights_sha256": "ab"}
    manifest = schema.new_manifest(folder.run_id, scenario, "http://10.0.0.7:8086/", service_info=info)
    schema.write_manifest(folder, manifest)
    back = schema.read_manifest(folder)
    assert back.schema_version == 2
    assert back.slo.error_budget_pct == 5.0 and back.health.max_device_temp_c == 70.0
    assert back.scenario == scenario and back.target.devices == [3, 5]
    assert (
        back.target.base_url == "http://10.0.0.7:8086"
        and back.target_url == "http://10.0.0.7:8086/v1/embeddings"
    )
    assert back.service_info is not None and back.service_info.accelerator_indices() == [3]
    assert back.service_info.model_extra == {"weights_sha256": "ab"}


def test_version_1_manifest_is_upgraded_with_the_reader_names_mapped(tmp_path: Path) -> None:
    """Version-1 folders (the golden runs are such files) load: error_budget (a fraction), temp_max_c, cpu."""
    folder = schema.RunFolder(tmp_path / "v1").create()
    shutil.copy(GOLDEN_DIR / "known_percentiles" / "manifest.json", folder.manifest)
    raw = json.loads(folder.manifest.read_text())
    assert raw["schema_version"] == 1 and raw["slo"] == {"p99_ms": 995.0, "error_budget": 0.01}
    raw["health"] = {"temp_max_c": 70.0, "error_rate_max": 0.002}
    folder.manifest.write_text(json.dumps(raw))
    back = schema.read_manifest(folder)
    assert back.schema_version == schema.SCHEMA_VERSION
    assert back.slo.error_budget_pct == 1.0
    assert back.health.max_device_temp_c == 70.0 and back.health.max_error_rate_pct == 0.2
    assert back.host.hostname == "golden-host" and back.host.cpu_model == "golden-cpu"
    assert back.scenario.name == "golden" and back.scenario.steps[0].users == 10
    assert (
        back.target_url == "http://127.0.0.1:8086/v1/embeddings"
        and back.target.base_url == "http://127.0.0.1:8086"
    )


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


def test_legacy_csv_part_with_torn_last_row_still_reads(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    folder.telemetry_parts.mkdir()
    (folder.telemetry_parts / "psutil.csv").write_text(
        ",".join(schema.TELEMETRY_COLUMNS) + "\n1.0,h,psutil,cpu,cpu_util_pct,12.5\n2.0,h,psutil,cpu,cpu_ut"
    )  # a CSV part of an older run, its writer killed mid-row
    table = schema.read_telemetry_table(folder)
    assert table.column("value").to_pylist() == [12.5]
    assert schema.compact_parts(folder.telemetry_parts, folder.telemetry, schema.TELEMETRY_SCHEMA) == 1
    assert not folder.telemetry_parts.exists()


def test_reader_merges_parquet_and_leftover_parts(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "a") as w:
        w.write([1.0, "h", "psutil", "cpu", "cpu_util_pct", 1.0])
    schema.compact_parts(folder.telemetry_parts, folder.telemetry, schema.TELEMETRY_SCHEMA)
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "b") as w:
        w.write([2.0, "h", "psutil", "cpu", "cpu_util_pct", 2.0])
    assert schema.read_telemetry_table(folder).column("value").to_pylist() == [1.0, 2.0]


def test_parts_written_before_the_id_columns_read_with_them_null(tmp_path: Path) -> None:
    """A run folder an older embedperf left mid-run (Arrow and CSV parts without request_id and
    served_model) reads, compacts and keeps every row; the new columns are null."""
    folder = schema.RunFolder(tmp_path / "old").create()
    older = pa.schema([f for f in schema.REQUEST_SCHEMA if f.name not in ("request_id", "served_model")])
    row = {"run_id": "old", "worker": "w0", "stage_index": 0, "t_sent_unix_s": 5.0, "ok": True}
    with PartsWriter(folder.requests_parts, older, "w0") as writer:
        writer.write(row)
    (folder.requests_parts / "w1.csv").write_text(
        "run_id,worker,stage_index,t_sent_unix_s,ok\nold,w1,0,4.0,true\n", encoding="utf-8"
    )
    table = schema.read_requests_table(folder)
    assert table.schema == schema.REQUEST_SCHEMA and table.num_rows == 2
    assert table.column("request_id").null_count == table.column("served_model").null_count == 2
    assert schema.compact_parts(folder.requests_parts, folder.requests, schema.REQUEST_SCHEMA) == 2
    back = schema.read_requests_table(folder).to_pydict()
    assert back["worker"] == ["w1", "w0"] and back["request_id"] == [None, None]  # sorted by send time


def test_a_targets_fallback_model_is_typed_and_an_unusable_one_is_none() -> None:
    named = schema.ServiceInfo.model_validate({"model": "m", "fallback_model": "m@int8"})
    assert named.fallback_model == "m@int8"
    for odd in (None, "", 3, {"path": "/x"}):
        info = schema.ServiceInfo.model_validate({"model": "m", "fallback_model": odd})
        assert info.fallback_model is None and info.model == "m"
