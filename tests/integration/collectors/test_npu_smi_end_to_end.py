"""The real collector process driven by the fake npu-smi: watch, poll, lost devices, hangs, failures."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from collector_run import (  # noqa: E402
    event_kinds,
    fake_npu_smi,
    read_outputs,
    start_collector,
    stop_collector,
    wait_until,
)

from embedperf.schema import CANONICAL_METRICS  # noqa: E402


def run_until(
    tmp_path: Path, done: Callable[[pd.DataFrame], bool], what: str, args: list[str], env: dict[str, str]
) -> Path:
    """Run the collector against the fake npu-smi until `done` holds for what it has written, then stop it."""
    out = tmp_path / "run"
    npu_smi = fake_npu_smi(tmp_path)
    proc = start_collector(
        out, "--npu-smi", str(npu_smi), *args, env={"FAKE_NPU_STATE_DIR": str(tmp_path / "fake"), **env}
    )
    try:
        wait_until(proc, out, done, what)
    finally:
        assert stop_collector(proc) == 0
    return out


def calls(tmp_path: Path) -> list[str]:
    """Every npu-smi command the collector ran so far, one argv per line (the fake logs them)."""
    log = tmp_path / "fake" / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.is_file() else []


def sampled(frame: pd.DataFrame, device: str, metric: str | None = None, after_unix_s: float = 0.0) -> int:
    """Distinct sample times of a device (and metric) after an instant."""
    rows = frame[(frame.device == device) & (frame.ts_unix_s > after_unix_s)]
    if metric is not None:
        rows = rows[rows.metric == metric]
    return int(rows.ts_unix_s.nunique())


def test_watch_mode_survives_a_lost_device_and_a_hung_stream(tmp_path: Path) -> None:
    env = {
        "FAKE_NPU_IDS": "4,5,9",
        "FAKE_NPU_LOST_ID": "5",
        "FAKE_NPU_LOST_AFTER_S": "3",
        "FAKE_NPU_HANG_WATCH_AFTER_S": "5",
    }
    restarted: list[float] = []

    def resumed_after_the_restart(frame: pd.DataFrame) -> bool:
        if not restarted and sum("watch" in c for c in calls(tmp_path)) >= 2:
            restarted.append(time.time())  # the second watch stream has started
        return bool(restarted) and all(
            sampled(frame, d, after_unix_s=restarted[0]) >= 2 for d in ("npu4.chip0", "npu9.chip0")
        )

    out = run_until(
        tmp_path,
        resumed_after_the_restart,
        "npu4 and npu9 sampled twice after watch was restarted",
        ["--sources", "npu_smi,psutil", "--npu-timeout", "2"],
        env,
    )
    frame, status = read_outputs(out)
    npu = frame[frame.source == "npu_smi"]
    assert set(npu.metric) <= CANONICAL_METRICS
    assert set(npu.device) == {"npu4.chip0", "npu5.chip0", "npu9.chip0"}
    assert (npu.ts_unix_s % 1 == 0).all(), "samples are stamped on whole seconds"
    st = status["npu_smi"]
    assert st["status"] == "partial"
    assert "device_lost" in event_kinds(st, "npu5.chip0")
    assert {"gap", "restart", "recovered"} <= set(event_kinds(st))
    restart_ts = min(e["ts_unix_s"] for e in st["events"] if e["kind"] == "restart")
    after = npu[npu.ts_unix_s > restart_ts]
    assert {"npu4.chip0", "npu9.chip0"} <= set(after.device), "sampling resumed after the restart"
    assert "npu5.chip0" not in set(after.device)
    # HBM MB comes from the slow poll (the info table), not from watch
    mem = npu[(npu.device == "npu4.chip0") & (npu.metric == "mem_used_mb")]
    assert set(mem.value) == {16400.0}
    assert status["psutil"]["status"] == "ok" and status["psutil"]["samples"] > 0
    watch_calls = calls(tmp_path)
    assert sum("watch" in c for c in watch_calls) == 2  # one stream, one restart: not a process per second
    assert sum("-t usages -i 4" in c for c in watch_calls) <= 3  # slow poll every ~10 s, not every second


def test_poll_mode_records_invalid_card_id_and_keeps_the_others(tmp_path: Path) -> None:
    env = {"FAKE_NPU_IDS": "4,5", "FAKE_NPU_LOST_ID": "5", "FAKE_NPU_LOST_AFTER_S": "2.5"}

    def npu4_outlived_npu5(frame: pd.DataFrame) -> bool:
        npu4, npu5 = frame[frame.device == "npu4.chip0"], frame[frame.device == "npu5.chip0"]
        return (
            npu4.ts_unix_s.nunique() >= 4
            and len(npu5) > 0
            and npu4.ts_unix_s.max() >= npu5.ts_unix_s.max() + 2  # two polls of npu4 since npu5's last
        )

    out = run_until(
        tmp_path, npu4_outlived_npu5, "npu4 polled twice after npu5 was lost",
        ["--sources", "npu_smi", "--npu-mode", "poll"], env,
    )  # fmt: skip
    frame, status = read_outputs(out)
    npu4 = frame[frame.device == "npu4.chip0"]
    assert {"power_w", "temp_c", "aicore_util_pct", "vector_util_pct", "mem_total_mb"} <= set(npu4.metric)
    assert npu4.ts_unix_s.nunique() >= 4
    lost = [e for e in status["npu_smi"]["events"] if e["kind"] == "device_lost"]
    assert [e["device"] for e in lost] == ["npu5.chip0"]
    assert "Invalid card id" in lost[0]["message"]
    npu5 = frame[frame.device == "npu5.chip0"]
    assert npu5.ts_unix_s.max() < npu4.ts_unix_s.max()


def test_failing_npu_smi_is_reported_and_does_not_stop_host(tmp_path: Path) -> None:
    def host_sampled_after_npu_smi_ran(frame: pd.DataFrame) -> bool:
        return bool(calls(tmp_path)) and sampled(frame, "cpu") >= 2

    out = run_until(
        tmp_path, host_sampled_after_npu_smi_ran, "host samples after npu-smi was called",
        ["--sources", "npu_smi,psutil"], {"FAKE_NPU_FAIL": "1"},
    )  # fmt: skip
    frame, status = read_outputs(out)
    assert status["npu_smi"]["status"] == "failed"
    assert "exited 1" in status["npu_smi"]["reason"] and "dcmi" in status["npu_smi"]["reason"]
    assert status["psutil"]["status"] == "ok"
    assert (frame.source == "psutil").sum() > 0 and (frame.source == "npu_smi").sum() == 0


@pytest.mark.parametrize("mode", ["watch", "poll"])
def test_npu_ids_filter_and_na_power_absent(tmp_path: Path, mode: str) -> None:
    env = {"FAKE_NPU_IDS": "0,9,32", "FAKE_NPU_WATCH_FORMAT": "950"}

    def both_sampled_twice(frame: pd.DataFrame) -> bool:
        metric = "device_util_pct" if mode == "watch" else None
        return all(sampled(frame, d, metric) >= 2 for d in ("npu9.chip0", "npu32.chip0"))

    out = run_until(
        tmp_path, both_sampled_twice, "npu9 and npu32 utilisation sampled twice",
        ["--sources", "npu_smi", "--npu-ids", "9,32", "--npu-mode", mode], env,
    )  # fmt: skip
    frame, status = read_outputs(out)
    assert set(frame.device) == {"npu9.chip0", "npu32.chip0"}
    if mode == "watch":
        assert "power_w" not in set(frame.metric)  # watch prints NA: absent, never 0
        assert "device_util_pct" in set(frame.metric)
    assert status["npu_smi"]["status"] == "ok"
