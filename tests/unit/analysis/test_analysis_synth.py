"""The synthetic run folder is complete and self-consistent."""

from __future__ import annotations

import pytest

from analysis.cli.synth import STEP_USERS, main, synthesize
from embedperf.schema import CANONICAL_METRICS, RunFolder, read_manifest
from tests.oracles.in_memory.load import load_run


def test_synth_folder_shape(tmp_path) -> None:
    folder = synthesize(tmp_path / "run", n_requests=5000, n_devices=3, hours=0.02, seed=1)
    data = load_run(folder)
    manifest = read_manifest(folder)
    assert manifest.kind == "synthetic" and manifest.complete
    assert [s.users for s in manifest.stages] == list(STEP_USERS)
    assert len(data.requests) == 5000
    assert set(data.telemetry["metric"].astype(str)) <= CANONICAL_METRICS
    devices = set(data.telemetry["device"].astype(str))
    assert {"npu0.chip0", "npu2.chip0", "proc:generator", "proc:service"} <= devices
    assert data.telemetry["ts_unix_s"].nunique() == pytest.approx(0.02 * 3600, abs=2)
    ok = data.requests["ok"].to_numpy()
    assert (data.requests["srv_total_ms"][ok] < data.requests["latency_ms"][ok]).all()


def test_cli_is_seeded(tmp_path, capsys) -> None:
    args = ["--requests", "500", "--devices", "1", "--hours", "0.01", "--seed", "3"]
    assert main([str(tmp_path / "a"), *args]) == 0
    assert main([str(tmp_path / "b"), *args]) == 0
    a = load_run(RunFolder(tmp_path / "a")).requests
    b = load_run(RunFolder(tmp_path / "b")).requests
    assert a["latency_ms"].equals(b["latency_ms"])
    assert str(tmp_path / "a") in capsys.readouterr().out
