"""--compute-sleep-ms: batches sleep instead of computing, the GIL released, and are answered unit vectors."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from modelcore.encoder import StopCheck
from service.local_engine import LocalEngine
from service.metrics import ServiceMetrics
from service.settings import ServiceSettings
from service.sleep_compute import SleepCompute


class NeverComputes:
    """A model whose forward pass must not run."""

    max_tokens = 32
    dimension = 8

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        return [[101, len(text), 102] for text in texts]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        raise AssertionError("the model computed under --compute-sleep-ms")


def test_a_batch_sleeps_with_the_gil_released_and_gets_unit_vectors() -> None:
    encoder = SleepCompute(NeverComputes(), sleep_ms=60, dimension=8)
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    t_start_s = time.perf_counter()
    vectors = encoder.embed_token_ids(encoder.tokenize(["a", "bb", "ccc"]))
    elapsed_s = time.perf_counter() - t_start_s
    ticks_during = ticks
    stop.set()
    counter.join()
    assert elapsed_s >= 0.06
    assert ticks_during > 10_000  # the other thread ran throughout: the sleep held no GIL
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert encoder.tokenize(["abcd"]) == [[101, 4, 102]] and encoder.max_tokens == 32


def test_the_engine_serves_sleeping_batches_instead_of_the_model() -> None:
    settings = ServiceSettings(compute_sleep_ms=50, workers=1, max_wait_ms=0, graphs="off")
    engine = LocalEngine(settings, NeverComputes(), ServiceMetrics())  # type: ignore[arg-type]

    async def run() -> tuple[np.ndarray, float]:
        await engine.start()  # its warm-up batch sleeps too
        assert engine.batcher is not None
        t_start_s = time.perf_counter()
        result = await engine.batcher.submit(["one", "two"], deadline_ms=5000)
        elapsed_s = time.perf_counter() - t_start_s
        await engine.stop(grace_s=1)
        return np.asarray(result.embeddings), elapsed_s

    vectors, elapsed_s = asyncio.run(run())
    assert vectors.shape == (2, 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    assert elapsed_s >= 0.05


def test_the_sleep_is_bounded() -> None:
    with pytest.raises(ValueError):
        ServiceSettings(compute_sleep_ms=-1)
    with pytest.raises(ValueError):
        ServiceSettings(compute_sleep_ms=20_000)
