"""The service against hostile and unlucky clients (httpx.ASGITransport, real MiniLM): every abuse gets a
JSON 4xx and costs only its own request."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from modelcore.encoder import ComputeStopped, StopCheck
from modelcore.model import EmbeddingModel, load_model
from service import request_io
from service.local_app import create_app
from service.request_io import TRUNCATE_CHARS_PER_TOKEN
from service.settings import ServiceSettings
from tests.integration.service.test_service_api import MODEL, GatedModel, run, serving

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


class SpyModel(GatedModel):
    """Records the length of every text handed to the tokeniser."""

    def __init__(self, model: EmbeddingModel) -> None:
        super().__init__(model)
        self.gate.set()
        self.tokenized_chars: list[int] = []

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        self.tokenized_chars += [len(text) for text in texts]
        return self.model.tokenize(texts, max_length)


class FaultyModel(GatedModel):
    """Out of memory above `fits` inputs per batch; a plain device error while `broken`."""

    def __init__(self, model: EmbeddingModel, fits: int) -> None:
        super().__init__(model)
        self.gate.set()
        self.fits = fits
        self.broken = False
        self.batch_sizes: list[int] = []

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        if self.broken:
            raise RuntimeError("device lost: stream synchronize failed")
        if len(batch) > self.fits:
            raise RuntimeError("NPU out of memory. Tried to allocate 1.00 GiB")
        self.batch_sizes.append(len(batch))
        return self.model.embed_token_ids(batch, should_stop)


def assert_error(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["type"], error


async def chunks(parts: int, size: int, hold: asyncio.Event | None = None) -> AsyncIterator[bytes]:
    """A chunked upload (no Content-Length); with `hold`, it stalls after the first chunk until set."""
    for index in range(parts):
        yield b" " * size
        if hold is not None and index == 0:
            await hold.wait()


def test_oversized_bodies_get_413_before_and_while_reading(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        async with serving(ServiceSettings(max_body_bytes=1024 * 1024), minilm) as client:
            big = json.dumps({"input": "x" * (2 * 1024 * 1024)}).encode()
            declared = await asyncio.gather(
                *(client.post("/v1/embeddings", content=big, headers=JSON) for _ in range(4))
            )
            for response in declared:
                assert_error(response, 413, "request_too_large")
            streamed = await client.post("/v1/embeddings", content=chunks(40, 64 * 1024), headers=JSON)
            assert_error(streamed, 413, "request_too_large")
            assert (
                await client.post("/v1/embeddings", json={"model": MODEL, "input": "fine"})
            ).status_code == 200

    run(go)


def test_slow_bodies_time_out_and_hold_no_slot(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        settings = ServiceSettings(max_concurrency=1, body_timeout_s=1.0)
        async with serving(settings, minilm) as client:
            hold = asyncio.Event()
            slow = asyncio.create_task(
                client.post("/v1/embeddings", content=chunks(2, 16, hold), headers=JSON)
            )
            await asyncio.sleep(0.1)
            # the slow upload holds no concurrency slot: a real request is served meanwhile
            assert (
                await client.post("/v1/embeddings", json={"model": MODEL, "input": "real"})
            ).status_code == 200
            assert_error(await slow, 408, "request_timeout")
            hold.set()

    run(go)


def test_invalid_unicode_nesting_and_poison_inputs_are_400_for_them_only(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        # a deadline long enough that a slow shared host never sheds any of the 30 concurrent requests
        async with serving(ServiceSettings(deadline_ms=120_000), minilm) as client:
            poison = b'{"input": ["fine", "bad \\ud800 text"]}'
            cases = [
                (b'{"input": "\\ud800"}', "invalid_unicode"),
                (poison, "invalid_unicode"),
                (b'{"input": "\xff\xfe bytes"}', "invalid_json"),
                (b'{"input": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "invalid_json"),
            ]
            for body, code in cases:
                assert_error(await client.post("/v1/embeddings", content=body, headers=JSON), 400, code)
            mixed = await asyncio.gather(
                *(
                    client.post("/v1/embeddings", content=poison, headers=JSON)
                    if i % 3 == 0
                    else client.post(
                        "/v1/embeddings", json={"model": MODEL, "input": [f"valid {i}", "other"]}
                    )
                    for i in range(30)
                )
            )
            assert [r.status_code for r in mixed] == [400 if i % 3 == 0 else 200 for i in range(30)]

    run(go)


def test_inputs_are_cut_before_tokenising(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        spy = SpyModel(minilm)
        async with serving(ServiceSettings(), spy) as client:
            r = await client.post(
                "/v1/embeddings", json={"model": MODEL, "input": ["word " * 200_000, "short"]}
            )
            assert r.status_code == 200 and r.json()["usage"]["prompt_tokens"] == minilm.max_tokens + 3
            assert max(spy.tokenized_chars) == minilm.max_tokens * TRUNCATE_CHARS_PER_TOKEN
        spy.tokenized_chars.clear()
        settings = ServiceSettings(long_input="reject", max_input_chars=5000)
        async with serving(settings, spy, wait_ready=True) as client:
            warm = len(spy.tokenized_chars)
            r = await client.post("/v1/embeddings", json={"model": MODEL, "input": ["ok", "x" * 5001]})
            assert_error(r, 413, "input_too_long")
            assert r.json()["error"]["message"].startswith("input[1] has 5001 characters")
            assert len(spy.tokenized_chars) == warm  # refused before the tokeniser saw it

    run(go)


def test_protocol_details_allow_head_openapi_and_model_names(
    minilm: EmbeddingModel, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        with caplog.at_level(logging.INFO, logger="service.app"):
            async with serving(ServiceSettings(), minilm) as client:
                wrong = await client.get("/v1/embeddings")
                assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
                for path in ("/health", "/ready"):
                    head = await client.head(path)
                    assert head.status_code == 200 and head.content == b"", path
                document = (await client.get("/openapi.json")).json()
                body = document["paths"]["/v1/embeddings"]["post"]["requestBody"]
                schema = body["content"]["application/json"]["schema"]
                assert schema["required"] == ["input", "model"]
                assert schema["properties"]["dimensions"]["maximum"] == 384
                assert MODEL in schema["properties"]["model"]["enum"]
                evil = await client.post(
                    "/v1/embeddings", json={"input": "x", "model": "evil/all-MiniLM-L6-v2"}
                )
                assert_error(evil, 404, "model_not_found")
                for name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
                    ok = await client.post("/v1/embeddings", json={"input": "x", "model": name})
                    assert ok.status_code == 200, name
        assert any(re.match(r"auth: off", record.getMessage()) for record in caplog.records)

    run(go)


def test_a_disconnected_client_is_not_computed(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        gated = GatedModel(minilm)
        gated.gate.set()
        async with serving(ServiceSettings(max_batch_size=1, max_wait_ms=0), gated) as client:
            gated.gate.clear()
            held = asyncio.create_task(client.post("/v1/embeddings", json={"model": MODEL, "input": "held"}))
            await asyncio.sleep(0.1)
            gone = asyncio.create_task(
                client.post("/v1/embeddings", json={"model": MODEL, "input": ["gone 1", "gone 2"]})
            )
            await asyncio.sleep(0.1)
            gone.cancel()  # the client hangs up while its inputs wait in the queue
            await asyncio.gather(gone, return_exceptions=True)
            health = (await client.get("/health")).json()
            assert health["queue_depth"] == 0
            gated.gate.set()
            assert (await held).status_code == 200
            metrics = (await client.get("/metrics")).text
            assert re.search(r"^embedperf_inputs_total 2\.0$", metrics, re.M)  # warm-up (1) + held
            assert 'embedperf_abandoned_total{reason="cancelled"} 1.0' in metrics

    run(go)


def test_the_model_asks_before_every_layer_and_stops_when_told(minilm: EmbeddingModel) -> None:
    ids = minilm.tokenize(["a sentence nobody waits for any more"])
    asked: list[int] = []

    def never() -> bool:
        asked.append(1)
        return False

    def after_two_layers() -> bool:
        asked.append(1)
        return len(asked) > 2

    full = minilm.embed_token_ids(ids, never)
    assert len(asked) >= 6  # all-MiniLM-L6-v2: six encoder layers, asked before every module of each
    asked.clear()
    with pytest.raises(ComputeStopped):
        minilm.embed_token_ids(ids, after_two_layers)
    assert len(asked) == 3
    np.testing.assert_array_equal(minilm.embed_token_ids(ids), full)  # nothing of the stop is left behind


def embedding_scope(body: bytes) -> dict[str, Any]:
    """The ASGI scope uvicorn builds for a POST /v1/embeddings with this JSON body."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/embeddings",
        "raw_path": b"/v1/embeddings",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8086),
    }


