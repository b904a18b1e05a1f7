"""Precision figures on vectors with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from embedperf.errors import ConfigError
from study.corpus import load_eval_corpus
from study.precision import compare_embeddings, cosine_per_text, topk_agreement


def test_identical_embeddings_give_cosine_one_and_full_agreement() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(40, 16))
    result = compare_embeddings(
        ref, ref.copy(), [f"t{i}" for i in range(40)], ["a"] * 40, candidate_name="same"
    )
    assert result.cosine_mean == pytest.approx(1.0)
    assert result.cosine_min == pytest.approx(1.0)
    assert result.topk_agreement_mean == 1.0
    assert result.passed


def test_cosine_per_text_known_angles() -> None:
    ref = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    cand = np.array([[0.0, 1.0], [0.0, 5.0], [-1.0, -1.0]])
    assert cosine_per_text(ref, cand) == pytest.approx([0.0, 1.0, -1.0])


def test_topk_agreement_detects_reordered_neighbours() -> None:
    # Points on a line: neighbours are the adjacent points. Reversing half of them changes some.
    ref = np.array([[np.cos(a), np.sin(a)] for a in np.linspace(0, 1.5, 12)])
    shuffled = ref[np.r_[0:6, 11:5:-1]]
    agree = topk_agreement(ref, shuffled, k=2)
    assert agree[0] == 1.0
    assert agree.min() < 1.0


def test_noise_lowers_cosine_and_fails_the_strict_gate() -> None:
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(100, 32))
    noisy = ref + rng.normal(scale=0.1, size=ref.shape)
    groups = ["a"] * 50 + ["b"] * 50
    standard = compare_embeddings(ref, noisy, [str(i) for i in range(100)], groups, candidate_name="n")
    strict = compare_embeddings(
        ref, noisy, [str(i) for i in range(100)], groups, candidate_name="n", profile="strict"
    )
    assert 0.99 < standard.cosine_mean < 0.999
    assert standard.passed and not strict.passed
    assert set(standard.by_group) == {"a", "b"} and standard.by_group["a"]["n"] == 50
    assert standard.cosine_min <= standard.cosine_p1 <= standard.cosine_mean


def test_random_vectors_fail_the_gate() -> None:
    rng = np.random.default_rng(2)
    result = compare_embeddings(
        rng.normal(size=(30, 8)),
        rng.normal(size=(30, 8)),
        [str(i) for i in range(30)],
        ["a"] * 30,
        candidate_name="random",
    )
    assert not result.passed and result.cosine_mean < 0.5


def test_shape_mismatch_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="same model and output dimension"):
        cosine_per_text(np.ones((3, 4)), np.ones((3, 5)))


def test_eval_corpus_covers_languages_and_lengths() -> None:
    corpus = load_eval_corpus()
    groups = {(t.lang, t.length) for t in corpus}
    for lang in ("en", "zh"):
        for length in ("short", "medium", "long"):
            assert (lang, length) in groups
    assert len({t.id for t in corpus}) == len(corpus)
    assert max(len(t.text) for t in corpus if t.lang == "en") > 1000
