"""Layer by layer on the real MiniLM: identical builds agree everywhere, int8 leaves fp32 at a named layer."""

from __future__ import annotations

import pytest

from modelcore.model import EmbeddingModel, load_model
from study.corpus import load_eval_corpus
from study.precision.layers import compare_layers

# Short and long, Chinese and English: batches mix lengths, so padding must be masked.
TEXTS = [t.text for t in load_eval_corpus()[::14]]


def short_texts(model: EmbeddingModel) -> list[str]:
    """The texts under 64 tokens (13-56, both languages, still of mixed lengths): a tenth of the compute
    of the set with its 194- and 256-token texts, which matters most for bf16, whose matrix products run
    emulated on a CPU without bf16 instructions. The int8 test keeps the long ones (padding)."""
    texts = [text for text, ids in zip(TEXTS, model.tokenize(TEXTS), strict=True) if len(ids) < 64]
    assert len(texts) >= 8
    return texts


@pytest.fixture(scope="module")
def fp32() -> EmbeddingModel:
    return load_model(None, precision="fp32")


@pytest.fixture(scope="module")
def int8() -> EmbeddingModel:
    return load_model(None, precision="int8")


def test_a_build_against_itself_agrees_at_every_layer(fp32: EmbeddingModel) -> None:
    report = compare_layers(fp32, fp32, short_texts(fp32), gate=0.99, with_linear=True)
    assert len(report.layers) == 6 and len(report.linears) == 36
    for point in report.layers + report.linears:
        assert point.cosine_min == pytest.approx(1.0, abs=1e-6)
        assert point.rel_error_max == pytest.approx(0.0, abs=1e-6)
    assert report.first_below_gate is None


def test_int8_names_its_first_layer_below_the_gate_and_counts_only_real_tokens(
    fp32: EmbeddingModel, int8: EmbeddingModel
) -> None:
    report = compare_layers(fp32, int8, TEXTS, gate=0.99, with_linear=True, batch_size=4)
    real_tokens = sum(len(ids) for ids in fp32.tokenize(TEXTS))
    assert {p.n_tokens for p in report.layers + report.linears} == {real_tokens}
    means = [p.cosine_mean for p in report.layers]
    first = next(i for i, m in enumerate(means) if m < 0.99)
    assert report.first_below_gate == f"encoder.layer.{first}"
    assert means[-1] < means[0]  # the deviation grows with depth
    drops = {p.name: p.drop for p in report.layers}
    assert drops[report.largest_drop or ""] == max(drops.values())
    assert drops["encoder.layer.0"] == pytest.approx(1.0 - means[0])
    by_name = {p.name: p for p in report.linears}
    assert set(by_name) >= {"encoder.layer.0.output.dense", "encoder.layer.5.attention.self.query"}
    for point in report.layers + report.linears:
        assert point.cosine_min <= point.cosine_p5 <= point.cosine_mean < 1.0
        assert 0.0 < point.rel_error_mean <= point.rel_error_p95 <= point.rel_error_max


def test_bf16_is_compared_the_same_way(fp32: EmbeddingModel) -> None:
    bf16 = load_model(None, precision="bf16")
    report = compare_layers(fp32, bf16, short_texts(fp32), gate=0.99)
    assert [p.name for p in report.layers] == [f"encoder.layer.{i}" for i in range(6)]
    assert all(0.99 < p.cosine_mean < 1.0 for p in report.layers)
    assert report.first_below_gate is None