async def post_then_hang_up(app: Any, body: bytes, hang_up: asyncio.Event) -> tuple[list[dict[str, Any]], int]:
    """POST body straight to the ASGI app; once hang_up is set (at the latest when the app returns), its receive
    channel says http.disconnect, as uvicorn's does when the connection drops. Returns what the app sent and
    how many times it read the channel."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []
    reads = [0]

    async def receive() -> dict[str, Any]:
        reads[0] += 1
        if pending:
            return pending.pop()
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(embedding_scope(body), receive, send)
    hang_up.set()  # a watch still waiting ends
    return sent, reads[0]


def test_the_hang_up_watch_starts_only_for_a_request_still_running_after_its_delay(
    minilm: EmbeddingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request answered before HANG_UP_WATCH_AFTER_S reads its receive channel once (the body); one still
    running then also waits on it for http.disconnect."""
    outcomes: dict[float, tuple[int, int]] = {}

    async def go() -> None:
        app = create_app(ServiceSettings(max_wait_ms=0), minilm)
        async with app.router.lifespan_context(app):
            while not app.state.service.ready:
                await asyncio.sleep(0.05)
            body = json.dumps({"model": MODEL, "input": "watched or not"}).encode()
            for after_s in (30.0, 0.0):
                monkeypatch.setattr(request_io, "HANG_UP_WATCH_AFTER_S", after_s)
                sent, reads = await post_then_hang_up(app, body, asyncio.Event())
                outcomes[after_s] = sent[0]["status"], reads

    run(go)
    assert outcomes == {30.0: (200, 1), 0.0: (200, 2)}


