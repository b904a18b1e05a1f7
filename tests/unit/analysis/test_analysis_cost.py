"""Cost per million embeddings and tokens per step, the plan's monthly cost, and no cost without prices."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from analysis.cli.capacity import main as capacity_main
from analysis.compare.changes import compare_runs
from analysis.compare.cost_change import COST_METRIC
from analysis.compare.gate import parse_gate
from analysis.run.analyse import analyse_folder
from analysis.run.summary import write_analysis
from embedperf.schema import RunFolder, StageRecord
from reports.compare_build import build_comparison
from scenarios.cost_models import HOURS_PER_MONTH, Cost
from tests.golden.builders import T0_UNIX_S, ok_row, scenario_for_stages, write_run

STEP_S = 20.0
POWER_W = 250.0
INPUTS = 4
TOKENS = 32


def priced_run(
    root: Path, cost: dict[str, Any] | None, target_qps: float | None = 1000.0, slower: int = 1
) -> RunFolder:
    """Two closed-loop steps on one GPU (250 W measured): 10 and 40 ok requests/s, 4 inputs each."""
    stages, rows, telemetry = [], [], []
    for i, (users, qps) in enumerate(((1, 10 // slower), (4, 40 // slower))):
        start = T0_UNIX_S + i * STEP_S
        stages.append(StageRecord(index=i, label=f"users={users}", users=users, start_unix_s=start,
                                  end_unix_s=start + STEP_S, warmup_s=0.0))  # fmt: skip
        n = int(qps * STEP_S)
        rows += [
            ok_row(i, start + (k + 0.5) / qps, 20.0, users=users, n_inputs=INPUTS, input_tokens=TOKENS)
            for k in range(n)
        ]
    for s in range(int(2 * STEP_S) + 1):
        ts = T0_UNIX_S + s
        telemetry += [(ts, "nvml", "gpu0", "power_w", POWER_W), (ts, "nvml", "gpu0", "device_util_pct", 80.0)]
    fields: dict[str, Any] = {"slo": {"p99_ms": 100.0, "target_qps": target_qps}}
    if cost is not None:
        fields["cost"] = cost
    scenario = scenario_for_stages(stages, **fields)
    info = {"model": "m", "device": "cuda:0", "devices": [{"kind": "cuda", "index": 0}]}
    return write_run(root, rows, telemetry, stages, scenario=scenario, service_info=info)


PRICES = {"device_hour": {"cuda": 3.0, "npu": 2.5}, "host_hour": 0.5, "energy_kwh": 0.2, "currency": "EUR"}


def test_every_step_is_costed_per_million_embeddings_and_tokens(tmp_path: Path) -> None:
    summary = analyse_folder(priced_run(tmp_path / "run", PRICES)).summary
    cost = summary.cost
    assert cost is not None and cost.device_kind == "cuda" and cost.devices == 1
    hourly = 3.0 + 0.5 + POWER_W / 1000.0 * 0.2
    for step, qps in zip(cost.steps, (10.0, 40.0), strict=True):
        assert step.hourly == pytest.approx(hourly)
        assert step.embeddings_per_s == pytest.approx(qps * INPUTS, rel=0.01)
        assert step.per_1m_embeddings == pytest.approx(hourly / (qps * INPUTS * 3600.0) * 1e6, rel=0.01)
        assert step.per_1m_tokens == pytest.approx(hourly / (qps * TOKENS * 3600.0) * 1e6, rel=0.01)
    assert cost.steps[1].per_1m_embeddings < cost.steps[0].per_1m_embeddings  # more work, same hour


def test_the_plan_says_its_monthly_cost(tmp_path: Path) -> None:
    summary = analyse_folder(priced_run(tmp_path / "run", PRICES)).summary
    plan = summary.cost.plan if summary.cost else None
    assert plan is not None and plan.target_qps == 1000.0
    # 40 QPS at the best step, 25 % headroom: 30 usable per replica -> 34 replicas of one device
    assert (plan.replicas, plan.devices) == (34, 34)
    energy = POWER_W / 40.0 * 1000.0 * HOURS_PER_MONTH * 3600.0 / 3.6e6 * 0.2
    assert plan.monthly_energy == pytest.approx(energy, rel=0.01)
    assert plan.monthly == pytest.approx(
        34 * 3.0 * HOURS_PER_MONTH + 34 * 0.5 * HOURS_PER_MONTH + energy, rel=0.01
    )


def test_no_price_no_cost_anywhere(tmp_path: Path) -> None:
    folder = priced_run(tmp_path / "run", None)
    summary = analyse_folder(folder).summary
    assert summary.cost is None
    write_analysis(folder, summary)
    with (folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert not [c for c in header if "cost" in c]


def test_prices_recorded_in_the_run_reach_steps_csv(tmp_path: Path) -> None:
    folder = priced_run(tmp_path / "run", PRICES)
    write_analysis(folder, analyse_folder(folder).summary)
    with (folder.analysis / "steps.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["currency"] == "EUR" and float(rows[0]["cost_per_1m_embeddings"]) > 0


def test_prices_given_after_the_fact_replace_the_recorded_ones(tmp_path: Path) -> None:
    folder = priced_run(tmp_path / "run", PRICES)
    cost = analyse_folder(folder, cost=Cost(device_hour={"cuda": 6.0})).summary.cost
    assert cost is not None and cost.source == "scenario+options"
    assert cost.steps[0].device_hourly == 6.0 and cost.steps[0].host_hourly == 0.5
    assert cost.prices.currency == "EUR"
    unpriced = analyse_folder(priced_run(tmp_path / "bare", None), cost=Cost(host_hour=1.0)).summary.cost
    assert unpriced is not None and unpriced.source == "options" and unpriced.steps[0].hourly == 1.0


def test_a_device_kind_without_a_price_is_not_costed_and_says_so(tmp_path: Path) -> None:
    cost = analyse_folder(priced_run(tmp_path / "run", {"device_hour": {"npu": 2.5}})).summary.cost
    assert cost is not None
    assert all(s.hourly is None and s.per_1m_embeddings is None for s in cost.steps)
    assert cost.plan is None
    assert any("device kind cuda" in note for note in cost.notes)


def test_unknown_device_kind_is_refused_when_the_scenario_is_read() -> None:
    with pytest.raises(ValueError, match="unknown device kind 'tpu'"):
        Cost.model_validate({"device_hour": {"tpu": 1.0}})


def test_compare_shows_the_cost_change_with_its_interval(tmp_path: Path) -> None:
    base = analyse_folder(priced_run(tmp_path / "base", PRICES))
    cand = analyse_folder(priced_run(tmp_path / "cand", PRICES, slower=2))
    step = compare_runs(base, [cand], n_boot=200).candidates[0].overall
    change = step.metrics[COST_METRIC]
    assert change.rel == pytest.approx(1.0, rel=0.02)  # half the goodput: twice the cost per embedding
    assert change.ci_low is not None and change.ci_low > 0 and change.verdict == "worse"
    gate = compare_runs(base, [cand], parse_gate("cost_per_1m_embeddings:+10%"), n_boot=200).candidates[0]
    assert gate.status == "fail" and "cost_per_1m_embeddings" in gate.failures[0]
    path, _ = build_comparison(base.folder, [cand.folder], out=tmp_path / "compare.html")
    assert "Cost per 1M embeddings" in path.read_text(encoding="utf-8")
    unpriced = analyse_folder(priced_run(tmp_path / "bare", None))
    assert COST_METRIC not in compare_runs(unpriced, [cand], n_boot=50).candidates[0].overall.metrics


def test_capacity_prints_the_monthly_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = priced_run(tmp_path / "run", None)
    assert capacity_main([str(folder.root), "--cost-device-hour", "cuda=3", "--currency", "EUR"]) == 0
    out = capsys.readouterr().out
    assert (
        "per 1M embeddings" in out and "headroom (at most 34 device(s)): at most 74,460 EUR" in out
    )  # the ramp never reached its limit
