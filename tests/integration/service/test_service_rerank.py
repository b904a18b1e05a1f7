"""POST /rerank on the real MiniLM through the app `embedperf serve` runs: bi-encoder scores that agree with
/v1/embeddings, TEI's answer shape, and the embeddings route's machinery (errors, keys, token budget,
admission, metrics, access log)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelcore.encoder import StopCheck
from modelcore.model import EmbeddingModel, load_model
from service.settings import ServiceSettings
from tests.integration.service.test_service_api import MODEL, SERVER_TIMING, GatedModel, run, serving

QUERY = "How do I bake bread at home?"
TEXTS = [
    "The stock market fell sharply on Tuesday after the bank raised interest rates.",
    "Knead the dough, let it rise for an hour, then bake the loaf in a hot oven.",
    "The football match ended in a goalless draw.",
    "Flour, water, yeast and salt are all a simple loaf needs.",
]


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


def cosines(query: list[float], texts: list[list[float]]) -> np.ndarray:
    q = np.asarray(query) / np.linalg.norm(query)
    t = np.asarray(texts) / np.linalg.norm(texts, axis=1, keepdims=True)
    return np.asarray(t @ q)


def test_scores_are_the_cosines_of_the_embeddings_in_score_order(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(), minilm) as client:
            r = await client.post("/rerank", json={"query": QUERY, "texts": TEXTS})
            assert r.status_code == 200, r.text
            ranks = r.json()
            vectors = [
                d["embedding"]
                for d in (
                    await client.post("/v1/embeddings", json={"model": MODEL, "input": [QUERY, *TEXTS]})
                ).json()["data"]
            ]
            expected = cosines(vectors[0], vectors[1:])
            assert sorted(rank["index"] for rank in ranks) == list(range(len(TEXTS)))  # a permutation
            assert all(set(rank) == {"index", "score"} for rank in ranks)
            by_index = {rank["index"]: rank["score"] for rank in ranks}
            assert np.allclose([by_index[i] for i in range(len(TEXTS))], (expected + 1) / 2, atol=1e-5)
            assert [rank["index"] for rank in ranks] == list(np.argsort(-expected, kind="stable"))
            assert SERVER_TIMING.match(r.headers["server-timing"]), r.headers["server-timing"]
            assert r.headers["x-served-model"] == MODEL and int(r.headers["x-batch-size"]) >= 1
            assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])

            raw = (
                await client.post(
                    "/rerank", json={"query": QUERY, "texts": TEXTS, "raw_scores": True, "return_text": True}
                )
            ).json()
            assert np.allclose([rank["score"] for rank in raw], np.sort(expected)[::-1], atol=1e-5)
            assert [rank["text"] for rank in raw] == [TEXTS[rank["index"]] for rank in raw]

            info = (await client.get("/info")).json()
            assert info["rerank"]["kind"] == "bi-encoder cosine" and info["rerank"]["model"] == MODEL

    run(go)


def test_the_relevant_document_ranks_first(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(), minilm) as client:
            ranks = (await client.post("/rerank", json={"query": QUERY, "texts": TEXTS})).json()
            assert ranks[0]["index"] == 1  # the bread recipe
            assert {ranks[-1]["index"], ranks[-2]["index"]} == {0, 2}  # stocks and football last
            assert ranks[0]["score"] > ranks[-1]["score"]

    run(go)


def test_malformed_requests_get_the_embeddings_error_envelope(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(max_inputs=4), minilm) as client:
            cases: list[tuple[dict[str, Any], int, str]] = [
                ({"json": {"texts": ["a"]}}, 400, "missing_query"),
                ({"json": {"query": "", "texts": ["a"]}}, 400, "empty_input"),
                ({"json": {"query": 7, "texts": ["a"]}}, 400, "invalid_input"),
                ({"json": {"query": "q"}}, 400, "missing_texts"),
                ({"json": {"query": "q", "texts": "a"}}, 400, "invalid_input"),
                ({"json": {"query": "q", "texts": []}}, 400, "empty_input"),
                ({"json": {"query": "q", "texts": ["a", None]}}, 400, "invalid_input"),
                ({"json": {"query": "q", "texts": ["a", ""]}}, 400, "empty_input"),
                ({"json": {"query": "q", "texts": ["a"] * 4}}, 400, "too_many_inputs"),  # + the query: 5
                ({"json": {"query": "q", "texts": ["a"], "raw_scores": "yes"}}, 400, "invalid_request"),
                ({"json": {"query": "q", "texts": ["a"], "truncate": False}}, 422, "truncate_unsupported"),
                ({"json": {"query": "q", "texts": ["a"], "model": "bge-reranker"}}, 404, "model_not_found"),
                ({"json": ["q", "a"]}, 400, "invalid_request"),
                ({"content": b"{bad", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
                (
                    {"content": b"q=a", "headers": {"content-type": "text/plain"}},
                    415,
                    "unsupported_media_type",
                ),
            ]
            for kwargs, status, code in cases:
                r = await client.post("/rerank", **kwargs)
                assert r.status_code == status, (kwargs, r.text)
                error = r.json()["error"]
                assert error["code"] == code and error["message"] and error["type"], (kwargs, error)
                assert SERVER_TIMING.match(r.headers["server-timing"])
            assert (await client.get("/rerank")).status_code == 405
            fits = await client.post("/rerank", json={"query": "q", "texts": ["a"] * 3, "truncate": True})
            assert fits.status_code == 200, fits.text

    run(go)


def test_a_key_is_needed_when_keys_are_set(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(api_keys="s3cret"), minilm) as client:
            body = {"query": QUERY, "texts": TEXTS}
            refused = await client.post("/rerank", json=body)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
            wrong = await client.post("/rerank", json=body, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            ok = await client.post("/rerank", json=body, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200 and len(ok.json()) == len(TEXTS)

    run(go)


def test_the_query_and_texts_share_one_token_budget(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        budget = 64
        texts = ["word " * 18] * 3
        query = "word " * 10
        # the warm-up batch (two short texts) stays within the budget
        async with serving(ServiceSettings(max_request_tokens=budget, max_batch_size=2), minilm) as client:
            alone = await client.post("/v1/embeddings", json={"model": MODEL, "input": texts})
            assert alone.status_code == 200, alone.text
            text_tokens = alone.json()["usage"]["prompt_tokens"]
            query_tokens = (
                await client.post("/v1/embeddings", json={"model": MODEL, "input": query})
            ).json()["usage"]["prompt_tokens"]
            assert text_tokens <= budget < text_tokens + query_tokens  # the premise of the case below
            over = await client.post("/rerank", json={"query": query, "texts": texts})
            assert over.status_code == 413 and over.json()["error"]["code"] == "too_many_tokens"
            assert "--max-request-tokens" in over.json()["error"]["message"]
            within = await client.post("/rerank", json={"query": query, "texts": texts[:2]})
            assert within.status_code == 200, within.text

    run(go)


class EnteredGate(GatedModel):
    """The gated model that also says when a batch has reached the device (is held at the gate)."""

    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__(model)
        self.entered = threading.Event()

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        self.entered.set()
        return super().embed_token_ids(batch, should_stop)


def test_admission_refuses_rerank_before_reading_it(minilm: EmbeddingModel, tmp_path: Path) -> None:
    log_path = tmp_path / "access.jsonl"

    async def go() -> None:
        gated = EnteredGate(minilm)
        gated.gate.set()
        settings = ServiceSettings(
            queue_size=4, max_inputs=4, max_batch_size=2, max_wait_ms=0, access_log=str(log_path)
        )
        async with serving(settings, gated) as client:
            gated.gate.clear()
            gated.entered.clear()
            held = [asyncio.create_task(client.post("/rerank", json={"query": "q", "texts": ["a"]}))]
            assert await asyncio.to_thread(
                gated.entered.wait, 30
            )  # the worker holds q, a; the queue is empty
            held.append(
                asyncio.create_task(client.post("/rerank", json={"query": "q", "texts": ["b", "c", "d"]}))
            )
            while (await client.get("/health")).json()["queue_depth"] != 4:  # the queue is full
                await asyncio.sleep(0.01)
            full = await client.post(
                "/rerank", json={"query": "q", "texts": ["e"]}, headers={"X-Request-ID": "shed"}
            )
            assert full.status_code == 429 and full.headers["retry-after"]
            assert full.json()["error"]["code"] == "queue_full"
            gated.gate.set()
            assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
            metrics = (await client.get("/metrics")).text
            assert 'embedperf_route_requests_total{route="/rerank",status="200"} 2.0' in metrics
            assert 'embedperf_route_requests_total{route="/rerank",status="429"} 1.0' in metrics
            assert 'embedperf_requests_total{status="429"} 1.0' in metrics
        lines = {line["request_id"]: line for line in map(json.loads, log_path.read_text().splitlines())}
        shed = lines["shed"]
        assert shed["path"] == "/rerank" and shed["status"] == 429 and shed["error"] == "queue_full"
        assert "inputs" not in shed  # refused by the admission middleware: the route never read the body
        served = [line for line in lines.values() if line["path"] == "/rerank" and line["status"] == 200]
        assert sorted(line["inputs"] for line in served) == [2, 4]  # the query counts as an input
        assert all(line["tokens"] > 0 and line["model"] == MODEL for line in served)

    run(go)
