"""A canary's per-request split: seeded side draws at the stage's weight, and the agreement of two answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loadgen.traffic.canary_split import SideDraw, agreement_cosine
from loadgen.traffic.protocols import registry


def _answer(*vectors: list[float]) -> bytes:
    return json.dumps({"data": [{"embedding": v, "index": i} for i, v in enumerate(vectors)]}).encode()


@pytest.mark.parametrize("weight", [5.0, 20.0, 50.0])
def test_each_request_goes_to_the_candidate_with_the_stage_weight(weight: float) -> None:
    draw = SideDraw(seed=0, user_index=3)
    n = 20_000
    share = sum(draw.side(weight) == "candidate" for _ in range(n)) / n
    sd = np.sqrt(weight / 100 * (1 - weight / 100) / n)
    assert abs(share - weight / 100) < 4 * sd


def test_draws_are_seeded_per_user_and_full_weight_sends_everything_to_the_candidate() -> None:
    first, again, other_user = (
        _sides(SideDraw(7, 1), 200),
        _sides(SideDraw(7, 1), 200),
        _sides(SideDraw(7, 2), 200),
    )
    assert first == again and first != other_user
    assert set(_sides(SideDraw(0, 0), 500, weight=100.0)) == {"candidate"}
    draw = SideDraw(0, 0)
    assert not any(draw.agreement(0.0) for _ in range(500))
    assert 0 < sum(draw.agreement(0.1) for _ in range(1000)) < 200


def _sides(draw: SideDraw, n: int, weight: float = 50.0) -> list[str]:
    return [draw.side(weight) for _ in range(n)]


def test_agreement_is_the_lowest_cosine_over_the_request_inputs() -> None:
    read = registry.DEFAULT.dense_vectors  # each side's protocol reads its own answer
    same = read(_answer([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]))
    assert agreement_cosine(same, same) == pytest.approx(1.0)
    turned = read(_answer([1.0, 0.0, 0.0], [0.0, 0.6, 0.8]))  # second input at cosine 0.6
    assert agreement_cosine(same, turned) == pytest.approx(0.6)
    assert agreement_cosine(same, read(_answer([1.0, 0.0, 0.0]))) is None  # a different number of vectors
    assert agreement_cosine(same, read(b"not json")) is None
    # a TEI candidate against an OpenAI-style baseline: the same vectors, each read in its own shape
    tei = registry.get("tei").dense_vectors(json.dumps([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]]).encode())
    assert agreement_cosine(same, tei) == pytest.approx(0.6)
