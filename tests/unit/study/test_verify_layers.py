"""The judgements of layers 2 and 3 that need no target: capacity against the target, the search's bracket,
counters and restarts over the soak, thermal throttling from a run folder's telemetry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from decisions.search.record import SearchRecord
from embedperf.schema import TELEMETRY_SCHEMA, RunFolder, new_run_folder, write_telemetry_parquet
from study.verify.function import precision_checks
from study.verify.load import throttling_check
from study.verify.perf import capacity_check, search_overrides
from study.verify.soak import counter_checks, restart_check
from study.verify.target import DEVICE_ERRORS, OOM_SPLITS, InfoSnapshot, MetricsSnapshot
from study.verify.thresholds import VerifyThresholds


def record(answer: float | None, status: str = "found") -> SearchRecord:
    return SearchRecord(rule="r", slo_p99_ms=300.0, error_budget_pct=0.1, precision=0.05, confidence=0.95,
                        arrival="poisson", status=status, answer_rps=answer)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "status"),
    [(130.0, "pass"), (125.0, "pass"), (110.0, "warn"), (100.0, "warn"), (99.0, "fail"), (None, "fail")],
)
def test_capacity_against_the_target_and_its_headroom(answer: float | None, status: str) -> None:
    check = capacity_check(record(answer), VerifyThresholds(target_qps=100, headroom_pct=25))
    assert check.status == status
    assert check.limit.startswith(">= 125 req/s (target 100 + 25%)") or answer is None


def test_capacity_without_a_target_is_shown_not_judged() -> None:
    check = capacity_check(record(80.0, "above_max_rate"), VerifyThresholds())
    assert check.status == "warn" and check.measured == "80 req/s (above_max_rate)"


def test_the_search_starts_at_the_target_and_stops_at_target_plus_headroom() -> None:
    overrides = search_overrides(VerifyThresholds(target_qps=40, headroom_pct=25, slo_p99_ms=200))
    assert (overrides["search.start_rate"], overrides["search.max_rate"], overrides["slo.p99_ms"]) == (
        "40",
        "50",
        "200.0",
    )
    # a target below what a probe can judge starts at the floor instead (400 ok answers in a 30 s probe)
    low = search_overrides(VerifyThresholds(target_qps=2, headroom_pct=0))
    assert (
        float(low["search.start_rate"]) >= 1.15 * 400 / 29
        and low["search.max_rate"] == low["search.start_rate"]
    )


def test_counters_and_restarts_over_the_soak() -> None:
    t = VerifyThresholds()
    before = MetricsSnapshot(frozenset({OOM_SPLITS, DEVICE_ERRORS}), {OOM_SPLITS: 2.0, DEVICE_ERRORS: 0.0})
    after = MetricsSnapshot(frozenset({OOM_SPLITS, DEVICE_ERRORS}), {OOM_SPLITS: 5.0, DEVICE_ERRORS: 0.0})
    oom, device = counter_checks(before, after, t)
    assert (oom.status, oom.measured, device.status) == ("fail", "3 during the soak", "pass")
    assert [c.status for c in counter_checks(None, None, t)] == ["warn", "warn"]
    start = InfoSnapshot(pid=7, started_unix_s=100.0, dimension=384, model="m")
    assert restart_check(start, start, t).status == "pass"
    restarted = restart_check(start, InfoSnapshot(pid=8, started_unix_s=200.0, dimension=384, model="m"), t)
    assert restarted.status == "fail" and "pid 7 -> 8" in restarted.measured
    assert restart_check(start, InfoSnapshot(pid=8, started_unix_s=200.0, dimension=None, model=None),
                         VerifyThresholds(max_restarts=1)).status == "pass"  # fmt: skip


def _telemetry(tmp_path: Path, temps: list[float], clocks: list[float]) -> RunFolder:
    folder = new_run_folder(tmp_path, "soak", "throttle")
    rows = []
    for second, (temp, clock) in enumerate(zip(temps, clocks, strict=True)):
        rows.append((1000.0 + second, "h", "npu_smi", "npu0.chip0", "temp_c", temp))
        rows.append((1000.0 + second, "h", "npu_smi", "npu0.chip0", "clock_mhz", clock))
        rows.append((1000.0 + second, "h", "psutil", "cpu", "cpu_util_pct", 50.0))
    table = pa.Table.from_pylist(
        [dict(zip(TELEMETRY_SCHEMA.names, r, strict=True)) for r in rows], schema=TELEMETRY_SCHEMA
    )
    write_telemetry_parquet(folder, table)
    return folder


def test_throttling_is_a_falling_clock_while_the_temperature_rises(tmp_path: Path) -> None:
    hot = _telemetry(tmp_path / "hot", [70.0] * 4 + [78.0] * 4 + [84.0] * 4, [1800.0] * 8 + [1600.0] * 4)
    check = throttling_check(hot, temp_rise_c=5.0, clock_drop_pct=5.0)
    assert check is not None and check.status == "fail", check
    assert "temperature +14.0 C, clock -11.1%" in check.measured
    warm = _telemetry(tmp_path / "warm", [70.0] * 4 + [78.0] * 8, [1800.0] * 12)  # hot but the clock holds
    steady = throttling_check(warm, 5.0, 5.0)
    assert steady is not None and steady.status == "pass"
    short = _telemetry(tmp_path / "short", [70.0, 90.0], [1800.0, 1000.0])  # too few seconds to judge
    assert throttling_check(short, 5.0, 5.0) is None


def test_precision_gate_and_the_strict_bar() -> None:
    texts = ["a", "b", "c", "d"]
    standard = VerifyThresholds()
    close = precision_checks(np.array([0.996, 0.994, 0.995, 0.995]), texts, standard)[0]
    assert [(c.name, c.status) for c in close] == [
        ("mean cosine to fp32", "pass"),
        ("strict-use cosine", "warn"),
    ]
    strict = precision_checks(
        np.array([0.996, 0.994, 0.995, 0.995]), texts, VerifyThresholds(strict_action="fail")
    )[0]
    assert [c.status for c in strict] == ["pass", "fail"]
    far, evidence = precision_checks(np.array([0.99, 0.97, 0.96, 0.98]), texts, standard)
    assert [(c.name, c.status) for c in far] == [("mean cosine to fp32", "fail")]
    assert far[0].measured == "0.975000 over 4 texts" and evidence["worst texts"].startswith("0.9600 'c'")
    same = precision_checks(np.ones(4), texts, standard)[0]
    assert [c.status for c in same] == ["pass", "pass"]
