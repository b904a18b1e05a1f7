"""Serving devices: the rule order, the busy rule's idle level, device names across hosts."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.figures.devices import device_index, serving_devices
from analysis.model.telemetry import TelemetryIndex
from embedperf.schema import ServingDevices

LOAD = (100.0, 110.0)


def frame(
    util_by_device: dict[str, float], host: str = "h", idle_util: dict[str, float] | None = None
) -> pd.DataFrame:
    rows = []
    for device, util in util_by_device.items():
        for t in range(90, 120):
            loaded = LOAD[0] <= t <= LOAD[1]
            value = util if loaded else (idle_util or {}).get(device, 1.0)
            rows += [(float(t), host, "npu_smi", device, "device_util_pct", value)]
            rows += [(float(t), host, "npu_smi", device, "power_w", 100.0 + value)]
    return pd.DataFrame(rows, columns=["ts_unix_s", "host", "source", "device", "metric", "value"])


def test_device_index() -> None:
    assert [device_index(d) for d in ("npu4.chip0", "gpu1", "h/npu12.chip1", "cpu", "proc:service")] == [
        4,
        1,
        12,
        None,
        None,
    ]


def test_explicit_rule_wins_over_the_busy_devices() -> None:
    accel = frame({"npu0.chip0": 90.0, "npu3.chip0": 2.0, "npu5.chip0": 2.0})
    result = serving_devices(accel, ServingDevices(rule="explicit", indices=[3, 5]), [LOAD], LOAD)
    assert result.rule == "explicit" and result.devices == ["npu3.chip0", "npu5.chip0"]
    assert [r.serving for r in result.table] == [False, True, True]


def test_busy_rule_measures_the_rise_over_each_devices_idle_level() -> None:
    """npu1 sits at 50% busy or not (a neighbour's job): not serving. npu2 rises 1 -> 40%: serving."""
    accel = frame(
        {"npu0.chip0": 1.0, "npu1.chip0": 50.0, "npu2.chip0": 40.0},
        idle_util={"npu1.chip0": 50.0, "npu2.chip0": 1.0},
    )
    result = serving_devices(accel, ServingDevices(), [LOAD], LOAD)
    assert (result.rule, result.devices, result.indices) == ("busy", ["npu2.chip0"], [2])
    row = {r.device: r for r in result.table}["npu2.chip0"]
    assert row.util_idle_pct == pytest.approx(1.0) and row.util_load_mean_pct == pytest.approx(40.0)
    assert row.power_mean_w == pytest.approx(140.0)


def test_without_idle_samples_the_quiet_devices_set_the_floor() -> None:
    accel = frame({"npu0.chip0": 1.0, "npu1.chip0": 1.5, "npu3.chip0": 66.0})
    accel = accel[(accel["ts_unix_s"] >= LOAD[0]) & (accel["ts_unix_s"] <= LOAD[1])]
    result = serving_devices(accel, ServingDevices(), [LOAD], LOAD)
    assert result.devices == ["npu3.chip0"]
    everyone_busy = frame({"npu0.chip0": 60.0, "npu1.chip0": 70.0})
    everyone_busy = everyone_busy[everyone_busy["ts_unix_s"] >= LOAD[0]]
    assert serving_devices(everyone_busy, ServingDevices(), [LOAD], LOAD).devices == [
        "npu0.chip0",
        "npu1.chip0",
    ]


def test_nothing_busier_than_idle_leaves_the_rule_unknown() -> None:
    result = serving_devices(frame({"npu0.chip0": 2.0, "npu1.chip0": 3.0}), ServingDevices(), [LOAD], LOAD)
    assert (result.rule, result.devices) == ("none", [])


def test_two_hosts_keep_their_devices_apart_and_figures_cover_the_serving_ones() -> None:
    telemetry = pd.concat([frame({"npu0.chip0": 80.0}, host="a"), frame({"npu0.chip0": 1.0}, host="b")])
    for column in ("host", "source", "device", "metric"):
        telemetry[column] = telemetry[column].astype("category")
    index = TelemetryIndex.of_frame(telemetry.reset_index(drop=True))
    result = serving_devices(
        index.all_accelerator, ServingDevices(rule="explicit", indices=[0]), [LOAD], LOAD
    )
    assert result.devices == ["a/npu0.chip0", "b/npu0.chip0"]  # index 0 on both hosts
    busy = serving_devices(index.all_accelerator, ServingDevices(), [LOAD], LOAD)
    assert busy.devices == ["a/npu0.chip0"]
    index.serve(busy.devices)
    stats = index.window_stats(*LOAD)
    assert stats.n_devices == 1 and stats.device_util_mean_pct == pytest.approx(80.0)


def test_explicit_devices_missing_from_the_telemetry_leave_no_device_figures() -> None:
    """--devices 3,5 on a host whose telemetry has npu0 only: not npu0's figures, and a finding says so."""
    from analysis.figures.devices import deployment_findings

    telemetry = frame({"npu0.chip0": 80.0})
    for column in ("host", "source", "device", "metric"):
        telemetry[column] = telemetry[column].astype("category")
    index = TelemetryIndex.of_frame(telemetry)
    result = serving_devices(
        index.all_accelerator, ServingDevices(rule="explicit", indices=[3, 5]), [LOAD], LOAD
    )
    index.serve(result.devices)
    assert result.devices == [] and index.window_stats(*LOAD).device_util_mean_pct is None
    [finding] = deployment_findings(result, [])
    assert finding.code == "serving_not_seen" and finding.params["indices"] == "3, 5"
