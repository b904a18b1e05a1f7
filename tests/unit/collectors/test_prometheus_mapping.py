"""Exporter names -> canonical metrics: npu-exporter and DCGM, device naming, FB total, fractions."""

from __future__ import annotations

import pytest

from collectors.prometheus_pull import device_of, map_series


def test_device_names() -> None:
    assert device_of({"__name__": "npu_chip_info_power", "id": "4"}) == "npu4.chip0"
    assert device_of({"__name__": "npu_chip_info_power", "id": "4", "vdie_id": "1"}) == "npu4.chip1"
    assert (
        device_of({"__name__": "npu_chip_info_power", "id": "4", "vdie_id": "42C711D4 20B03704"})
        == "npu4.chip0"
    )
    assert device_of({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "3"}) == "gpu3"
    assert device_of({"__name__": "DCGM_FI_DEV_GPU_UTIL"}) is None


def test_dcgm_mapping_total_memory_and_fraction() -> None:
    result = [
        {"metric": {"__name__": "DCGM_FI_PROF_DRAM_ACTIVE", "gpu": "0"}, "values": [[100, "0.42"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0"}, "values": [[100, "1000"]]},
        {"metric": {"__name__": "DCGM_FI_DEV_FB_FREE", "gpu": "0"}, "values": [[100, "3000"]]},
        {
            "metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0"},
            "values": [[100, "NaN"], [101, "300.5"]],
        },
    ]
    rows = {(r.ts_unix_s, r.device, r.metric): r.value for r in map_series(result, "h1")}
    assert rows[(100.0, "gpu0", "mem_bw_util_pct")] == pytest.approx(42.0)
    assert rows[(100.0, "gpu0", "mem_used_mb")] == 1000.0
    assert rows[(100.0, "gpu0", "mem_total_mb")] == 4000.0
    assert (100.0, "gpu0", "power_w") not in rows  # NaN is no value
    assert rows[(101.0, "gpu0", "power_w")] == 300.5


def test_npu_exporter_mapping() -> None:
    result = [
        {"metric": {"__name__": "npu_chip_info_utilization", "id": "5"}, "values": [[10, "33"]]},
        {"metric": {"__name__": "npu_chip_info_overall_utilization", "id": "5"}, "values": [[10, "40"]]},
        {"metric": {"__name__": "npu_chip_info_hbm_total_memory", "id": "5"}, "values": [[10, "65536"]]},
    ]
    rows = map_series(result, "h1")
    assert {(r.device, r.metric, r.value) for r in rows} == {
        ("npu5.chip0", "aicore_util_pct", 33.0),
        ("npu5.chip0", "device_util_pct", 40.0),
        ("npu5.chip0", "mem_total_mb", 65536.0),
    }
    assert {r.source for r in rows} == {"prometheus"} and {r.host for r in rows} == {"h1"}
