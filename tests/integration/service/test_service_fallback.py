"""The lightweight fallback on the real app: while the main model (a stand-in kept busy) stays above the busy
threshold, requests are answered by the fallback (the main model at int8) and say so; when the load drops,
the main model answers again. /info names the fallback and /metrics counts the requests each model served."""

from __future__ import annotations

import asyncio
import re
import time

import numpy as np
import pytest

from modelcore.encoder import StopCheck
from modelcore.model import EmbeddingModel, load_model
from service.settings import ServiceSettings
from tests.integration.service.test_service_api import MODEL, GatedModel, run, serving

FALLBACK = f"{MODEL}@int8"
MOST_REQUESTS = 2000  # bounds every loop below: the switch is expected after a few dozen


@pytest.fixture(scope="module")
def minilm() -> EmbeddingModel:
    return load_model()


class BusyModel(GatedModel):
    """The real model, but every batch keeps the device busy for at least 50 ms."""

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        time.sleep(0.05)
        return super().embed_token_ids(batch, should_stop)


def served_count(metrics: str, model: str) -> float:
    match = re.search(
        rf'^embedperf_served_requests_total{{model="{re.escape(model)}"}} ([\d.]+)$', metrics, re.M
    )
    return float(match.group(1)) if match else 0.0


def test_requests_go_to_the_fallback_while_busy_and_back_to_the_main_model_after(
    minilm: EmbeddingModel,
) -> None:
    async def go() -> None:
        busy = BusyModel(minilm)
        busy.gate.set()
        settings = ServiceSettings(
            fallback_precision="int8", fallback_busy_threshold=0.5, fallback_window_s=0.5, deadline_ms=60_000
        )
        body = {"model": MODEL, "input": "which model answered me?"}
        async with serving(settings, busy) as client:
            info = (await client.get("/info")).json()
            assert info["model"] == MODEL and info["fallback_model"] == FALLBACK
            answers: list[tuple[str, str, list[float]]] = []
            stop = asyncio.Event()

            async def keep_busy() -> None:
                while not stop.is_set() and len(answers) < MOST_REQUESTS:
                    r = await client.post("/v1/embeddings", json=body)
                    assert r.status_code == 200, r.text
                    answers.append(
                        (r.json()["model"], r.headers["x-served-model"], r.json()["data"][0]["embedding"])
                    )
                    if r.headers["x-served-model"] == FALLBACK:
                        stop.set()

            await asyncio.gather(*(keep_busy() for _ in range(4)))
            assert stop.is_set(), "the fallback never took over"
            assert all(model == header for model, header, _ in answers)  # the body and the header agree
            fallback_vector = next(vector for model, _, vector in answers if model == FALLBACK)
            health = (await client.get("/health")).json()
            assert health["serving_fallback"] is True
            served = [model for model, _, _ in answers]
            for _ in range(MOST_REQUESTS):  # the load has dropped: once a window has passed, the main model
                await asyncio.sleep(0.1)
                r = await client.post("/v1/embeddings", json=body)
                served.append(r.json()["model"])
                if r.headers["x-served-model"] == MODEL:
                    break
            assert served[-1] == MODEL and not (await client.get("/health")).json()["serving_fallback"]
            cosine = float(np.dot(r.json()["data"][0]["embedding"], fallback_vector))
            assert 0.9 < cosine < 0.99999  # int8 vectors: close to the main model's, not the same
            metrics = (await client.get("/metrics")).text
            assert served_count(metrics, FALLBACK) == served.count(FALLBACK) >= 1
            assert served_count(metrics, MODEL) == served.count(MODEL)
            fallback_total = re.search(r"^embedperf_fallback_requests_total ([\d.]+)$", metrics, re.M)
            assert fallback_total and float(fallback_total.group(1)) == served.count(FALLBACK)

    run(go)
