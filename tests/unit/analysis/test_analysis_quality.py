"""Missing telemetry, failed collectors, gaps and incomplete runs are reported, not hidden."""

from __future__ import annotations

import numpy as np

from analysis.run.analyse import analyse_folder
from embedperf.schema import CollectorStatus, GeneratorCpu, StageRecord
from tests.golden.builders import T0_UNIX_S, ok_row, telemetry_table, write_run
from tests.oracles.in_memory.figures import telemetry_gaps


def test_incomplete_run_without_telemetry(tmp_path) -> None:
    stage = StageRecord(index=0, label="u1", users=1, start_unix_s=T0_UNIX_S, end_unix_s=None)
    rows = [ok_row(0, T0_UNIX_S + 0.1 * i, 10.0, srv_total_ms=None) for i in range(200)]
    folder = write_run(
        tmp_path / "inc",
        rows,
        [],
        [stage],
        complete=False,
        end_unix_s=None,
        collectors=[CollectorStatus(name="npu_smi", status="failed", reason="npu-smi not found on PATH")],
        generator_cpu=GeneratorCpu(mean_pct=95.0, max_pct=99.0, saturated=True),
    )
    summary = analyse_folder(folder, n_boot=50).summary
    codes = {f.code for f in summary.findings}
    assert {
        "incomplete_run",
        "no_telemetry",
        "collector_not_ok",
        "generator_saturated",
        "shared_host",
    } <= codes
    step = summary.steps[0]
    assert step.stats.n_ok == 200
    assert step.telemetry.device_util_mean_pct is None
    assert step.decomposition is None
    assert summary.devices_in_run == 1


def test_telemetry_gaps_per_source() -> None:
    from tests.oracles.in_memory.load import to_frame

    seconds = [s for s in range(100) if not 40 <= s < 60]
    table = telemetry_table([(T0_UNIX_S + s, "psutil", "cpu", "cpu_util_pct", 1.0) for s in seconds])
    frame = to_frame(table)
    gaps = telemetry_gaps(frame, T0_UNIX_S, T0_UNIX_S + 99)
    assert gaps == {"psutil": 20}
    assert np.isfinite(frame["value"]).all()