def test_a_hang_up_seen_on_the_receive_channel_frees_its_slot_and_work_at_once(
    minilm: EmbeddingModel, tmp_path: Path
) -> None:
    async def go() -> None:
        gated = GatedModel(minilm)
        gated.gate.set()
        log_path = tmp_path / "access.jsonl"
        settings = ServiceSettings(
            max_concurrency=2, max_batch_size=1, max_wait_ms=0, access_log=str(log_path)
        )
        app = create_app(settings, gated)
        state = app.state.service
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://service", timeout=30
            ) as client:
                while (await client.get("/ready")).status_code != 200:
                    await asyncio.sleep(0.05)
                before = (await client.get("/metrics")).text
                gated.gate.clear()
                computing = asyncio.create_task(
                    client.post("/v1/embeddings", json={"model": MODEL, "input": "computing"})
                )
                while state.batcher.queue_depth or state.concurrency.inflight < 1:
                    await asyncio.sleep(0.01)
                hang_up = asyncio.Event()
                body = json.dumps({"model": MODEL, "input": ["queued", "twice"]}).encode()
                queued = asyncio.create_task(post_then_hang_up(app, body, hang_up))
                while state.batcher.queue_depth != 2:
                    await asyncio.sleep(0.01)
                assert state.concurrency.inflight == 2
                hang_up.set()
                sent, _ = await queued
                assert sent[0]["status"] == 499
                assert state.concurrency.inflight == 1 and state.batcher.queue_depth == 0
                gated.gate.set()
                assert (await computing).status_code == 200
                after = (await client.get("/metrics")).text
        assert 'embedperf_abandoned_total{reason="disconnected"} 1.0' in after
        assert metric(after, "embedperf_inputs_total") - metric(before, "embedperf_inputs_total") == 1.0
        statuses = [json.loads(line)["status"] for line in log_path.read_text().splitlines()]
        assert 499 in statuses and statuses.count(499) == 1

    run(go)


