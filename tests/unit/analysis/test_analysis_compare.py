"""Comparison against golden runs: a known effect is found, no effect is not."""

from __future__ import annotations

import pytest

from analysis.compare.changes import compare_runs
from analysis.compare.gate import parse_gate
from analysis.run.analyse import analyse_folder
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
    assert result.status != "fail"
    assert cand.mismatches == []


def test_no_effect_gives_no_difference(analyses) -> None:
    result = compare_runs(
        analyses["compare_base"],
        [analyses["compare_same"]],
        parse_gate("p99_ms:+5%,qps:-3%"),
        error_budget=0.01,
    )
    overall = result.candidates[0].overall.metrics
    assert overall["qps"].verdict == "no_difference"
    assert overall["p50_ms"].verdict == "no_difference"
    assert abs(overall["qps"].rel) < 0.03
    assert result.status != "fail"


def test_reversed_effect_fails_the_gate(analyses) -> None:
    result = compare_runs(
        analyses["compare_faster"], [analyses["compare_base"]], parse_gate("p99_ms:+5%,qps:-3%")
    )
    cand = result.candidates[0]
    failed = {(g.metric, g.scope) for g in cand.gate if g.failed}
    assert cand.overall_step == "users=100"
    assert ("qps", "users=100") in failed and ("p99_ms", "users=100") in failed
    assert all(g.scope != "overall" for g in cand.gate)  # overall is a step, never a second rule scope
    assert result.status == "fail"


def test_environment_mismatch_is_reported(analyses, tmp_path) -> None:
    other = analyse_folder(golden_copy("known_percentiles", tmp_path), n_boot=50)
    result = compare_runs(analyses["compare_base"], [other])
    assert {"host", "model", "scenario"} <= set(result.candidates[0].mismatches)


def test_overall_is_the_highest_shared_load_for_every_metric(analyses) -> None:
    """The baseline's users=100 step is its peak too, so the pair of golden runs cannot tell "peak" from
    "highest load": this only checks that overall is a full copy of that step, every metric alike."""
    cand = compare_runs(analyses["compare_base"], [analyses["compare_faster"]]).candidates[0]
    top = next(s for s in cand.steps if s.label == cand.overall_step)
    assert top.base_load == max(s.base_load or 0.0 for s in cand.steps)
    assert cand.overall.metrics == top.metrics
