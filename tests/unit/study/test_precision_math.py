"""Precision figures on vectors with known answers, and the shipped corpus's coverage and provenance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embedperf.errors import ConfigError
from study.corpus import EVAL_CORPUS_PATH, EvalText, load_eval_corpus
from study.precision.compare import compare_embeddings, cosine_per_text
from study.precision.gate import PrecisionGates
from study.precision.retrieval import rank_correlation, topk_agreement

STANDARD = PrecisionGates.for_profile("standard")


def _texts(groups: list[str]) -> list[EvalText]:
    return [
        EvalText(id=f"t{i}", lang="en", text=f"text {i}", labels={"domain": g}) for i, g in enumerate(groups)
    ]


def test_identical_embeddings_give_cosine_one_and_full_agreement() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(40, 16))
    result = compare_embeddings(ref, ref.copy(), _texts(["a"] * 40), candidate_name="same", gates=STANDARD)
    assert result.cosine_mean == pytest.approx(1.0)
    assert result.cosine_min == pytest.approx(1.0)
    assert result.topk_agreement_mean == 1.0
    assert result.retrieval.rank_correlation_mean == pytest.approx(1.0)
    assert result.passed and result.failures == []


def test_cosine_per_text_known_angles() -> None:
    ref = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    cand = np.array([[0.0, 1.0], [0.0, 5.0], [-1.0, -1.0]])
    assert cosine_per_text(ref, cand) == pytest.approx([0.0, 1.0, -1.0])


def test_topk_agreement_detects_reordered_neighbours() -> None:
    # Points on an arc: neighbours are the adjacent points. Reversing half of them changes some.
    ref = np.array([[np.cos(a), np.sin(a)] for a in np.linspace(0, 1.5, 12)])
    shuffled = ref[np.r_[0:6, 11:5:-1]]
    agree = topk_agreement(ref, shuffled, k=2)
    assert agree[0] == 1.0
    assert agree.min() < 1.0
    assert rank_correlation(ref, shuffled).min() < rank_correlation(ref, ref).min() == pytest.approx(1.0)


def test_queries_are_ranked_against_documents_only() -> None:
    # Query 0 sits between documents 1 and 2; the candidate moves document 3 next to it.
    ref = np.array([[1.0, 0.0], [1.0, 0.1], [1.0, -0.1], [0.0, 1.0], [-1.0, 0.2]])
    cand = ref.copy()
    cand[3] = [1.0, 0.05]
    queries = np.array([True, False, False, False, False])
    assert topk_agreement(ref, cand, k=2, queries=queries).tolist() == [0.5]


def test_noise_lowers_cosine_and_fails_the_strict_mean_gate() -> None:
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(100, 32))
    noisy = ref + rng.normal(scale=0.1, size=ref.shape)
    texts = _texts(["a"] * 50 + ["b"] * 50)
    standard = compare_embeddings(
        ref, noisy, texts, candidate_name="n", gates=STANDARD, label_fields=["domain"]
    )
    strict = compare_embeddings(
        ref,
        noisy,
        texts,
        candidate_name="n",
        gates=PrecisionGates.for_profile("strict"),
        label_fields=["domain"],
    )
    assert 0.99 < standard.cosine_mean < 0.999
    assert not any("mean cosine" in f for f in standard.failures)
    assert any("mean cosine" in f and "below 0.999" in f for f in strict.failures) and not strict.passed
    by_name = {d.label: d for d in standard.domains}
    assert by_name["domain=a"].n == 50 and by_name["language=en"].n == 100
    assert standard.cosine_min <= standard.cosine_p1 <= standard.cosine_p5 <= standard.cosine_mean


def test_random_vectors_fail_the_gate() -> None:
    rng = np.random.default_rng(2)
    result = compare_embeddings(
        rng.normal(size=(30, 8)),
        rng.normal(size=(30, 8)),
        _texts(["a"] * 30),
        candidate_name="r",
        gates=STANDARD,
    )
    assert not result.passed and result.cosine_mean < 0.5


def test_shape_mismatch_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="same model and output dimension"):
        cosine_per_text(np.ones((3, 4)), np.ones((3, 5)))


def test_eval_corpus_covers_languages_kinds_and_domains() -> None:
    corpus = load_eval_corpus()
    cells = {(t.lang, t.kind, t.labels["domain"]) for t in corpus}
    for lang in ("en", "zh"):
        for domain in ("ops", "commerce", "science", "everyday"):
            assert (lang, "query", domain) in cells
            assert (lang, "passage", domain) in cells
    assert {t.lang for t in corpus} == {"en", "zh", "mixed"}
    assert len({t.id for t in corpus}) == len(corpus)
    assert max(len(t.text) for t in corpus if t.lang == "en" and t.kind == "passage") > 1000
    assert max(len(t.text) for t in corpus if t.lang == "zh" and t.kind == "passage") > 300


def test_every_corpus_text_states_its_source_and_licence() -> None:
    lines = [json.loads(line) for line in EVAL_CORPUS_PATH.read_text(encoding="utf-8").splitlines() if line]
    assert all(line["source"] and line["license"] == "CC0-1.0" for line in lines)


def test_a_corpus_line_without_a_licence_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        json.dumps({"id": "a", "lang": "en", "domain": "x", "kind": "query", "source": "me", "text": "hi"})
        + "\n"
    )
    with pytest.raises(ConfigError, match="needs a 'source' and a 'license'"):
        load_eval_corpus(path)
