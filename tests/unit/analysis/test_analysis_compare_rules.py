"""Compare beyond closed-loop latency: open-loop steps matched by their rate, and the device, service CPU
and device memory rules judged on each step's telemetry.

Run folders are built through the writers (tests/golden/builders.py), as a load run leaves them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from analysis.compare.changes import compare_runs
from analysis.compare.gate import parse_gate
from analysis.run.analyse import analyse_folder
from analysis.run.summary import RunAnalysis
from embedperf.schema import RunFolder, StageRecord
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run

STEP_S = 20.0  # long enough for a goodput interval and for the telemetry means (>= 10 s, >= 5 samples)
LATENCY_MS = 20.0
DEVICE = "npu0.chip0"
BASE_TELEMETRY = {"device_util_pct": 50.0, "service_cpu_pct": 100.0, "mem_used_mb": 1000.0}
TELEMETRY_RULES = "device_util_pct:+5%,service_cpu_pct:+10%,mem_used_mb:+100"
N_BOOT = 500  # resamples per interval: the changes here are far outside the noise


def open_loop_run(root: Path, rates: list[float], seed: int) -> RunFolder:
    """One open-loop stage per rate, STEP_S each with 1 s warm-up; arrivals on the schedule, ok answers."""
    rng = np.random.default_rng(seed)
    stages, rows = [], []
    for i, rate in enumerate(rates):
        start = T0_UNIX_S + i * STEP_S
        stages.append(
            StageRecord(
                index=i,
                label=f"r{rate:g}",
                rate=rate,
                start_unix_s=start,
                end_unix_s=start + STEP_S,
                warmup_s=1.0,
            )
        )
        for t in start + np.arange(int(rate * STEP_S)) / rate:
            latency_ms = LATENCY_MS * float(rng.uniform(0.8, 1.2))
            rows.append(
                ok_row(
                    i,
                    float(t),
                    latency_ms,
                    users=0,
                    stage_label=f"r{rate:g}",
                    target_users=None,
                    target_rate=rate,
                )
            )
    scenario = scenario_for_stages(stages, kind="openloop", slo={"p99_ms": 995.0, "error_budget_pct": 1.0})
    return write_run(root, rows, [], stages, scenario=scenario, kind="open_loop")


def closed_loop_run(root: Path, users: list[int], seed: int, telemetry: dict[str, float] | None) -> RunFolder:
    """One closed-loop stage per entry of users (10 ok req/s per user) and 1 Hz telemetry around the given
    means: the serving device's utilisation and memory, the service process's CPU (None: no collectors)."""
    rng = np.random.default_rng(seed)
    stages, rows, samples = [], [], []
    for i, u in enumerate(users):
        start = T0_UNIX_S + i * STEP_S
        stages.append(
            StageRecord(
                index=i,
                label=f"users={u}",
                users=u,
                start_unix_s=start,
                end_unix_s=start + STEP_S,
                warmup_s=1.0,
            )
        )
        for t in np.sort(rng.uniform(start, start + STEP_S, int(10 * u * STEP_S))):
            rows.append(ok_row(i, float(t), LATENCY_MS * float(rng.uniform(0.8, 1.2)), users=u))
    means = telemetry or {}
    for s in range(int(len(users) * STEP_S) if means else 0):
        ts = T0_UNIX_S + s + 0.5
        noise = rng.normal(0.0, 1.0, 3)  # a constant series has a zero-width interval: never a verdict
        samples += [
            (ts, "npu_smi", DEVICE, "device_util_pct", means["device_util_pct"] + noise[0]),
            (ts, "npu_smi", DEVICE, "mem_used_mb", means["mem_used_mb"] + noise[1]),
            (ts, "npu_smi", DEVICE, "mem_total_mb", 4000.0),
            (ts, "psutil", "proc:service", "cpu_util_pct", means["service_cpu_pct"] + noise[2]),
        ]
    return write_run(root, rows, samples, stages)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunAnalysis]:
    root = tmp_path_factory.mktemp("rules")
    heavier = {"device_util_pct": 60.0, "service_cpu_pct": 130.0, "mem_used_mb": 1300.0}
    folders = {
        "open_base": open_loop_run(root / "open_base", [50.0, 100.0, 200.0], seed=1),
        "open_cand": open_loop_run(root / "open_cand", [200.0, 100.0, 400.0], seed=2),
        "closed_10": closed_loop_run(root / "closed_10", [10], seed=3, telemetry=BASE_TELEMETRY),
        "tele_base": closed_loop_run(root / "tele_base", [1, 5], seed=4, telemetry=BASE_TELEMETRY),
        "tele_same": closed_loop_run(root / "tele_same", [1, 5], seed=5, telemetry=BASE_TELEMETRY),
        "tele_heavier": closed_loop_run(root / "tele_heavier", [1, 5], seed=6, telemetry=heavier),
    }
    return {name: analyse_folder(folder, n_boot=100) for name, folder in folders.items()}


def test_open_loop_steps_are_matched_by_rate_not_position(runs: dict[str, RunAnalysis]) -> None:
    cand = compare_runs(
        runs["open_base"], [runs["open_cand"]], parse_gate("p99_ms:+50%"), n_boot=N_BOOT
    ).candidates[0]
    assert [(s.label, s.base_load, s.cand_load) for s in cand.steps] == [
        ("r100", 100.0, 100.0),
        ("r200", 200.0, 200.0),
    ]
    # the candidate's r200 is its first step and r100 its second: matched by rate, whatever the order
    assert [s.cand_index for s in cand.steps] == [1, 0]
    assert cand.unmatched == [
        "baseline step r50 has no candidate step at the same load",
        "candidate step r400 has no baseline step at the same load",
    ]
    assert cand.overall_step == "r200"  # the highest rate both runs share
    qps = cand.overall.metrics["qps"]
    assert qps.base == pytest.approx(200.0, rel=0.01) and qps.cand == pytest.approx(200.0, rel=0.01)
    assert cand.status == "no_verdict"  # a step left unpaired is never a pass


def test_a_rate_never_matches_the_same_number_of_users(runs: dict[str, RunAnalysis]) -> None:
    """rate=10 req/s and users=10 are different loads, though both are "10"."""
    base = runs["closed_10"]
    open_10 = analyse_folder(open_loop_run(base.folder.root.parent / "open_10", [10.0], seed=7), n_boot=100)
    cand = compare_runs(base, [open_10], n_boot=N_BOOT).candidates[0]
    assert cand.steps == [] and len(cand.unmatched) == 2
    assert cand.status == "no_verdict"


def test_device_cpu_and_memory_rules_fail_where_the_candidate_uses_more(runs: dict[str, RunAnalysis]) -> None:
    result = compare_runs(
        runs["tele_base"], [runs["tele_heavier"]], parse_gate(TELEMETRY_RULES), n_boot=N_BOOT
    )
    cand = result.candidates[0]
    failed = {(g.metric, g.scope) for g in cand.gate if g.failed}
    assert failed == {(m, s) for m in BASE_TELEMETRY for s in ("users=1", "users=5")}
    assert result.status == "fail" and cand.status == "fail"
    top = cand.overall.metrics
    assert (
        top["device_util_pct"].rel == pytest.approx(0.2, abs=0.03)
        and top["device_util_pct"].verdict == "worse"
    )
    assert top["service_cpu_pct"].diff == pytest.approx(30.0, abs=3.0)
    assert top["mem_used_mb"].diff == pytest.approx(300.0, abs=3.0)
    line = next(g.line for g in cand.gate if g.metric == "mem_used_mb" and g.failed)
    assert re.search(r"baseline [\d,.]+ MB, candidate [\d,.]+ MB, change \+(29|30|31)\.\d%", line), line
    assert line.endswith("rule mem_used_mb:+100")


def test_device_cpu_and_memory_rules_pass_when_the_telemetry_is_the_same(
    runs: dict[str, RunAnalysis],
) -> None:
    cand = compare_runs(
        runs["tele_base"], [runs["tele_same"]], parse_gate(TELEMETRY_RULES), n_boot=N_BOOT
    ).candidates[0]
    telemetry_results = [g for g in cand.gate if g.metric in BASE_TELEMETRY]
    assert len(telemetry_results) == 3 * 2  # every rule at every shared step
    assert all(g.status == "pass" for g in telemetry_results), [g.line for g in telemetry_results]
    assert cand.status == "pass"


def test_a_resource_rule_without_telemetry_in_one_run_has_no_verdict(runs: dict[str, RunAnalysis]) -> None:
    """A candidate run without collectors cannot pass (or fail) a device rule."""
    bare = analyse_folder(
        closed_loop_run(runs["tele_base"].folder.root.parent / "bare", [1, 5], seed=8, telemetry=None),
        n_boot=100,
    )
    cand = compare_runs(
        runs["tele_base"], [bare], parse_gate("device_util_pct:+5%"), n_boot=N_BOOT
    ).candidates[0]
    device = [g for g in cand.gate if g.metric == "device_util_pct"]
    assert device and all(
        g.status == "no_verdict" and "not measured in both runs" in g.reason for g in device
    )
    assert cand.status == "no_verdict"
