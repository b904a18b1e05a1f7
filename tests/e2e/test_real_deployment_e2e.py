"""A real deployment, end to end through `embedperf run` and the report: 8 NPUs of which only 3 and 5
serve the target (fake npu-smi), the serving devices given, listed by /info or found by their load,
and the run's own SLO and health settings reaching the verdicts."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from embedperf.schema import RunFolder, read_manifest, read_telemetry_table
from loadgen.processes.stub_target import running_stub
from tests.integration.collectors.collector_run import fake_npu_smi

REPO_ROOT = Path(__file__).resolve().parents[2]
ALL_NPUS = "0,1,2,3,4,5,6,7"
SERVING = (3, 5)
FAIL_EVERY = 40  # 2.5% errors: over the default 0.1% budget, within a 5% one
SHORT = ["--set", "steps.duration_s=4", "--set", "steps.warmup_s=1"]
STUB_DELAY_MS = 20  # ~50 answers/s per user: plenty of 1-in-40 failures, no core spent on load


def fake_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "EMBEDPERF_NPU_SMI": str(fake_npu_smi(tmp_path)),
        "FAKE_NPU_IDS": ALL_NPUS,
        "FAKE_NPU_BUSY_IDS": ",".join(map(str, SERVING)),
        "FAKE_NPU_WATCH_INTERVAL_S": "0.5",
    }


def embedperf(*args: str, env: dict[str, str], timeout_s: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "embedperf.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def run_and_report(url: str, runs_dir: Path, env: dict[str, str], *extra: str, expect_exit: int) -> RunFolder:
    """`embedperf run smoke` (which must exit `expect_exit`), then `embedperf report` on its folder."""
    run = embedperf("run", "smoke", "--host", url, "--runs-dir", str(runs_dir), *SHORT, *extra, env=env)
    assert run.returncode == expect_exit, run.stdout[-2000:] + run.stderr[-3000:]
    folders = [p for p in runs_dir.iterdir() if (p / "manifest.json").is_file()]
    assert len(folders) == 1, run.stdout[-3000:] + run.stderr[-3000:]
    report = embedperf("report", str(folders[0]), env=env)
    assert report.returncode == 0, report.stderr
    return RunFolder(folders[0])


def summary_of(folder: RunFolder) -> dict[str, Any]:
    return json.loads((folder.analysis / "summary.json").read_text(encoding="utf-8"))


def steps_csv(folder: RunFolder) -> list[dict[str, str]]:
    with (folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def device_means(folder: RunFolder, devices: set[str], t0: float, t1: float) -> dict[str, float]:
    """Mean of each metric over the given devices in [t0, t1], from telemetry.parquet itself."""
    frame = read_telemetry_table(folder).to_pandas()
    frame = frame[frame["device"].isin(devices) & (frame["ts_unix_s"] >= t0) & (frame["ts_unix_s"] <= t1)]
    return {str(k): float(v) for k, v in frame.groupby("metric")["value"].mean().items()}


def assert_serving_figures(folder: RunFolder) -> None:
    """steps.csv device figures are the mean of devices 3 and 5, not of all 8."""
    summary = summary_of(folder)
    serving = {f"npu{i}.chip0" for i in SERVING}
    everyone = {f"npu{i}.chip0" for i in range(8)}
    checked = 0
    for row, step in zip(steps_csv(folder), summary["steps"], strict=True):
        if not row["device_util_mean_pct"]:
            continue  # npu-smi still starting during the first step's steady window
        t0, t1 = step["stats"]["steady_start_unix_s"], step["stats"]["steady_end_unix_s"]
        want, diluted = device_means(folder, serving, t0, t1), device_means(folder, everyone, t0, t1)
        assert float(row["device_util_mean_pct"]) == pytest.approx(want["device_util_pct"], abs=1.0)
        assert float(row["power_mean_w"]) == pytest.approx(want["power_w"], abs=1.0)
        assert float(row["device_util_mean_pct"]) == pytest.approx(68.0, abs=1.0)  # (66 + 70) / 2
        assert float(row["power_mean_w"]) == pytest.approx(100.8, abs=1.0)  # (99.6 + 102.0) / 2
        assert diluted["device_util_pct"] < 20.0  # what an 8-device mean would have said
        checked += 1
    assert checked >= 1, "no step had device figures"
    assert summary["devices_in_run"] == 2
    table = {d["device"]: d["serving"] for d in summary["device_table"]}
    assert table == {d: d in serving for d in everyone}, "every device seen, the serving ones marked"


@pytest.fixture(scope="module")
def failing_stub() -> Iterator[str]:
    with running_stub("--delay-ms", str(STUB_DELAY_MS), "--fail-every", str(FAIL_EVERY)) as url:
        yield url


@pytest.fixture(scope="module")
def default_run(failing_stub: str, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    """Devices given, the scenario's own SLO: 2.5% errors fail the 0.1% budget, so the run exits 1."""
    tmp = tmp_path_factory.mktemp("explicit")
    return run_and_report(failing_stub, tmp / "runs", fake_env(tmp), "--devices", "3,5", expect_exit=1)


