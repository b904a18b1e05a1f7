"""The gate on hostile inputs: a dead target, steps too short for the statistic, loads that differ."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.compare.changes import MIN_QPS_SECONDS, compare_runs, min_samples_for
from analysis.compare.gate import parse_gate
from analysis.figures.bootstrap import interval, resampled_ratios, rng_for
from analysis.run.analyse import analyse_folder
from tests.golden.builders import stepped_run

GATE = "qps:-3%,p99_ms:+50%"
LOADS = [1, 5, 10]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("gate")
    return {
        "healthy": analyse_folder(stepped_run(root / "healthy", LOADS, 30.0, seed=1), n_boot=300),
        "healthy2": analyse_folder(stepped_run(root / "healthy2", LOADS, 30.0, seed=2), n_boot=300),
        "dead": analyse_folder(
            stepped_run(root / "dead", LOADS, 30.0, qps_per_user=300.0, refused=True), n_boot=300
        ),
        "short": analyse_folder(stepped_run(root / "short", LOADS, 5.0, seed=3), n_boot=300),
        "short2": analyse_folder(
            stepped_run(root / "short2", LOADS, 5.0, seed=4, latency_ms=30.0), n_boot=300
        ),
        "short3": analyse_folder(stepped_run(root / "short3", LOADS, 5.0, seed=6), n_boot=300),
        "smoke": analyse_folder(stepped_run(root / "smoke", [5, 1], 30.0, seed=5), n_boot=300),
    }


def test_dead_target_fails_whatever_its_speed(runs) -> None:
    """Every request refused at 300 req/s/user: never a speed-up, a one-line reason with the numbers."""
    result = compare_runs(runs["healthy"], [runs["dead"]], parse_gate(GATE))
    cand = result.candidates[0]
    assert cand.status == "fail" and result.status == "fail"
    assert cand.overall.metrics["qps"].cand == 0.0  # goodput, not failed requests per second
    assert cand.overall.metrics["qps"].verdict == "worse"
    budget = [g for g in cand.gate if g.rule.startswith("error_budget:") and g.failed]
    assert {g.scope for g in budget} == {"users=1", "users=5", "users=10"}
    # the speed rules have nothing to judge where no request succeeded: one failure per step, the budget's
    assert len(cand.failures) == len(LOADS)
    assert all(g.status == "no_verdict" for g in cand.gate if not g.rule.startswith("error_budget:"))
    line = next(g.line for g in budget if g.scope == "users=10")
    assert "\n" not in line
    assert "100.000%" in line and "budget 1.000%" in line and "requests failed" in line


def test_error_budget_holds_without_any_gate_rule(runs) -> None:
    result = compare_runs(runs["healthy"], [runs["dead"]])
    assert result.status == "fail"
    assert all(g.metric == "error_rate" for g in result.candidates[0].gate)


def test_a_failing_speed_rule_quotes_baseline_candidate_change_interval_and_rule(runs) -> None:
    result = compare_runs(runs["healthy"], [runs["short2"]], parse_gate("p50_ms:+5%"))
    failed = [g for g in result.candidates[0].gate if g.failed]
    assert failed, [g.line for g in result.candidates[0].gate]
    line = failed[0].line
    for part in ("baseline ", "candidate ", "change +", "95% CI of the difference", "rule p50_ms:+5%"):
        assert part in line, line


def test_healthy_runs_pass(runs) -> None:
    result = compare_runs(runs["healthy"], [runs["healthy2"]], parse_gate(GATE))
    cand = result.candidates[0]
    assert cand.unmatched == []
    assert cand.status == "pass", [g.line for g in cand.gate if g.status != "pass"]


def test_short_steps_give_no_verdict(runs) -> None:
    """5 s steps: too few seconds for a goodput interval and too few ok samples for P99 -> no verdict."""
    result = compare_runs(runs["short"], [runs["short3"]], parse_gate("qps:-3%,p99_ms:+5%"))
    cand = result.candidates[0]
    assert cand.status == "no_verdict"
    qps = cand.overall.metrics["qps"]
    assert qps.verdict == "no_verdict" and qps.warning and f"< {MIN_QPS_SECONDS} needed" in qps.warning
    p99_u1 = cand.steps[0].metrics["p99_ms"]
    assert p99_u1.warning and "ok samples for P99" in p99_u1.warning
    assert any("no verdict" in g.reason for g in cand.gate if g.status == "no_verdict")
    assert cand.warnings


def test_steps_are_matched_by_load_not_position(runs) -> None:
    result = compare_runs(runs["healthy"], [runs["smoke"]], parse_gate(GATE))
    cand = result.candidates[0]
    assert [(s.label, s.base_load, s.cand_load) for s in cand.steps] == [
        ("users=1", 1.0, 1.0),
        ("users=5", 5.0, 5.0),
    ]
    assert cand.unmatched == ["baseline step users=10 has no candidate step at the same load"]
    assert cand.status == "no_verdict"
    assert cand.overall_step == "users=5"  # the highest load both runs share
    assert cand.no_verdict_reasons[0] == cand.unmatched[0]
    # without --gate too: loads that do not match are never a pass
    assert compare_runs(runs["healthy"], [runs["smoke"]]).status == "no_verdict"


def test_goodput_interval_is_centred_on_the_estimate() -> None:
    """The old interval counted whole seconds only: 5.0 ... 5.0 around 7.4. Resampling (count, width)
    pairs of every second, the last partial one included, keeps the estimate inside its interval."""
    ts = np.linspace(0.0, 3.7, 28, endpoint=False)
    counts, widths = np.bincount(np.floor(ts).astype(int)).astype(float), np.r_[np.ones(3), 0.7]
    assert counts.sum() == 28 and widths.sum() == pytest.approx(3.7)
    point = counts.sum() / widths.sum()
    low, high = interval(resampled_ratios(counts, widths, 500, rng_for(0)))
    assert low is not None and high is not None and low <= point <= high


def test_minimum_samples_per_percentile() -> None:
    assert (min_samples_for(99.0), min_samples_for(95.0), min_samples_for(50.0)) == (100, 20, 2)
