"""Per-step statistics against the golden run with known answers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.run.analyse import analyse_folder
from embedperf.schema import StageRecord
from tests.golden.builders import T0_UNIX_S, ok_row, write_run
from tests.golden.fixtures import golden_copy


@pytest.fixture(scope="module")
def golden_summary(tmp_path_factory: pytest.TempPathFactory):
    folder = golden_copy("known_percentiles", tmp_path_factory.mktemp("golden"))
    return analyse_folder(folder, n_boot=500).summary


def test_percentiles_are_exact_for_a_known_list(golden_summary) -> None:
    lat = golden_summary.steps[0].stats.latency
    known = np.arange(1.0, 1001.0)
    assert lat.n == 1000
    assert lat.mean_ms == pytest.approx(500.5)
    assert lat.p50_ms == pytest.approx(500.5)
    assert lat.p90_ms == pytest.approx(900.1)
    assert lat.p95_ms == pytest.approx(950.05)
    assert lat.p99_ms == pytest.approx(990.01)
    assert lat.p999_ms == pytest.approx(np.percentile(known, 99.9))
    assert lat.max_ms == 1000.0


def test_outcomes_probes_warmup_and_dropped_rows_are_counted(golden_summary) -> None:
    stats = golden_summary.steps[0].stats
    assert stats.n_error == 5
    assert stats.n_timeout == 2
    assert stats.n_probe == 3
    assert stats.n_requests == 1007  # ok + errors + timeouts; probes excluded
    assert stats.error_rate == pytest.approx(7 / 1007)
    assert stats.n_warmup_trimmed == 50
    assert golden_summary.dropped_rows["outside_stage"] == 4
    assert stats.duration_s == pytest.approx(100.0)
    assert stats.qps == pytest.approx(10.0)  # goodput: the 1000 ok requests over 100 s
    assert stats.goodput_qps == stats.ok_qps == stats.qps
    assert stats.offered_qps == pytest.approx(10.07)  # failed requests counted too
    assert stats.errors_by_kind == {"http_503": 5, "http_504": 2}


def test_p99_confidence_interval_brackets_the_estimate(golden_summary) -> None:
    low, high = golden_summary.steps[0].stats.p99_ci_ms
    assert low is not None and high is not None
    assert low <= 990.01 <= high
    assert high - low < 40


def test_few_samples_warnings(golden_summary, tmp_path: Path) -> None:
    assert golden_summary.steps[0].stats.warnings == []  # exactly 1000 ok samples is enough
    stages = [
        StageRecord(
            index=i,
            label=f"s{i}",
            users=1,
            start_unix_s=T0_UNIX_S + 100 * i,
            end_unix_s=T0_UNIX_S + 100 * (i + 1),
        )
        for i in range(2)
    ]
    rows = [ok_row(0, T0_UNIX_S + 0.5 * j, 10.0) for j in range(50)]
    rows += [ok_row(1, T0_UNIX_S + 100 + 0.1 * j, 10.0) for j in range(500)]
    summary = analyse_folder(write_run(tmp_path / "few", rows, [], stages), n_boot=50).summary
    assert summary.steps[0].stats.warnings == ["few_samples_p99"]
    assert summary.steps[1].stats.warnings == ["few_samples_p999"]
    codes = [f.code for f in summary.findings]
    assert "few_samples_p99" in codes and "no_telemetry" in codes


def test_slo_and_health_use_thresholds(golden_summary) -> None:
    step = golden_summary.steps[0]
    assert step.meets_slo is True  # P99 990 <= 995 and 0.7 % <= 1 %
    health = {h.name: h.status for h in step.health}
    assert health["temp_c"] == "warn"  # one device at 90 degC
    assert health["mem_pct"] == "pass"  # 25 %
    assert health["error_rate"] == "warn"  # 0.7 % vs 0.1 %
    assert health["mean_latency_ms"] == "warn"  # 500.5 ms vs 300 ms


def test_telemetry_joined_by_time(golden_summary) -> None:
    tel = golden_summary.steps[0].telemetry
    assert tel.n_devices == 2
    assert tel.device_util_mean_pct == pytest.approx(60.0)
    assert tel.device_util_max_pct == pytest.approx(70.0)
    assert tel.temp_max_c == pytest.approx(90.0)
    assert tel.power_total_mean_w == pytest.approx(200.0)
    assert tel.mem_max_pct == pytest.approx(25.0)
    assert tel.generator_cpu_mean_pct == pytest.approx(30.0)


def test_summary_and_tables_are_written(tmp_path: Path) -> None:
    from analysis.run.summary import write_analysis

    folder = golden_copy("known_percentiles", tmp_path)
    out = write_analysis(folder, analyse_folder(folder, n_boot=100).summary)
    assert (out / "summary.json").is_file()
    steps_csv = (out / "steps.csv").read_text().splitlines()
    assert steps_csv[0].startswith("index,label,users")
    assert len(steps_csv) == 2
    decomposition_csv = (out / "decomposition.csv").read_text().splitlines()
    assert decomposition_csv[0] == "index,label,component,mean_ms,pct"
    assert len(decomposition_csv) == 1 + 6


def test_service_busy_fraction_is_reported_as_percent() -> None:
    import pandas as pd

    from analysis.model.telemetry import TelemetryIndex

    telemetry = pd.DataFrame(
        {
            "ts_unix_s": [1.0, 2.0, 3.0],
            "host": ["h"] * 3,
            "source": ["service"] * 3,
            "device": ["service"] * 3,
            "metric": ["busy_frac"] * 3,
            "value": [0.2, 0.4, 0.9],
        }
    )
    stats = TelemetryIndex.of_frame(telemetry).window_stats(1.5, 3.0)
    assert stats.service_busy_mean_pct == pytest.approx(65.0)
    assert stats.service_busy_max_pct == pytest.approx(90.0)
    assert stats.device_util_mean_pct is None  # a service figure is not a device reading
