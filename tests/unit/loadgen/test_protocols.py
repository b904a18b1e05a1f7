"""Each target protocol's request and answer check: a good answer passes; a wrong count, a wrong dimension,
a value that is not a finite number, a ranking that is not a permutation or lacks a score does not."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pytest

from embedperf.error_kinds import error_kind
from loadgen.traffic.headers import parse_server_timing
from loadgen.traffic.payloads import RequestPayload
from loadgen.traffic.protocols import registry
from loadgen.traffic.protocols.base import TargetProtocol
from scenarios.models import Target, Task

DIM = 4


@dataclass
class Expect:
    expected_dim: int | None = DIM
    dim_source: str = "test"

    def learn_dim(self, dim: int) -> None:
        self.expected_dim, self.dim_source = dim, "first answer"


GOOD = object()


def vectors(n: int, dim: int = DIM, bad: Any = GOOD) -> list[list[Any]]:
    rows: list[list[Any]] = [[0.5 - 0.1 * j for j in range(dim)] for _ in range(n)]
    if bad is not GOOD:
        rows[-1][-1] = bad
    return rows


# the answer each protocol's server would send for n dense vectors (bad: the last value replaced)
def openai_answer(rows: list[list[Any]]) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
    return json.dumps({"object": "list", "data": data, "usage": {"prompt_tokens": 9}}).encode()


def tei_answer(rows: list[list[Any]]) -> bytes:
    return json.dumps(rows).encode()


def kserve_answer(rows: list[list[Any]]) -> bytes:
    flat = [v for r in rows for v in r]
    shape = [len(rows), len(rows[0]) if rows else 0]
    output = {"name": "embedding", "shape": shape, "datatype": "FP32", "data": flat}
    return json.dumps({"model_name": "minilm", "outputs": [output]}).encode()


def ollama_answer(rows: list[list[Any]]) -> bytes:
    return json.dumps({"model": "m", "embeddings": rows, "prompt_eval_count": 9}).encode()


DENSE: dict[str, Any] = {
    "openai": openai_answer,
    "infinity": openai_answer,
    "vllm": openai_answer,
    "tei": tei_answer,
    "kserve-v2": kserve_answer,
    "ollama": ollama_answer,
}
TOKENS = {"openai": 9, "infinity": 9, "vllm": 9, "tei": None, "kserve-v2": None, "ollama": 9}


def check(
    name: str, body: bytes, n: int, task: Task = "embed", expect: Expect | None = None
) -> tuple[str, int | None]:
    protocol = registry.get(name)
    payload = (
        RequestPayload([f"d{i}" for i in range(n)], "/x", query="q")
        if task == "rerank"
        else RequestPayload([f"t{i}" for i in range(n)], "/x")
    )
    return protocol.check_answer(body, payload, task, target(name), expect or Expect())


def target(name: str) -> Target:
    return registry.default_target(Target.model_validate({"protocol": name, "model": "m"}), "embed")


@pytest.mark.parametrize("name", sorted(DENSE))
def test_a_good_dense_answer_passes_with_its_tokens(name: str) -> None:
    assert check(name, DENSE[name](vectors(3)), 3) == ("", TOKENS[name])


@pytest.mark.parametrize("name", sorted(DENSE))
def test_each_protocol_reads_its_answers_vectors_in_input_order(name: str) -> None:
    # quality probes and a canary's agreement samples compare these: each server's own answer shape
    rows = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.6, 0.8, 0.0], [0.25, -0.5, 0.0, 1.0]]
    got = registry.get(name).dense_vectors(DENSE[name](rows))
    assert got is not None and [v.tolist() for v in got] == rows
    assert registry.get(name).dense_vectors(b"not json") is None
    assert registry.get(name).dense_vectors(b'{"unexpected": 1}') is None


@pytest.mark.parametrize("name", sorted(DENSE))
def test_a_wrong_count_is_named(name: str) -> None:
    error, _ = check(name, DENSE[name](vectors(2)), 3)
    assert error.startswith("wrong count: 2 embeddings for 3 inputs"), error


@pytest.mark.parametrize("name", sorted(DENSE))
def test_a_wrong_dimension_is_named_and_a_first_answer_teaches_it(name: str) -> None:
    error, _ = check(name, DENSE[name](vectors(2, dim=DIM + 1)), 2)
    assert error == f"wrong dimension: {DIM + 1}, expected {DIM} (from test)"
    learner = Expect(expected_dim=None)
    assert check(name, DENSE[name](vectors(2, dim=7)), 2, expect=learner)[0] == ""
    assert (learner.expected_dim, learner.dim_source) == (7, "first answer")


@pytest.mark.parametrize("name", sorted(DENSE))
@pytest.mark.parametrize("bad", [math.nan, math.inf, None, "0.5"])
def test_a_value_that_is_not_a_finite_number_fails(name: str, bad: Any) -> None:
    body = DENSE[name](vectors(2, bad=bad))  # json.dumps writes NaN and Infinity, as Python servers do
    error, _ = check(name, body, 2)
    assert error == "embedding with a value that is not a finite number", error


@pytest.mark.parametrize("name", sorted(DENSE))
def test_an_answer_that_is_not_json_fails(name: str) -> None:
    assert check(name, b"<html>busy</html>", 1)[0] == "invalid JSON in a 200 answer"


def test_every_failed_answer_check_counts_as_invalid_answer() -> None:
    error, _ = check("tei", tei_answer(vectors(1)), 2)
    assert error_kind(200, error) == "invalid_answer"


def tei_ranks(n: int) -> list[dict[str, Any]]:
    return [{"index": i, "score": 1.0 - i / 10} for i in reversed(range(n))]


def cohere_ranks(ranks: list[dict[str, Any]]) -> bytes:
    results = [{"index": r.get("index"), "relevance_score": r.get("score")} for r in ranks]
    return json.dumps({"object": "rerank", "results": results, "usage": {"prompt_tokens": 12}}).encode()


RERANK: dict[str, Any] = {
    "openai": lambda ranks: json.dumps(ranks).encode(),  # the reference service's TEI-shaped /rerank
    "tei": lambda ranks: json.dumps(ranks).encode(),
    "infinity": cohere_ranks,
    "vllm": cohere_ranks,
}


@pytest.mark.parametrize("name", sorted(RERANK))
def test_a_good_ranking_passes(name: str) -> None:
    error, tokens = check(name, RERANK[name](tei_ranks(4)), 4, task="rerank")
    assert error == "" and tokens == (12 if name in ("infinity", "vllm") else None)


@pytest.mark.parametrize("name", sorted(RERANK))
def test_a_ranking_must_be_a_permutation_with_one_score_per_document(name: str) -> None:
    ranks = tei_ranks(4)
    repeated = [*ranks[:-1], {**ranks[-1], "index": ranks[0]["index"]}]  # the TEI stub's malformed_rerank
    assert "not a permutation" in check(name, RERANK[name](repeated), 4, task="rerank")[0]
    assert (
        check(name, RERANK[name](ranks[:3]), 4, task="rerank")[0] == "wrong count: 3 scores for 4 documents"
    )
    no_score = [*ranks[:-1], {"index": ranks[-1]["index"]}]
    assert "has no finite score" in check(name, RERANK[name](no_score), 4, task="rerank")[0]
    nan_score = [*ranks[:-1], {**ranks[-1], "score": math.nan}]
    assert "has no finite score" in check(name, RERANK[name](nan_score), 4, task="rerank")[0]
    bool_index = [*ranks[:-1], {**ranks[-1], "index": True}]
    assert "integer document index" in check(name, RERANK[name](bool_index), 4, task="rerank")[0]


def test_sparse_vectors_need_integer_indices_and_finite_values() -> None:
    good = [[{"index": 7, "value": 1.5}, {"index": 2001, "value": 0.25}], [{"index": 3, "value": 2.0}]]
    assert check("tei", json.dumps(good).encode(), 2, task="embed_sparse") == ("", None)
    assert "wrong count" in check("tei", json.dumps(good[:1]).encode(), 2, task="embed_sparse")[0]
    for entry, says in [
        ({"index": -1, "value": 1.0}, "non-negative integer index"),
        ({"index": "7", "value": 1.0}, "non-negative integer index"),
        ({"index": 7, "value": math.nan}, "no finite value"),
        ({"index": 7}, "no finite value"),
    ]:
        body = json.dumps([good[0], [entry]]).encode()
        assert says in check("tei", body, 2, task="embed_sparse")[0], entry


def test_request_bodies_follow_each_wire_format() -> None:
    payload = RequestPayload(["a", "b"], "/x")
    rerank = RequestPayload(["d1", "d2"], "/x", query="q")

    def body(name: str, p: RequestPayload, task: Task = "embed") -> Any:
        return json.loads(registry.get(name).request_body(p, task, target(name)))

    assert body("openai", payload) == {"input": ["a", "b"], "model": "m", "encoding_format": "float"}
    assert body("openai", rerank, "rerank") == {"query": "q", "texts": ["d1", "d2"], "model": "m"}
    assert body("tei", payload) == {"inputs": ["a", "b"]}
    assert body("tei", rerank, "rerank") == {"query": "q", "texts": ["d1", "d2"]}
    assert body("infinity", rerank, "rerank") == {"model": "m", "query": "q", "documents": ["d1", "d2"]}
    assert body("kserve-v2", payload) == {
        "inputs": [{"name": "text", "shape": [2], "datatype": "BYTES", "data": ["a", "b"]}]
    }
    assert body("ollama", payload) == {"model": "m", "input": ["a", "b"]}


def test_paths_per_protocol_and_task() -> None:
    def path(name: str, task: Task, prefix: str = "") -> str:
        return registry.get(name).path(task, "minilm", prefix)

    assert path("openai", "embed", "/v1") == "/v1/embeddings" and path("openai", "rerank", "/v1") == "/rerank"
    assert path("infinity", "embed") == "/embeddings" and path("infinity", "rerank", "/v1") == "/v1/rerank"
    assert [path("tei", t) for t in ("embed", "embed_sparse", "rerank")] == [
        "/embed",
        "/embed_sparse",
        "/rerank",
    ]
    assert path("kserve-v2", "embed") == "/v2/models/minilm/infer"
    assert path("ollama", "embed") == "/api/embed"
    assert (
        registry.get("kserve-v2")
        .unsupported("rerank")
        .startswith("protocol kserve-v2 has no rerank requests")
    )


def test_tei_timing_headers_become_the_server_timing_decomposition() -> None:
    headers = {
        "x-compute-type": "gpu+optimized",
        "x-compute-time": "12",
        "x-total-time": "12",
        "x-tokenization-time": "1",
        "x-queue-time": "3",
        "x-inference-time": "7",
        "x-compute-tokens": "42",
    }
    tei = registry.get("tei")
    raw = tei.raw_timing(headers.get)
    assert parse_server_timing(raw[0]) == {
        "srv_queue_ms": 3.0,
        "srv_tokenize_ms": 1.0,
        "srv_compute_ms": 7.0,
        "srv_total_ms": 12.0,
    }
    assert raw[1:] == [None] * 6  # no post phase, no batch headers
    assert tei.header_tokens(headers.get) == 42
    assert tei.raw_timing({}.get)[0] is None and tei.header_tokens({}.get) is None


def test_the_reference_service_timing_is_read_as_before() -> None:
    header = "queue;dur=1.5, tokenize;dur=0.2, compute;dur=4, post;dur=0.1, total;dur=6"
    raw = registry.get("openai").raw_timing({"Server-Timing": header, "X-Batch-Size": "3"}.get)
    assert raw[0] == header and raw[5] == "3"


def test_a_model_not_found_answer_is_told_from_a_missing_path() -> None:
    openai: TargetProtocol = registry.get("openai")
    vllm_says = (
        b'{"error": {"message": "The model `all-MiniLM-L6-v2` does not exist.", "type": "NotFoundError"}}'
    )
    infinity_says = (
        b'{"error": {"message": "Invalid model: \'Engine for model name `x` not found. Available model names '
        b"are ['a', 'b']'\", \"code\": 400}}"
    )
    assert openai.model_not_found(404, vllm_says) and openai.model_not_found(400, infinity_says)
    assert not openai.model_not_found(404, b'{"detail": "Not Found"}')
    assert not openai.model_not_found(500, vllm_says)