@pytest.fixture(scope="module")
def overridden_run(failing_stub: str, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    """No devices given (the stub's /info lists none: they are found by their load), and
    `--set slo.error_budget_pct=5 --set health.max_device_temp_c=70`: 2.5% errors are within budget."""
    tmp = tmp_path_factory.mktemp("overridden")
    overrides = ["--set", "slo.error_budget_pct=5", "--set", "health.max_device_temp_c=70"]
    return run_and_report(failing_stub, tmp / "runs", fake_env(tmp), *overrides, expect_exit=0)


def test_explicit_devices_count_and_figures(default_run: RunFolder) -> None:
    manifest = read_manifest(default_run)
    assert (manifest.serving_devices.rule, manifest.serving_devices.indices) == ("explicit", [3, 5])
    assert summary_of(default_run)["serving_rule"] == "explicit"
    assert_serving_figures(default_run)
    telemetry = read_telemetry_table(default_run).to_pandas()
    assert {f"npu{i}.chip0" for i in range(8)} <= set(telemetry["device"]), "idle devices stay recorded"


def test_busy_devices_are_found_and_named_in_the_report(overridden_run: RunFolder) -> None:
    assert read_manifest(overridden_run).serving_devices.rule == "none"  # nothing given, /info lists none
    summary = summary_of(overridden_run)
    assert summary["serving_rule"] == "busy"
    assert summary["serving_devices"] == ["npu3.chip0", "npu5.chip0"]
    assert_serving_figures(overridden_run)
    html = overridden_run.report.read_text(encoding="utf-8")
    assert "Serving devices found by their load" in html and "npu3.chip0, npu5.chip0" in html


def test_target_info_lists_the_serving_devices(tmp_path: Path) -> None:
    with running_stub("--delay-ms", str(STUB_DELAY_MS), "--info-devices", "3,5") as url:
        folder = run_and_report(url, tmp_path / "runs", fake_env(tmp_path), expect_exit=0)
    assert (read_manifest(folder).serving_devices.rule, summary_of(folder)["serving_rule"]) == (
        "service_info",
        "service_info",
    )
    assert_serving_figures(folder)


def test_slo_and_health_overrides_change_the_verdicts(
    default_run: RunFolder, overridden_run: RunFolder
) -> None:
    """2.5% errors and 77 C: the defaults (0.1% budget, 85 C) fail the SLO and pass the temperature;
    `--set slo.error_budget_pct=5 --set health.max_device_temp_c=70` turn both round (the exit codes,
    1 and 0, are checked where the runs are made)."""
    manifest = read_manifest(overridden_run)
    assert manifest.slo.error_budget_pct == 5.0 and manifest.health.max_device_temp_c == 70.0
    before, after = summary_of(default_run), summary_of(overridden_run)
    assert (before["error_budget"], after["error_budget"]) == (0.001, 0.05)
    assert before["slo_verdict"] == "fail" and after["slo_verdict"] == "pass"

    def temp_checks(summary: dict[str, Any]) -> set[tuple[float, str]]:
        return {
            (c["limit"], c["status"])
            for s in summary["steps"]
            for c in s["health"]
            if c["name"] == "temp_c" and c["value"] is not None
        }

    assert temp_checks(before) == {(85.0, "pass")}
    assert temp_checks(after) == {(70.0, "warn")}
