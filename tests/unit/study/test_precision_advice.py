"""The int8 advice's torch-free parts: the exclusion expression, the probe set, the bisection.

The module swap needs torch: tests/integration/study/test_precision_advice.py checks it."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from study.precision.advice_plan import VariantCheck, exclusion_regex, fewest_kept, probe_indexes

ROLES = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)
NAMES = [f"encoder.layer.{i}.{role}" for i in range(12) for role in ROLES] + ["pooler.dense"]


@pytest.mark.parametrize(
    "kept",
    [
        ["encoder.layer.0.output.dense"],
        [
            "encoder.layer.1.output.dense",
            "encoder.layer.11.output.dense",
            "encoder.layer.3.intermediate.dense",
        ],
        ["encoder.layer.2.attention.output.dense", "pooler.dense", "encoder.layer.10.attention.self.value"],
    ],
)
def test_the_expression_keeps_exactly_the_chosen_layers(kept: list[str]) -> None:
    expression = exclusion_regex(kept, NAMES)
    # The service keeps a Linear in fp32 when the expression *searches* into its name.
    assert {name for name in NAMES if re.search(expression, name)} == set(kept)


def test_layer_indexes_of_one_role_fold_into_one_alternative() -> None:
    kept = [f"encoder.layer.{i}.output.dense" for i in (0, 1, 2, 10)]
    assert exclusion_regex(kept, NAMES) == r"^encoder\.layer\.(?:0|1|2|10)\.output\.dense$"


def test_probe_takes_every_group_before_a_second_of_any() -> None:
    groups = ["a"] * 10 + ["b"] * 2 + ["c"]
    assert probe_indexes(groups, limit=3) == [0, 10, 12]
    assert probe_indexes(groups, limit=6) == [0, 1, 2, 10, 11, 12]
    assert probe_indexes(groups, limit=100) == list(range(13))


def _check_passing_from(threshold: int, calls: list[int]) -> Callable[[int], VariantCheck]:
    def check(m: int) -> VariantCheck:
        calls.append(m)
        failures = [] if m >= threshold else [f"{m} is too few"]
        return VariantCheck(
            kept_fp32=m, cosine_mean=0.98 + m / 1000, topk=10, topk_agreement_mean=0.9, failures=failures
        )

    return check


def test_bisection_finds_the_fewest_kept_and_the_failure_one_below() -> None:
    calls: list[int] = []
    passing, one_fewer = fewest_kept(37, _check_passing_from(12, calls))
    assert passing is not None and passing.kept_fp32 == 12 and passing.passed
    assert one_fewer.kept_fp32 == 11 and not one_fewer.passed
    assert len(calls) <= 8 and 37 not in calls  # logarithmic; keeping every layer (fp32) is never run


def test_full_int8_passing_needs_nothing_kept() -> None:
    passing, one_fewer = fewest_kept(37, _check_passing_from(0, []))
    assert passing is not None and passing.kept_fp32 == 0 and one_fewer is passing


def test_when_only_fp32_passes_there_is_no_advice() -> None:
    passing, best_tried = fewest_kept(37, _check_passing_from(37, []))
    assert passing is None and best_tried.kept_fp32 == 36

