"""Workloads beyond one text per request: the rerank shape (a query and N documents, N fixed or drawn) and the
task's rules in the scenario model."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from loadgen.traffic.payloads import PayloadSampler, RequestPayload, load_corpus
from scenarios.loader import load_scenario
from scenarios.models import Payload

CORPORA = ["en_short", "zh_short"]


def sampler(**payload: object) -> PayloadSampler:
    spec = Payload.model_validate({"corpora": CORPORA, "repeat_fraction": 1.0, **payload})
    return PayloadSampler(spec, "/rerank")


def test_a_rerank_request_is_one_corpus_query_and_n_documents() -> None:
    texts = {t for name in CORPORA for t in load_corpus(name)}
    draws = [sampler(task="rerank", rerank={"documents": 5}).next() for _ in range(3)]
    for payload in draws:
        assert payload.query in texts and len(payload.inputs) == 5 and set(payload.inputs) <= texts
        assert (payload.texts, payload.documents) == (6, 5)
        assert payload.input_chars == len(payload.query or "") + sum(map(len, payload.inputs))


def test_the_default_shape_is_eight_documents() -> None:
    spec = Payload.model_validate({"task": "rerank"})
    assert spec.rerank is not None and spec.rerank.documents == 8
    assert len(PayloadSampler(spec, "/rerank").next().inputs) == 8


def test_documents_drawn_uniformly_between_min_and_max() -> None:
    s = sampler(task="rerank", rerank={"documents": {"min": 2, "max": 4}})
    counts = Counter(len(s.next().inputs) for _ in range(300))
    assert set(counts) == {2, 3, 4} and min(counts.values()) > 60  # ~100 each


def test_documents_drawn_by_weight() -> None:
    s = sampler(task="rerank", rerank={"documents": [{"n": 2, "weight": 3}, {"n": 16, "weight": 1}]})
    counts = Counter(len(s.next().inputs) for _ in range(400))
    assert set(counts) == {2, 16} and 2.0 < counts[2] / counts[16] < 4.5  # 3:1


def test_synthetic_documents_take_their_length_from_the_token_generator_and_the_query_stays_a_corpus_text() -> (
    None
):
    english = ["en_short", "en_medium"]  # whitespace words: the approximation's 0.75 words per token holds
    s = sampler(
        task="rerank", rerank={"documents": 3}, tokens={"mean": 40, "tokenizer": "approx"}, corpora=english
    )
    texts = {t for name in english for t in load_corpus(name)}
    payload = s.next()
    assert payload.query in texts
    assert all(d not in texts and 25 <= len(d.split()) <= 35 for d in payload.inputs)  # 40 tokens ~ 30 words


def test_the_sampler_is_seeded() -> None:
    a, b = sampler(task="rerank", seed=3), sampler(task="rerank", seed=3)
    assert [a.next() for _ in range(5)] == [b.next() for _ in range(5)]


def test_an_embed_payload_has_no_query_or_documents() -> None:
    payload = RequestPayload(["a", "bc"], "/v1/embeddings")
    assert (payload.texts, payload.documents, payload.input_chars) == (2, None, 3)


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"rerank": {"documents": 4}}, "payload.rerank needs payload.task: rerank"),
        ({"task": "rerank", "quality_probes": {"reference": "r.parquet"}}, "quality_probes compare dense"),
        ({"task": "embed_sparse", "validation_mix": 0.1}, "validation_mix sends embedding edge cases"),
        ({"task": "rerank", "rerank": {"documents": {"min": 5, "max": 2}}}, "must not exceed"),
        ({"task": "rerank", "rerank": {"documents": 0}}, "greater than or equal to 1"),
        ({"task": "classify"}, "Input should be 'embed', 'embed_sparse' or 'rerank'"),
    ],
)
def test_the_task_rules_are_checked_when_the_scenario_is_loaded(
    payload: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(payload)
    assert says in str(info.value)


def test_the_shipped_rerank_scenario_loads() -> None:
    scenario = load_scenario("rerank", environ={})
    assert scenario.payload.task == "rerank" and scenario.payload.rerank is not None
    assert scenario.target.protocol == "" and scenario.target.path == ""  # both left to the pre-flight check
