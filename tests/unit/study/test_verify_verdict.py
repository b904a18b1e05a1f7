"""The four-layer verdict: layers run in order, the first failure stops the rest, one exit code per outcome."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from embedperf.errors import TargetError
from study.verify.thresholds import VerifyThresholds
from study.verify.verdict import (
    EXIT_CODES,
    Check,
    Layer,
    LayerResult,
    build_result,
    judged,
    layer_status,
    run_layers,
    verdict,
)

PASS = Check(name="p", status="pass", measured="fine")
WARN = Check(name="w", status="warn", measured="not measured", note="look here")
FAIL = Check(name="f", status="fail", measured="0.97", limit=">= 0.99")


def _layers(outcomes: dict[int, list[Check] | Exception], calls: list[int]) -> list[Layer]:
    def runner(number: int) -> Callable[[], LayerResult]:
        def run() -> LayerResult:
            calls.append(number)
            outcome = outcomes[number]
            if isinstance(outcome, Exception):
                raise outcome
            return judged(number, outcome)

        return run

    # given out of order: run_layers sorts them
    return [Layer(n, runner(n)) for n in sorted(outcomes, reverse=True)]


def test_layers_run_in_order_and_the_first_failure_stops_the_rest() -> None:
    calls: list[int] = []
    results = run_layers(_layers({1: [PASS], 2: [PASS, FAIL], 3: [PASS], 4: [PASS]}, calls), (1, 2, 3, 4))
    assert calls == [1, 2]
    assert [r.status for r in results] == ["pass", "fail", "not_run", "not_run"]
    assert results[2].reason == "layer 2 is fail" and results[3].reason == "layer 2 is fail"
    assert verdict(results) == "fail"


def test_a_warning_passes_and_every_layer_runs() -> None:
    calls: list[int] = []
    results = run_layers(_layers({1: [PASS, WARN], 2: [PASS], 3: [WARN], 4: [PASS]}, calls), (1, 2, 3, 4))
    assert calls == [1, 2, 3, 4]
    assert [r.status for r in results] == ["warn", "pass", "warn", "pass"]
    result = build_result("http://t", 0.0, 1.0, VerifyThresholds(), results, [])
    assert (result.verdict, result.exit_code) == ("pass", 0)
    assert result.headline == "PASS: every layer passed (2 with warnings)"


def test_an_error_inside_a_layer_leaves_it_incomplete_and_stops_the_rest() -> None:
    calls: list[int] = []
    outcomes: dict[int, list[Check] | Exception] = {
        1: [PASS],
        2: TargetError("the run measured nothing"),
        3: [PASS],
        4: [PASS],
    }
    results = run_layers(_layers(outcomes, calls), (1, 2, 3, 4))
    assert calls == [1, 2]
    assert [r.status for r in results] == ["pass", "incomplete", "not_run", "not_run"]
    assert results[1].reason == "the run measured nothing"
    result = build_result("http://t", 0.0, 1.0, VerifyThresholds(), results, [])
    assert (result.verdict, result.exit_code) == ("incomplete", 3)
    assert result.headline == "INCOMPLETE: layer 2 incomplete, 3 not run, 4 not run"


def test_skipped_layers_are_not_called_and_the_verdict_is_incomplete() -> None:
    calls: list[int] = []
    results = run_layers(_layers({1: [PASS], 2: [PASS], 3: [PASS], 4: [PASS]}, calls), (1, 4))
    assert calls == [1, 4]
    assert [r.status for r in results] == ["pass", "skipped", "skipped", "pass"]
    assert verdict(results) == "incomplete"
    # a failure among the selected layers still decides the verdict
    failed = run_layers(_layers({1: [PASS], 2: [PASS], 3: [PASS], 4: [FAIL]}, []), (4,))
    assert verdict(failed) == "fail"


@pytest.mark.parametrize(
    ("checks", "status"),
    [([PASS], "pass"), ([PASS, WARN], "warn"), ([WARN, FAIL, PASS], "fail"), ([], "incomplete")],
)
def test_layer_status_from_its_checks(checks: list[Check], status: str) -> None:
    assert layer_status(checks) == status


def test_exit_codes_and_the_layer_line_names_the_failures() -> None:
    assert EXIT_CODES == {"pass": 0, "fail": 1, "incomplete": 3}
    layer = judged(1, [PASS, WARN, FAIL])
    assert layer.line == "layer 1 (function and precision): FAIL: f: 0.97 (limit >= 0.99)"
    assert judged(3, [PASS, WARN]).line == "layer 3 (stability): WARN: w: not measured; look here"
    assert judged(2, [PASS, PASS]).line == "layer 2 (performance and utilisation): PASS: 2 checks passed"
