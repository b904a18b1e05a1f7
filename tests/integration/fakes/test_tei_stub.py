"""The TEI stub speaks text-embeddings-inference's API as TEI v1.9.3 publishes it: each endpoint's shape, the
timing headers, /info, /health, the Prometheus names, the error shapes and statuses, and the faults."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import numpy as np
import pytest

from tests.fakes.tei_model import SPARSE_VOCABULARY, text_tokens
from tests.fakes.tei_stub import TeiStubConfig, running_tei_stub, tei_stub_process

TIMING_HEADERS = (
    "x-compute-time",
    "x-compute-characters",
    "x-compute-tokens",
    "x-total-time",
    "x-tokenization-time",
    "x-queue-time",
    "x-inference-time",
)


@contextmanager
def client(**config: object) -> Iterator[httpx.Client]:
    with (
        running_tei_stub(TeiStubConfig.model_validate(config)) as url,
        httpx.Client(base_url=url, timeout=30) as c,
    ):
        yield c


def error(r: httpx.Response, status: int, error_type: str) -> str:
    """The message of a TEI error answer, once its status and shape are checked."""
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] == error_type, body
    assert "x-compute-time" not in r.headers  # only successful answers carry timings
    return str(body["error"])


def metric(text: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} ([0-9.e+-]+)$", text, re.M)
    assert match, f"{series} not in /metrics"
    return float(match.group(1))


@pytest.mark.quick
def test_embed_answers_one_vector_per_input_with_timing_headers() -> None:
    with client(delay_ms=50) as c:
        single = c.post("/embed", json={"inputs": "What is Deep Learning?"})
        assert single.status_code == 200 and single.headers["content-type"] == "application/json"
        (vector,) = single.json()
        assert len(vector) == 384 and math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-6)
        texts = ["What is Deep Learning?", "Deep Learning is a kind of machine learning."]
        batch = c.post("/embed", json={"inputs": texts, "truncate": False})
        assert batch.json()[0] == vector and batch.json()[1] != vector  # fixed per text
        headers = batch.headers
        assert headers["x-compute-type"] == "gpu+optimized"
        assert all(re.fullmatch(r"\d+", headers[name]) for name in TIMING_HEADERS)
        assert int(headers["x-compute-characters"]) == sum(len(t) for t in texts)
        assert int(headers["x-compute-tokens"]) == sum(text_tokens(t) for t in texts)
        total_ms = int(headers["x-total-time"])
        assert int(headers["x-compute-time"]) == total_ms >= 50 - 1  # the delay, in whole milliseconds
        parts = [int(headers[f"x-{stage}-time"]) for stage in ("tokenization", "queue", "inference")]
        assert int(0.7 * 50) - 1 <= parts[2] and sum(parts) <= total_ms + 2
        raw = c.post("/embed", json={"inputs": "x", "normalize": False}).json()[0]
        assert not math.isclose(float(np.linalg.norm(raw)), 1.0, rel_tol=1e-3)
        short = c.post("/embed", json={"inputs": "x", "dimensions": 64}).json()[0]
        assert len(short) == 64 and math.isclose(float(np.linalg.norm(short)), 1.0, rel_tol=1e-6)


@pytest.mark.quick
def test_embed_sparse_on_a_splade_model() -> None:
    with client(model_type="splade") as c:
        r = c.post("/embed_sparse", json={"inputs": ["the cat sat on the mat", "dogs"]})
        assert r.status_code == 200 and "x-inference-time" in r.headers
        first, second = r.json()
        assert all(set(entry) == {"index", "value"} for entry in first + second)
        indices = [entry["index"] for entry in first]
        assert indices == sorted(indices) and all(0 <= i < SPARSE_VOCABULARY for i in indices)
        assert len(first) == 5 and len(second) == 1  # one entry per distinct word
        assert all(entry["value"] > 0 for entry in first)
        assert c.post("/embed_sparse", json={"inputs": "the cat"}).json()[0][0] in first
        assert "not available for SPLADE" in error(c.post("/embed", json={"inputs": "x"}), 424, "Backend")
        assert c.get("/info").json()["model_type"] == {"embedding": {"pooling": "splade"}}


@pytest.mark.quick
def test_rerank_ranks_by_score_on_a_reranker() -> None:
    texts = ["Deep Learning is ...", "cheese", "What is Deep Learning?", "a river"]
    with client(model_type="reranker") as c:
        r = c.post("/rerank", json={"query": "What is Deep Learning?", "texts": texts})
        assert r.status_code == 200 and "x-compute-tokens" in r.headers
        ranks = r.json()
        assert sorted(rank["index"] for rank in ranks) == list(range(len(texts)))
        assert all(set(rank) == {"index", "score"} and 0 < rank["score"] < 1 for rank in ranks)
        assert [rank["score"] for rank in ranks] == sorted((rank["score"] for rank in ranks), reverse=True)
        assert ranks[0]["index"] == 2  # the query itself: cosine 1
        assert int(r.headers["x-compute-characters"]) == len("What is Deep Learning?") * len(texts) + sum(
            map(len, texts)
        )
        raw = c.post(
            "/rerank",
            json={"query": "What is Deep Learning?", "texts": texts, "raw_scores": True, "return_text": True},
        ).json()
        by_index = {rank["index"]: rank["score"] for rank in ranks}
        for rank in raw:
            assert rank["text"] == texts[rank["index"]]
            assert math.isclose(1 / (1 + math.exp(-rank["score"])), by_index[rank["index"]], rel_tol=1e-9)
        assert "not an embedding model" in error(c.post("/embed", json={"inputs": "x"}), 424, "Backend")
        info = c.get("/info").json()
        assert info["model_type"] == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
    with client() as c:  # an embedding model does not rerank
        refused = c.post("/rerank", json={"query": "q", "texts": ["a"]})
        assert "not a re-ranker model" in error(refused, 424, "Backend")
        assert "SPLADE" in error(c.post("/embed_sparse", json={"inputs": "x"}), 424, "Backend")


@pytest.mark.quick
def test_info_health_and_metrics_under_tei_names() -> None:
    with client(max_client_batch_size=4) as c:
        info = c.get("/info").json()
        assert info["version"] == "1.9.3" and info["model_id"] == info["served_model_name"]
        assert info["model_type"] == {"embedding": {"pooling": "mean"}}
        assert info["max_client_batch_size"] == 4 and info["max_input_length"] == 512
        assert {"max_concurrent_requests", "max_batch_tokens", "auto_truncate", "model_dtype"} <= set(info)
        health = c.get("/health")
        assert health.status_code == 200 and health.content == b""
        assert c.head("/health").status_code == 200 and c.post("/health").status_code == 405
        assert c.get("/metrics").text == ""  # TEI's exporter writes a series once it has been recorded
        assert c.post("/embed", json={"inputs": ["a", "b", "c"]}).status_code == 200
        assert c.post("/embed", json={"inputs": "d"}).status_code == 200
        assert c.post("/embed", json={"inputs": ["a"] * 5}).status_code == 422
        text = c.get("/metrics")
        assert text.headers["content-type"].startswith("text/plain")
        t = text.text
        assert "# TYPE te_request_count counter" in t and "te_request_count_total" not in t
        assert metric(t, 'te_request_count{method="batch"}') == 2
        assert metric(t, 'te_request_count{method="single"}') == 1
        assert metric(t, 'te_request_success{method="batch"}') == 1
        assert metric(t, 'te_request_failure{err="batch_size"}') == 1
        assert metric(t, "te_embed_count") == 4 and metric(t, "te_embed_success") == 4
        assert metric(t, "te_queue_size") == 0
        assert metric(t, "te_batch_next_size_count") == 2 and metric(t, "te_batch_next_size_sum") == 4
        assert metric(t, 'te_batch_next_size_bucket{le="4.0"}') == 2
        assert metric(t, 'te_batch_next_size_bucket{le="2.0"}') == 1
        assert metric(t, "te_batch_next_tokens_sum") == 4 * text_tokens("a")
        assert metric(t, "te_request_input_length_count") == 4
        for name in (
            "te_request_duration",
            "te_request_tokenization_duration",
            "te_request_queue_duration",
            "te_request_inference_duration",
        ):
            assert metric(t, f"{name}_count") == 2 and f'{name}_bucket{{le="+Inf"}} 2' in t
        assert metric(t, "te_embed_inference_duration_count") == 4
    with client(fault="unhealthy") as c:
        assert error(c.get("/health"), 503, "Unhealthy") == "unhealthy"


@pytest.mark.quick
def test_errors_have_tei_shapes_and_statuses() -> None:
    long_text = "word " * 600
    with client(max_client_batch_size=2, max_input_length=512) as c:
        assert "batch size 3 > maximum allowed batch size 2" in error(
            c.post("/embed", json={"inputs": ["a", "b", "c"]}), 422, "Validation"
        )
        assert error(c.post("/embed", json={"inputs": []}), 400, "Empty")
        assert error(c.post("/embed", json={"inputs": ""}), 400, "Empty")
        too_long = error(c.post("/embed", json={"inputs": long_text, "truncate": False}), 422, "Validation")
        assert too_long == "Input validation error: `inputs` must have less than 512 tokens. Given: 602"
        cut = c.post("/embed", json={"inputs": long_text})  # auto-truncate is on by default, as in TEI
        assert cut.status_code == 200 and cut.headers["x-compute-tokens"] == "512"
        assert error(c.post("/embed", json={"inputs": "x", "dimensions": 385}), 422, "Validation")
        # bodies axum cannot extract: plain text, not TEI's JSON
        for response, status in (
            (c.post("/embed", content=b'{"inputs": "x"}'), 415),
            (c.post("/embed", content=b"{bad", headers={"content-type": "application/json"}), 400),
            (c.post("/embed", json={"input": "x"}), 422),
            (c.post("/embed", json={"inputs": [1, 2]}), 422),
        ):
            assert response.status_code == status and response.headers["content-type"].startswith(
                "text/plain"
            )
        assert c.get("/nothing").status_code == 404 and c.get("/embed").status_code == 405
    with client(model_type="reranker", max_client_batch_size=2) as c:
        assert (
            error(c.post("/rerank", json={"query": "q", "texts": []}), 400, "Empty")
            == "`texts` cannot be empty"
        )
        assert error(c.post("/rerank", json={"query": "q", "texts": ["a"] * 3}), 422, "Validation")
        assert error(c.post("/rerank", json={"query": "", "texts": ["a"]}), 400, "Empty")
        assert c.post("/rerank", json={"texts": ["a"]}).status_code == 422
    with client(validation_status=413) as c:  # TEI before 1.9.0
        assert error(c.post("/embed", json={"inputs": ["a"] * 33}), 413, "Validation")
    with client(max_concurrent_requests=1) as c:  # a permit per input
        assert (
            error(c.post("/embed", json={"inputs": ["a", "b"]}), 429, "Overloaded") == "Model is overloaded"
        )
        assert c.post("/embed", json={"inputs": ["a"]}).status_code == 200
    with client(payload_limit_bytes=100) as c:
        assert c.post("/embed", json={"inputs": "x" * 200}).status_code == 413
    with client(fault="backend_error") as c:
        assert error(c.post("/embed", json={"inputs": "x"}), 424, "Backend")
        assert metric(c.get("/metrics").text, 'te_request_failure{err="inference"}') == 1


@pytest.mark.quick
def test_an_api_key_guards_all_but_health_and_metrics() -> None:
    with client(api_key="s3cret") as c:
        for method, path in (("POST", "/embed"), ("GET", "/info")):
            refused = c.request(method, path, json={"inputs": "x"})
            assert refused.status_code == 401 and refused.content == b""
            assert (
                c.request(
                    method, path, json={"inputs": "x"}, headers={"Authorization": "Bearer nope"}
                ).status_code
                == 401
            )
        assert c.get("/health").status_code == 200 and c.get("/metrics").status_code == 200
        ok = c.post("/embed", json={"inputs": "x"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200


@pytest.mark.quick
def test_faults_break_answers_on_purpose() -> None:
    with client(model_type="reranker", fault="malformed_rerank") as c:
        ranks = c.post("/rerank", json={"query": "q", "texts": ["a", "b", "c"]}).json()
        indices = [rank["index"] for rank in ranks]
        assert len(indices) == 3 and sorted(indices) != [0, 1, 2]  # a repeated index, a text with no score
        assert c.post("/rerank", json={"query": "q", "texts": ["a"]}).json() == []
    with client(fault="malformed_embed") as c:
        vectors = c.post("/embed", json={"inputs": ["a", "b"]}).json()
        assert [len(v) for v in vectors] == [383, 383]


def test_runs_as_a_process_with_its_flags() -> None:
    flags = ("--model-type", "reranker", "--fault", "malformed_rerank", "--delay-ms", "20")
    with tei_stub_process(*flags) as url:
        info = httpx.get(f"{url}/info").json()
        assert info["model_type"] == {"reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}}
        r = httpx.post(f"{url}/rerank", json={"query": "q", "texts": ["a"]})
        assert r.status_code == 200 and r.json() == [] and int(r.headers["x-total-time"]) >= 20 - 1
