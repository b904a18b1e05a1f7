"""The precision gate: each threshold fails on its own, and neighbours reordered under a high cosine fail."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from study.corpus import EvalText
from study.precision.compare import compare_embeddings
from study.precision.gate import PrecisionGates, gate_failures

STANDARD = PrecisionGates.for_profile("standard")


def test_profiles_and_overrides() -> None:
    assert (STANDARD.min_mean_cosine, STANDARD.min_domain_cosine, STANDARD.min_topk_agreement) == (
        0.99,
        0.98,
        0.95,
    )
    strict = PrecisionGates.for_profile("strict", min_topk_agreement=0.9)
    assert (strict.min_mean_cosine, strict.min_domain_cosine, strict.min_topk_agreement) == (
        0.999,
        0.998,
        0.9,
    )
    with pytest.raises(ValidationError):
        PrecisionGates.for_profile("standard", min_domain_cosine=1.5)


def test_each_threshold_fails_on_its_own() -> None:
    assert gate_failures(STANDARD, 0.995, [], 0.97) == []
    assert [f.split(" ")[0] for f in gate_failures(STANDARD, 0.985, [], 0.97)] == ["mean"]
    only_domain = gate_failures(STANDARD, 0.995, ["domain=legal"], 0.97)
    assert len(only_domain) == 1 and "domain=legal" in only_domain[0]
    only_topk = gate_failures(STANDARD, 0.995, [], 0.94)
    assert len(only_topk) == 1 and only_topk[0].startswith("agreement@10 0.940 is below 0.95")


def _near_ties(seed: int = 0) -> tuple[np.ndarray, list[EvalText]]:
    """20 queries and 60 documents all close to one direction, so their similarities nearly tie."""
    rng = np.random.default_rng(seed)
    dim = 64
    base = np.zeros(dim)
    base[0] = 1.0
    vectors = base + 0.05 * rng.normal(size=(80, dim)) / np.sqrt(dim)
    texts = [
        EvalText(id=f"t{i}", lang="en", text=f"text {i}", kind="query" if i < 20 else "passage")
        for i in range(80)
    ]
    return vectors, texts


def test_a_variant_above_0_99_cosine_that_reorders_neighbours_fails_its_gate() -> None:
    reference, texts = _near_ties()
    rng = np.random.default_rng(1)
    candidate = reference + 0.03 * rng.normal(size=reference.shape) / np.sqrt(reference.shape[1])
    result = compare_embeddings(reference, candidate, texts, candidate_name="reorders", gates=STANDARD)
    assert result.cosine_min > 0.99  # every text on its own is close to fp32 ...
    assert result.retrieval.mode == "queries_to_documents" and result.retrieval.n_documents == 60
    assert result.topk_agreement_mean < 0.95  # ... but the queries find other neighbours
    assert result.retrieval.rank_correlation_mean < 0.9
    assert not result.passed
    assert len(result.failures) == 1 and result.failures[0].startswith("agreement@10")


def test_the_same_variant_with_a_tiny_perturbation_keeps_its_neighbours() -> None:
    reference, texts = _near_ties()
    rng = np.random.default_rng(1)
    candidate = reference + 1e-5 * rng.normal(size=reference.shape) / np.sqrt(reference.shape[1])
    result = compare_embeddings(reference, candidate, texts, candidate_name="faithful", gates=STANDARD)
    assert result.topk_agreement_mean >= 0.95 and result.passed
