"""The service on the real MiniLM through httpx.ASGITransport: API shape, errors, auth, metrics, readiness."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from modelcore.encoder import StopCheck
from modelcore.model import EmbeddingModel, load_model
from service.local_app import create_app
from service.settings import ServiceSettings

SERVER_TIMING = re.compile(
    r"^queue;dur=[\d.]+, tokenize;dur=[\d.]+, compute;dur=[\d.]+, post;dur=[\d.]+, total;dur=[\d.]+$"
)
MODEL = "all-MiniLM-L6-v2"
METRIC_NAMES = (
    "embedperf_requests_total",
    "embedperf_stage_duration_seconds_bucket",
    "embedperf_queue_depth",
    "embedperf_inflight_requests",
    "embedperf_batch_size_bucket",
    "embedperf_batch_tokens_bucket",
    "embedperf_compute_seconds_total",
    "embedperf_tokens_total",
    "embedperf_inputs_total",
    "embedperf_cache_hits_total",
    "embedperf_cache_misses_total",
    "embedperf_ready",
)


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


@asynccontextmanager
async def serving(
    settings: ServiceSettings, model: Any, wait_ready: bool = True, freeze_heap: bool = False
) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the app `embedperf serve` runs (create_app: the same routes and middleware)."""
    app = create_app(settings, model, freeze_heap=freeze_heap)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service", timeout=30) as client:
            if wait_ready:
                for _ in range(600):
                    if (await client.get("/ready")).status_code == 200:
                        break
                    await asyncio.sleep(0.05)
                else:
                    raise AssertionError("service never became ready")
            yield client


def run(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(fn(), timeout=120))


class GatedModel:
    """The real model whose compute waits for a gate: lets a test hold work in the queue."""

    def __init__(self, model: EmbeddingModel) -> None:
        self.model = model
        self.gate = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        assert self.gate.wait(timeout=30)
        return self.model.embed_token_ids(batch, should_stop)