def test_the_2048_input_request_of_300_words_each_is_refused_while_a_small_one_beside_it_is_served(
    minilm: EmbeddingModel,
) -> None:
    """A legal-looking request of 2,048 inputs of ~300 words (~4 MB) would hold the device for minutes on
    CPU: it exceeds the per-request token budget after its first slice is tokenised, and is never computed."""

    async def go() -> None:
        spy = SpyModel(minilm)
        async with serving(ServiceSettings(), spy) as client:
            before = (await client.get("/metrics")).text
            vocabulary = [
                "the",
                "service",
                "batches",
                "requests",
                "of",
                "many",
                "users",
                "on",
                "one",
                "device",
                "and",
                "answers",
                "each",
            ]
            words = " ".join(vocabulary[i % len(vocabulary)] for i in range(300))  # ~1,700 characters
            huge = client.post(
                "/v1/embeddings", json={"model": MODEL, "input": [f"{i} {words}" for i in range(2048)]}
            )
            small = client.post("/v1/embeddings", json={"model": MODEL, "input": "a small request"})
            refused, served = await asyncio.gather(huge, small)
            assert (
                3_000_000 < int(refused.request.headers["content-length"]) <= 4 * 1024 * 1024
            )  # within limits
            assert_error(refused, 413, "too_many_tokens")
            assert "--max-request-tokens" in refused.json()["error"]["message"]
            assert served.status_code == 200
            long_texts = [chars for chars in spy.tokenized_chars if chars > 1000]
            assert 0 < len(long_texts) <= 64  # one slice was tokenised, not 2,048 inputs
            after = (await client.get("/metrics")).text
            assert metric(after, "embedperf_inputs_total") - metric(before, "embedperf_inputs_total") == 1.0

    run(go)


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def test_device_faults_degrade_and_show_in_health_metrics_and_ready(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        faulty = FaultyModel(minilm, fits=4)
        settings = ServiceSettings(max_batch_size=16, warmup=False)
        async with serving(settings, faulty) as client:
            r = await client.post(
                "/v1/embeddings", json={"model": MODEL, "input": [f"text {i}" for i in range(16)]}
            )
            assert r.status_code == 200 and len(r.json()["data"]) == 16
            assert max(faulty.batch_sizes) == 4
            health = (await client.get("/health")).json()
            assert health["batch_limit"] == 4 and health["oom_total"] >= 2 and health["ready"] is True
            assert "embedperf_batch_limit 4.0" in (await client.get("/metrics")).text
            faulty.broken = True
            for _ in range(3):
                assert_error(
                    await client.post("/v1/embeddings", json={"model": MODEL, "input": "x"}),
                    500,
                    "inference_failed",
                )
            ready = await client.get("/ready")
            assert ready.status_code == 503 and ready.json()["status"] == "degraded"
            assert int(ready.headers["retry-after"]) >= 1
            assert (await client.get("/health")).json()["device_healthy"] is False

    run(go)


class SlowModel(GatedModel):
    """Computes no faster than 50 ms per input, so the service's per-input estimate has a known floor."""

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        time.sleep(0.05 * len(batch))
        return super().embed_token_ids(batch, should_stop)


def test_overload_is_shed_before_the_body_is_read_with_retry_after(minilm: EmbeddingModel) -> None:
    async def go() -> None:
        slow = SlowModel(minilm)
        slow.gate.set()
        settings = ServiceSettings(max_batch_size=2, max_wait_ms=0, deadline_ms=5000, admit_wait_share=0.1)
        async with serving(settings, slow) as client:
            slow.gate.clear()
            held: list[asyncio.Task[Any]] = []
            for i in range(30):  # queue inputs (>= 50 ms each) until the estimate passes 10 % of 5 s
                task = asyncio.create_task(
                    client.post("/v1/embeddings", json={"model": MODEL, "input": f"q{i}"})
                )
                await asyncio.sleep(0.05)
                if task.done():
                    assert_error(task.result(), 429, "overloaded")
                    break
                held.append(task)
            else:
                raise AssertionError("nothing was shed")
            # refused before the (invalid) body is even parsed: shedding costs no body read
            shed = await client.post("/v1/embeddings", content=b"{not json", headers=JSON)
            assert_error(shed, 429, "overloaded")
            assert int(shed.headers["retry-after"]) >= 1 and "server-timing" in shed.headers
            health = (await client.get("/health")).json()
            assert health["queue_depth"] >= 1 and health["estimated_wait_ms"] >= 50 * health["queue_depth"]
            slow.gate.set()
            assert {r.status_code for r in await asyncio.gather(*held)} == {200}
            metrics = (await client.get("/metrics")).text
            assert 'embedperf_shed_total{reason="estimated_wait"} 2.0' in metrics
            assert 'embedperf_requests_total{status="429"} 2.0' in metrics

    run(go)


def test_the_service_process_freezes_its_start_up_heap_once_ready(minilm: EmbeddingModel) -> None:
    """Full collections must not walk the model and libraries while serving (they stalled /health ~0.2 s)."""

    async def go(freeze_heap: bool) -> int:
        before = gc.get_freeze_count()
        async with serving(ServiceSettings(), minilm, freeze_heap=freeze_heap) as client:
            assert (await client.get("/health")).status_code == 200
            return gc.get_freeze_count() - before

    thresholds = gc.get_threshold()
    try:
        assert asyncio.run(go(False)) == 0  # an app embedded in another process leaves its heap alone
        assert gc.get_threshold() == thresholds
        frozen = asyncio.run(go(True))
        assert frozen > 10_000, frozen  # at least the loaded model's module tree
        assert gc.get_threshold()[2] >= 100  # full collections of what is left are rarer
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
