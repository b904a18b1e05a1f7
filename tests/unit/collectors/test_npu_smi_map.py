"""npu-smi edge cases spelled out by hand: no-value markers, MCU power, errors, header-name parsing."""

from __future__ import annotations

from collectors import npu_smi_map as nmap
from collectors import npu_smi_parse as nparse


def test_na_and_dash_are_absent_never_zero() -> None:
    text = (
        "\tNPU ID                         : 3\n\tChip Count                     : 1\n\n"
        "\tAicore Usage Rate(%)           : NA\n\tAivector Usage Rate(%)         : -\n"
        "\tHBM Bandwidth Usage Rate(%)    : 7\n\tChip ID                        : 0\n"
    )
    metrics = nmap.metrics_from_kv(nparse.parse_kv(text))
    assert metrics == {"npu3.chip0": {"mem_bw_util_pct": 7.0}}


def test_mcu_block_fills_card_power_of_single_chip_card() -> None:
    text = (
        "    NPU ID                         : 1\n    Chip Count                     : 1\n\n"
        "    Chip ID                        : 0\n    Temperature(C)                 : 43\n"
        "    NPU Real-time Power(W)         : NA\n\n"
        "    Chip Name                      : mcu\n    Temperature(C)                 : 41\n"
        "    NPU Real-time Power(W)         : 13.4\n"
    )
    assert nmap.metrics_from_kv(nparse.parse_kv(text)) == {"npu1.chip0": {"temp_c": 43.0, "power_w": 13.4}}


def test_two_chip_card_keeps_chips_apart_with_chip_id_after_fields() -> None:
    text = (
        "\tNPU ID                         : 8\n\tChip Count                     : 2\n\n"
        "\tAicore Usage Rate(%)           : 10\n\tChip ID                        : 0\n\n"
        "\tAicore Usage Rate(%)           : 90\n\tChip ID                        : 1\n"
    )
    metrics = nmap.metrics_from_kv(nparse.parse_kv(text))
    assert metrics["npu8.chip0"]["aicore_util_pct"] == 10.0
    assert metrics["npu8.chip1"]["aicore_util_pct"] == 90.0


def test_invalid_card_id_is_an_error_even_without_exit_code() -> None:
    report = nparse.parse_kv("Invalid card id.\nError parameter of -i\n")
    assert report.error == "Invalid card id."
    assert nmap.metrics_from_kv(report, npu_id=0) == {}


def test_watch_columns_found_by_name_in_any_order_and_na_power_absent() -> None:
    parser = nparse.WatchParser()
    assert parser.feed("NpuID(Idx)  Temp(C)     NPU Util(%) Pwr(W)      AI Core(%)  \n") is None
    row = parser.feed("12          55          80          NA          70          \n")
    assert row is not None
    assert nmap.metrics_from_watch_row(row) == (
        "npu12.chip0",
        {"temp_c": 55.0, "aicore_util_pct": 70.0, "device_util_pct": 80.0},
    )
    assert parser.feed("garbage line\n") is None


def test_device_util_falls_back_to_aicore() -> None:
    parser = nparse.WatchParser()
    parser.feed("NpuID(Idx)  ChipId(Idx) AI Core(%)\n")
    row = parser.feed("32          1           44\n")
    assert row is not None
    assert nmap.metrics_from_watch_row(row) == (
        "npu32.chip1",
        {"aicore_util_pct": 44.0, "device_util_pct": 44.0},
    )


def test_five_digit_used_total_pairs_in_box_table() -> None:
    chips = nparse.parse_info_table(
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===========================+===============+====================================================+\n"
        "| 6     910B2C              | OK            | 88.6        51                0    / 0             |\n"
        "| 0                         | 0000:5A:00.0  | 0           0    / 0          20701/ 65536         |\n"
    )
    assert nmap.metrics_from_info_table(chips)["npu6.chip0"]["mem_used_mb"] == 20701.0