def test_embeddings_shape_headers_and_formats(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(), minilm) as client:
            r = await client.post(
                "/v1/embeddings", json={"input": ["hello world", "你好，世界"], "model": "all-MiniLM-L6-v2"}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["object"] == "list" and body["model"] == "all-MiniLM-L6-v2"
            assert [d["index"] for d in body["data"]] == [0, 1]
            assert all(d["object"] == "embedding" and len(d["embedding"]) == 384 for d in body["data"])
            assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 4
            assert abs(np.linalg.norm(body["data"][0]["embedding"]) - 1) < 1e-4
            assert SERVER_TIMING.match(r.headers["server-timing"]), r.headers["server-timing"]
            assert int(r.headers["x-batch-size"]) >= 2 and int(r.headers["x-batch-tokens"]) > 0

            single = await client.post(
                "/v1/embeddings", json={"model": MODEL, "input": "hello world", "encoding_format": "base64"}
            )
            decoded = np.frombuffer(base64.b64decode(single.json()["data"][0]["embedding"]), dtype="<f4")
            assert np.allclose(decoded, body["data"][0]["embedding"], atol=1e-5)

            short = await client.post(
                "/v1/embeddings", json={"model": MODEL, "input": "hello world", "dimensions": 64}
            )
            vector = np.array(short.json()["data"][0]["embedding"])
            assert vector.shape == (64,) and abs(np.linalg.norm(vector) - 1) < 1e-4

            by_path = await client.post(
                "/v1/embeddings", json={"input": "x", "model": "sentence-transformers/all-MiniLM-L6-v2"}
            )
            assert by_path.status_code == 200

    run(go)


def test_bad_inputs_get_openai_errors_never_500(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(long_input="reject", max_inputs=4), minilm) as client:
            cases: list[tuple[dict[str, Any], int, str]] = [
                ({"json": {"input": ""}}, 400, "empty_input"),
                ({"json": {"input": []}}, 400, "empty_input"),
                ({"json": {"input": ["ok", None]}}, 400, "invalid_input"),
                ({"json": {"input": [101, 2023]}}, 400, "token_ids_unsupported"),
                ({"json": {"input": ["a"] * 5}}, 400, "too_many_inputs"),
                ({"json": {"model": MODEL, "input": "word " * 400}}, 413, "input_too_long"),
                ({"json": {"input": "x"}}, 422, "missing_model"),
                ({"json": {"input": "x", "model": None}}, 422, "missing_model"),
                (
                    {"json": {"model": MODEL, "input": "x"}, "headers": {"content-length": "-5"}},
                    400,
                    "invalid_content_length",
                ),
                ({"json": {"input": "x", "model": "text-embedding-3-large"}}, 404, "model_not_found"),
                ({"json": {"input": "x", "encoding_format": "fp8"}}, 400, "invalid_encoding_format"),
                ({"json": {"input": "x", "dimensions": 1000}}, 400, "invalid_dimensions"),
                (
                    {"content": b"{bad json", "headers": {"content-type": "application/json"}},
                    400,
                    "invalid_json",
                ),
                (
                    {"content": b"input=x", "headers": {"content-type": "text/plain"}},
                    415,
                    "unsupported_media_type",
                ),
            ]
            for kwargs, status, code in cases:
                r = await client.post("/v1/embeddings", **kwargs)
                assert r.status_code == status, (kwargs, r.text)
                error = r.json()["error"]
                assert error["code"] == code and error["message"] and error["type"]
                assert "server-timing" in r.headers
            missing = await client.get("/v1/nothing")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
            wrong_method = await client.get("/v1/embeddings")
            assert wrong_method.status_code == 405 and "error" in wrong_method.json()
            assert (
                await client.post("/v1/embeddings", json={"model": MODEL, "input": "still fine"})
            ).status_code == 200

    run(go)


def test_long_inputs_are_truncated_by_default(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(), minilm) as client:
            r = await client.post("/v1/embeddings", json={"model": MODEL, "input": "word " * 400})
            assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == minilm.max_tokens

    run(go)


def test_with_api_keys_every_route_but_the_probes_needs_one(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        settings = ServiceSettings(api_keys="s3cret,other")
        app = create_app(settings, minilm)
        routes = {
            (method, route.path) for route in app.routes for method in getattr(route, "methods", None) or ()
        }
        assert ("POST", "/v1/embeddings") in routes and ("GET", "/openapi.json") in routes
        assert not {path for _, path in routes} & {"/docs", "/redoc"}  # they would load scripts from a CDN
        async with serving(settings, minilm) as client:
            for method, path in sorted(routes):
                missing = await client.request(method, path)
                wrong = await client.request(method, path, headers={"Authorization": "Bearer nope"})
                right = await client.request(method, path, headers={"Authorization": "Bearer other"})
                if path in ("/health", "/ready"):
                    assert missing.status_code == 200, (method, path)
                    continue
                for refused in (missing, wrong):
                    assert refused.status_code == 401, (method, path, refused.status_code)
                    assert refused.headers["www-authenticate"] == "Bearer"
                    if method != "HEAD":
                        assert refused.json()["error"]["code"] == "invalid_api_key"
                assert right.status_code != 401, (method, path)
            for path in ("/docs", "/redoc"):
                assert (await client.get(path, headers={"Authorization": "Bearer s3cret"})).status_code == 404
            ok = await client.post(
                "/v1/embeddings",
                json={"model": MODEL, "input": "x"},
                headers={"Authorization": "Bearer other"},
            )
            assert ok.status_code == 200
            info = (await client.get("/info", headers={"Authorization": "Bearer s3cret"})).json()
            assert "s3cret" not in str(info) and info["config"]["auth_enabled"] is True

    run(go)


def test_info_health_and_metrics(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(cache_size=16), minilm) as client:
            for _ in range(2):
                assert (
                    await client.post(
                        "/v1/embeddings", json={"model": MODEL, "input": ["cached text", "other"]}
                    )
                ).status_code == 200
            info = (await client.get("/info")).json()
            assert {
                "model",
                "model_path",
                "dimension",
                "max_tokens",
                "pooling",
                "device",
                "precision",
                "config",
                "weights_sha256",
                "versions",
                "pid",
                "started_unix_s",
            } <= set(info)
            assert info["dimension"] == 384 and info["max_tokens"] == 256 and info["pooling"] == "mean"
            assert re.fullmatch(r"[0-9a-f]{64}", info["weights_sha256"]["model.safetensors"])
            assert {"python", "torch", "transformers"} <= set(info["versions"])
            assert info["config"]["cache_size"] == 16
            health = (await client.get("/health")).json()
            assert health["status"] == "ok" and health["device"] == "cpu" and 0 <= health["busy_frac"] <= 1
            text = (await client.get("/metrics")).text
            for name in METRIC_NAMES:
                assert name in text, name
            assert 'embedperf_requests_total{status="200"} 2.0' in text
            assert "embedperf_cache_hits_total 2.0" in text and "embedperf_cache_misses_total 2.0" in text
            assert 'embedperf_stage_duration_seconds_count{stage="compute"} 2.0' in text
            assert "embedperf_ready 1.0" in text

    run(go)


def test_not_ready_until_warmup_has_run(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        gated = GatedModel(minilm)
        async with serving(ServiceSettings(), gated, wait_ready=False) as client:
            await asyncio.sleep(0.2)
            assert (await client.get("/ready")).status_code == 503
            assert (await client.get("/health")).status_code == 200
            r = await client.post("/v1/embeddings", json={"model": MODEL, "input": "x"})
            assert r.status_code == 503 and r.json()["error"]["code"] == "model_not_ready"
            gated.gate.set()
            for _ in range(200):
                if (await client.get("/ready")).status_code == 200:
                    break
                await asyncio.sleep(0.05)
            assert (await client.get("/ready")).status_code == 200

    run(go)


def test_overload_queue_full_concurrency_and_deadline(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        gated = GatedModel(minilm)
        gated.gate.set()
        settings = ServiceSettings(
            queue_size=4, max_inputs=4, max_batch_size=2, max_wait_ms=0, deadline_ms=2000
        )
        async with serving(settings, gated) as client:
            gated.gate.clear()
            held = [
                asyncio.create_task(client.post("/v1/embeddings", json={"model": MODEL, "input": ["a", "b"]}))
            ]
            await asyncio.sleep(0.1)  # the worker holds a, b; the queue is empty
            held.append(
                asyncio.create_task(
                    client.post("/v1/embeddings", json={"model": MODEL, "input": ["c", "d", "e", "f"]})
                )
            )
            await asyncio.sleep(0.1)
            full = await client.post("/v1/embeddings", json={"model": MODEL, "input": "g"})
            assert (
                full.status_code == 429
                and full.headers["retry-after"]
                and full.json()["error"]["code"] == "queue_full"
            )
            late = await asyncio.gather(*held)
            assert [r.status_code for r in late] == [503, 503]
            assert late[1].json()["error"]["code"] == "deadline_exceeded"
            gated.gate.set()
            after = await client.post("/v1/embeddings", json={"model": MODEL, "input": "h"})
            assert after.status_code == 200, after.text
            metrics = (await client.get("/metrics")).text
            assert 'embedperf_requests_total{status="429"} 1.0' in metrics

        async with serving(ServiceSettings(max_concurrency=1, max_wait_ms=0), gated) as client:
            gated.gate.clear()
            first = asyncio.create_task(client.post("/v1/embeddings", json={"model": MODEL, "input": "a"}))
            await asyncio.sleep(0.1)
            second = await client.post("/v1/embeddings", json={"model": MODEL, "input": "b"})
            assert (
                second.status_code == 429 and second.json()["error"]["code"] == "too_many_concurrent_requests"
            )
            gated.gate.set()
            assert (await first).status_code == 200

        async with serving(ServiceSettings(rate_limit_qps=1), minilm) as client:
            codes = [
                (await client.post("/v1/embeddings", json={"model": MODEL, "input": "x"})).status_code
                for _ in range(3)
            ]
            assert codes[0] == 200 and 429 in codes

    run(go)


def test_skipped_work_is_not_computed(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        gated = GatedModel(minilm)
        gated.gate.set()
        async with serving(
            ServiceSettings(max_batch_size=1, max_wait_ms=0, deadline_ms=2000), gated
        ) as client:
            before = (await client.get("/metrics")).text
            gated.gate.clear()
            held = asyncio.create_task(client.post("/v1/embeddings", json={"model": MODEL, "input": "held"}))
            await asyncio.sleep(0.05)
            while (await client.get("/health")).json()["queue_depth"]:  # "held" is at the gate, queue empty
                await asyncio.sleep(0.02)
            late = await client.post(
                "/v1/embeddings", json={"model": MODEL, "input": ["late 1", "late 2", "late 3"]}
            )
            assert late.status_code == 503
            gated.gate.set()
            # "held" was already in its batch when the gate closed; past its deadline nobody waits for it, so
            # the batch stops at its first layer
            assert (await held).status_code == 503
            assert (
                await client.post("/v1/embeddings", json={"model": MODEL, "input": "after"})
            ).status_code == 200
            after = (await client.get("/metrics")).text

            def inputs(text: str) -> float:
                return float(re.search(r"^embedperf_inputs_total ([\d.]+)$", text, re.M).group(1))  # type: ignore[union-attr]

            assert inputs(after) - inputs(before) == 1.0  # "after" only; the three late inputs never ran
            assert re.search(r"^embedperf_stopped_batches_total 1\.0$", after, re.M)

    run(go)


def test_every_response_carries_a_request_id_found_in_the_access_log(
    minilm: EmbeddingModel, tmp_path: Path
) -> None:
    log_path = tmp_path / "access.jsonl"

    async def go() -> None:
        async with serving(ServiceSettings(access_log=str(log_path), max_inputs=4), minilm) as client:
            mine = await client.post(
                "/v1/embeddings",
                json={"model": MODEL, "input": ["a", "b c"]},
                headers={"X-Request-ID": "run-7/42"},
            )
            assert mine.status_code == 200 and mine.headers["x-request-id"] == "run-7/42"
            assert mine.headers["x-served-model"] == mine.json()["model"] == MODEL
            fresh = await client.post("/v1/embeddings", json={"model": MODEL, "input": ["a"] * 5})
            assert fresh.status_code == 400 and re.fullmatch(r"[0-9a-f]{32}", fresh.headers["x-request-id"])
            for path in ("/health", "/nothing", "/metrics"):
                assert re.fullmatch(r"[0-9a-f]{32}", (await client.get(path)).headers["x-request-id"]), path
            info = (await client.get("/info")).json()
            assert info["model"] == MODEL and info["fallback_model"] is None
        lines = [json.loads(line) for line in log_path.read_text().splitlines()]
        by_id = {line["request_id"]: line for line in lines}
        served = by_id["run-7/42"]
        assert served["status"] == 200 and served["path"] == "/v1/embeddings" and served["model"] == MODEL
        assert served["inputs"] == 2 and served["tokens"] == mine.json()["usage"]["prompt_tokens"]
        assert {"queue_ms", "tokenize_ms", "compute_ms", "total_ms"} <= set(served)
        refused = by_id[fresh.headers["x-request-id"]]
        assert refused["status"] == 400 and refused["error"] == "too_many_inputs" and "model" not in refused
        gets = [(line["path"], line["status"]) for line in lines if line["method"] == "GET"]
        assert gets[-5:] == [
            ("/ready", 200),
            ("/health", 200),
            ("/nothing", 404),
            ("/metrics", 200),
            ("/info", 200),
        ]

    run(go)
