"""Every command's verdict comes from one vocabulary, and every path keeps "cannot judge" (no_verdict)
apart from "judged, nothing changed" (no_difference)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.compare.changes import LOWER_IS_BETTER, _change
from analysis.compare.gate import evaluate_gate, parse_gate
from analysis.compare.model import StepComparison
from analysis.compare.reasons import Reason, reason
from analysis.run.summary import _slo_verdict
from decisions.canary_verdict import final_verdict
from decisions.search.stats import ProbeMeasurement, judge
from embedperf.verdicts import change_verdict
from reports.i18n import CATALOGUE, VERDICT_TEXT
from scenarios.canary_models import Canary
from scenarios.models import Search, Slo
from study.matrix.report import merge_verdicts


def test_an_interval_that_excludes_zero_is_never_no_difference() -> None:
    assert change_verdict(-71.0, -54.2, lower_is_better=False) == "worse"
    assert change_verdict(359.9, 551.8, lower_is_better=True) == "worse"
    assert change_verdict(-3.0, 4.0, lower_is_better=True) == "no_difference"
    assert change_verdict(None, None, lower_is_better=True) == "no_verdict"
    # too few samples: no verdict, whatever the interval says
    assert change_verdict(-71.0, -54.2, lower_is_better=False, unsupported=True) == "no_verdict"
    assert change_verdict(-3.0, 4.0, lower_is_better=False, unsupported=True) == "no_verdict"


def test_compare_change_too_short_is_no_verdict_and_noise_is_no_difference() -> None:
    short = _change("qps", 70.7, 7.0, (-71.0, -54.2), reason("short_steady", have=4.6, need=10))
    assert short.verdict == "no_verdict" and short.warning == "4.6 s of steady state < 10 needed"
    noise = _change("p99_ms", 100.0, 101.0, (-2.0, 4.0))
    assert noise.verdict == "no_difference"
    no_interval = _change("p99_ms", 100.0, None, (None, None))
    assert no_interval.verdict == "no_verdict"
    assert set(LOWER_IS_BETTER) >= {"qps", "p99_ms", "error_rate"}


def _step(change_ci: tuple[float, float], why: Reason | None) -> StepComparison:
    change = _change("p99_ms", 100.0, 200.0, change_ci, why)
    return StepComparison(
        index=0, label="u10", base_load=10.0, cand_load=10.0, metrics={"p99_ms": change}, base_n_ok=500,
        cand_n_ok=500,
    )  # fmt: skip


def test_gate_rule_has_no_verdict_where_the_change_has_none_and_passes_on_no_difference() -> None:
    rules = parse_gate("p99_ms:+5%")
    (undecided,) = evaluate_gate(
        rules, [_step((50.0, 150.0), reason("few_ok", have=40, need=100, q=99.0))], [], 0.01
    )
    assert undecided.status == "no_verdict"
    (noise,) = evaluate_gate(rules, [_step((-20.0, 150.0), None)], [], 0.01)
    assert noise.status == "pass" and "includes zero" in noise.reason
    (regressed,) = evaluate_gate(rules, [_step((50.0, 150.0), None)], [], 0.01)
    assert regressed.status == "fail"


def _probe(ok_latency_ms: list[float], scheduled: int) -> ProbeMeasurement:
    n = len(ok_latency_ms)
    return ProbeMeasurement(
        rate=10.0,
        duration_s=10.0,
        scheduled=scheduled,
        ok=n,
        errors=0,
        ok_done=n,
        ok_latency_ms=ok_latency_ms,
    )


def test_search_probe_without_ok_answers_has_no_verdict_and_a_straddle_is_uncertain() -> None:
    slo, spec = Slo(p99_ms=100.0, error_budget_pct=1.0), Search(enabled=True)
    assert judge(_probe([], 0), slo, spec)[0] == "no_verdict"
    rng = np.random.default_rng(1)
    straddling = list(rng.uniform(10.0, 99.0, 380)) + [100.5] * 4
    assert judge(_probe(straddling, len(straddling)), slo, spec)[0] == "uncertain"


def test_capacity_without_an_slo_has_no_verdict() -> None:
    assert _slo_verdict([True, False], None) == "no_verdict"
    assert _slo_verdict([], 100.0) == "no_verdict"
    assert _slo_verdict([True, False], 100.0) == "partial"


def test_canary_too_thin_to_judge_has_no_verdict() -> None:
    assert final_verdict([], Canary(enabled=True)).status == "no_verdict"


def test_matrix_repeats_that_disagree_or_cannot_judge_give_no_verdict() -> None:
    noise = _change("qps", 1.0, 1.0, (-0.1, 0.1))
    better = _change("qps", 1.0, 2.0, (0.5, 1.5))
    assert merge_verdicts([noise, noise]) == "no_difference"
    assert merge_verdicts([noise, better]) == "no_verdict"


@pytest.mark.parametrize("lang", [0, 1])
def test_the_two_words_read_differently_in_both_languages(lang: int) -> None:
    assert VERDICT_TEXT["no_verdict"][lang] != VERDICT_TEXT["no_difference"][lang]
    # the reports read the same texts as the vocabulary
    for word in ("better", "worse", "no_difference", "no_verdict"):
        assert CATALOGUE[word][lang] == VERDICT_TEXT[word][lang]
    assert "no_sig" not in CATALOGUE
