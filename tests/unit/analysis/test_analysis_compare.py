"""Comparison against golden runs: a known effect is found, no effect is not."""

from __future__ import annotations

import pytest

from analysis.compare import compare_runs
from analysis.gate import parse_gate
from analysis.summary import analyse_folder
from tests.golden.fixtures import golden_copy


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("cmp")
    return {
        name: analyse_folder(golden_copy(name, root), n_boot=300)
        for name in ("compare_base", "compare_faster", "compare_same")
    }


def test_known_effect_is_significant(analyses) -> None:
    result = compare_runs(
        analyses["compare_base"],
        [analyses["compare_faster"]],
        parse_gate("p99_ms:+5%,qps:-3%"),
        error_budget=0.01,
    )
    cand = result.candidates[0]
    assert [s.index for s in cand.steps] == [0, 1, 2, 3]
    for scope in [*cand.steps, cand.overall]:
        qps = scope.metrics["qps"]
        assert qps.verdict == "better"
        assert qps.rel == pytest.approx(1 / 0.7 - 1, abs=0.08)
        assert qps.ci_low is not None and qps.ci_low > 0
    assert cand.overall.metrics["p99_ms"].verdict == "better"
    assert cand.overall.metrics["p99_ms"].rel == pytest.approx(-0.3, abs=0.12)
    assert not result.gate_failed
    assert cand.mismatches == []


def test_no_effect_gives_no_significant_difference(analyses) -> None:
    result = compare_runs(
        analyses["compare_base"],
        [analyses["compare_same"]],
        parse_gate("p99_ms:+5%,qps:-3%"),
        error_budget=0.01,
    )
    overall = result.candidates[0].overall.metrics
    assert overall["qps"].verdict == "no_sig"
    assert overall["p50_ms"].verdict == "no_sig"
    assert abs(overall["qps"].rel) < 0.03
    assert not result.gate_failed


def test_reversed_effect_fails_the_gate(analyses) -> None:
    result = compare_runs(
        analyses["compare_faster"], [analyses["compare_base"]], parse_gate("p99_ms:+5%,qps:-3%")
    )
    failed = {(g.metric, g.scope) for g in result.candidates[0].gate if g.failed}
    assert ("qps", "overall") in failed and ("p99_ms", "overall") in failed
    assert result.gate_failed


def test_environment_mismatch_is_reported(analyses, tmp_path) -> None:
    other = analyse_folder(golden_copy("known_percentiles", tmp_path), n_boot=50)
    result = compare_runs(analyses["compare_base"], [other])
    assert {"host", "model", "scenario"} <= set(result.candidates[0].mismatches)


def test_overall_latency_is_compared_at_the_baselines_peak_step(analyses) -> None:
    base = analyses["compare_base"]
    cand = compare_runs(base, [analyses["compare_faster"]]).candidates[0]
    peak = max(base.summary.steps, key=lambda st: st.stats.qps).stats.index
    at_peak = next(s for s in cand.steps if s.index == peak)
    for metric in ("p50_ms", "p95_ms", "p99_ms"):
        assert cand.overall.metrics[metric].base == at_peak.metrics[metric].base
        assert cand.overall.metrics[metric].cand == at_peak.metrics[metric].cand
    # QPS stays each run's peak, errors stay pooled over every step.
    assert cand.overall.metrics["qps"].base == pytest.approx(max(s.stats.qps for s in base.summary.steps))
