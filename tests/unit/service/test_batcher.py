"""Batcher behaviour with a fake model: batch cuts, queue limits, deadlines, sorting, batching off, overlap."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

from modelcore.encoder import ComputeStopped, StopCheck
from service.batch_errors import DeadlineExceeded, InputTooLong, QueueFull
from service.batch_job import BatcherConfig
from service.batcher import Batcher
from service.metrics import ServiceMetrics

LAYERS = 4  # a fake model with compute_s spends it in this many steps, asking should_stop before each


class FakeEncoder:
    """One token per word plus two specials; embedding row = [token count, first id]; records batches."""

    max_tokens = 16

    def __init__(
        self, compute_s: float = 0.0, gate: threading.Event | None = None, tokenize_s: float = 0.0
    ) -> None:
        self.compute_s = compute_s
        self.tokenize_s = tokenize_s
        self.gate = gate
        self.batches: list[list[int]] = []  # token lengths of each computed batch
        self.stopped: list[list[int]] = []  # token lengths of each batch stopped part-way
        self.computing = threading.Event()  # set once a batch with compute_s has started its first layer
        self.tokenize_threads: set[str] = set()

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        self.tokenize_threads.add(threading.current_thread().name)
        time.sleep(self.tokenize_s)
        limit = max_length or self.max_tokens
        return [([101] + [len(w) for w in text.split()] + [102])[:limit] for text in texts]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        if self.gate is not None:
            assert self.gate.wait(timeout=10)
        if self.compute_s:
            self.computing.set()
        for _ in range(LAYERS if self.compute_s else 0):  # like a model: the stop check runs between layers
            if should_stop is not None and should_stop():
                self.stopped.append([len(ids) for ids in batch])
                raise ComputeStopped()
            time.sleep(self.compute_s / LAYERS)
        self.batches.append([len(ids) for ids in batch])
        return np.array([[len(ids), ids[1]] for ids in batch], dtype=np.float32)


async def _running(encoder: FakeEncoder, **config: object) -> AsyncIterator[Batcher]:
    batcher = Batcher(encoder, BatcherConfig(**config), ServiceMetrics())  # type: ignore[arg-type]
    batcher.start()
    try:
        yield batcher
    finally:
        await asyncio.to_thread(batcher.stop, 10.0)


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, timeout=30))  # type: ignore[arg-type]


def test_results_follow_input_order_and_carry_timings() -> None:
    async def go() -> None:
        encoder = FakeEncoder()
        async for b in _running(encoder, max_wait_ms=1):
            result = await b.submit(["a bb ccc", "dddd", "e"], deadline_ms=5000)
            assert result.embeddings[:, 0].tolist() == [5, 3, 3]
            assert result.embeddings[:, 1].tolist() == [1, 4, 1]
            assert result.token_counts == [5, 3, 3]
            assert result.batch_size == 3 and result.batch_tokens == 15
            assert result.compute_ms >= 0 and result.queue_ms >= 0 and result.tokenize_ms >= 0

    run(go())


def test_batches_are_cut_by_size() -> None:
    async def go() -> None:
        encoder = FakeEncoder(gate=threading.Event())
        async for b in _running(encoder, max_batch_size=4, max_wait_ms=50, sort_by_length=False):
            tasks = [asyncio.create_task(b.submit([f"w{i}"], 5000)) for i in range(10)]
            await asyncio.sleep(0.2)
            encoder.gate.set()  # type: ignore[union-attr]
            results = await asyncio.gather(*tasks)
            assert max(len(batch) for batch in encoder.batches) == 4
            assert sum(len(batch) for batch in encoder.batches) == 10
            assert {r.batch_size for r in results} <= {1, 2, 3, 4}

    run(go())


def test_batches_are_cut_by_padded_tokens() -> None:
    async def go() -> None:
        encoder = FakeEncoder()
        # each input is 10 tokens; 25 padded tokens allow only two per batch
        async for b in _running(encoder, max_batch_size=32, max_batch_tokens=25, max_wait_ms=100):
            await asyncio.gather(*(b.submit([" ".join(["w"] * 8)], 5000) for _ in range(6)))
            assert all(len(batch) * max(batch) <= 25 for batch in encoder.batches)
            assert sum(len(batch) for batch in encoder.batches) == 6

    run(go())


def test_a_lone_input_does_not_wait_for_arrivals_that_may_never_come() -> None:
    async def go() -> None:
        encoder = FakeEncoder()
        # max_wait (60 s) far beyond the deadline (5 s): had the batch waited for arrivals, it would have expired
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=60_000):
            result = await b.submit(["alone"], 5000)
            assert result.batch_size == 1 and encoder.batches == [[3]]

    run(go())


def test_a_free_worker_gathers_arrivals_while_another_batch_computes() -> None:
    """Two workers: while one computes, the free one waits (up to max_wait) for more inputs, so that requests
    arriving a moment apart share a batch instead of each taking a worker alone."""

    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.6)
        async for b in _running(encoder, workers=2, max_batch_size=32, max_wait_ms=300):
            first = asyncio.create_task(b.submit(["first"], 5000))
            assert await asyncio.to_thread(encoder.computing.wait, 5)
            second = asyncio.create_task(b.submit(["second"], 5000))
            await asyncio.sleep(0.1)
            third = asyncio.create_task(b.submit(["third one"], 5000))
            results = await asyncio.gather(first, second, third)
            assert [r.batch_size for r in results] == [1, 2, 2]
            assert encoder.batches == [[3], [3, 4]]

    run(go())


def test_batch_waits_for_inputs_still_being_tokenised() -> None:
    async def go() -> None:
        encoder = FakeEncoder(tokenize_s=0.1)
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=2000):
            first = asyncio.create_task(b.submit(["first"], 5000))
            await asyncio.sleep(0.02)  # "first" is being tokenised; "second" queues behind it
            second = asyncio.create_task(b.submit(["second"], 5000))
            results = await asyncio.gather(first, second)
            assert encoder.batches == [[3, 3]]
            assert all(r.batch_size == 2 for r in results)
            assert results[0].queue_ms >= 50  # it waited for "second" (well under max_wait_ms)

    run(go())


class SlowWordEncoder(FakeEncoder):
    """Tokenising takes 0.1 s, or 2 s when a text contains "slow"."""

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        time.sleep(2.0 if any("slow" in text for text in texts) else 0.1)
        return super().tokenize(texts, max_length)


def test_a_batch_stops_waiting_for_an_input_whose_caller_gave_up() -> None:
    async def go() -> None:
        encoder = SlowWordEncoder()
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=5000):
            t_start_s = time.perf_counter()
            first = asyncio.create_task(b.submit(["first"], 5000))
            await asyncio.sleep(0.02)
            second = asyncio.create_task(b.submit(["slow"], 5000))  # still being tokenised when it gives up
            await asyncio.sleep(0.3)
            second.cancel()
            result = await first
            assert time.perf_counter() - t_start_s < 1.5  # not held until "slow" is tokenised (2.1 s)
            assert result.batch_size == 1

    run(go())


def test_max_wait_bounds_the_wait_for_slow_tokenisation() -> None:
    async def go() -> None:
        encoder = FakeEncoder(tokenize_s=0.4)
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=50):
            first = asyncio.create_task(b.submit(["first"], 5000))
            await asyncio.sleep(0.02)
            second = asyncio.create_task(b.submit(["second"], 5000))
            await asyncio.gather(first, second)
            assert encoder.batches == [[3], [3]]

    run(go())


def test_concurrent_requests_share_a_batch() -> None:
    async def go() -> None:
        # tokenising takes a moment, so all five are accepted before the first can reach the queue alone
        encoder = FakeEncoder(tokenize_s=0.02)
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=200):
            results = await asyncio.gather(*(b.submit([f"r{i}"], 5000) for i in range(5)))
            assert encoder.batches == [[3] * 5]
            assert all(r.batch_size == 5 for r in results)

    run(go())


def test_batching_off_runs_every_request_alone() -> None:
    async def go() -> None:
        encoder = FakeEncoder(gate=threading.Event())
        async for b in _running(encoder, batching=False, max_wait_ms=200):
            tasks = [asyncio.create_task(b.submit([f"r{i}", "x y"], 5000)) for i in range(4)]
            await asyncio.sleep(0.1)
            encoder.gate.set()  # type: ignore[union-attr]
            results = await asyncio.gather(*tasks)
            assert [len(batch) for batch in encoder.batches] == [2, 2, 2, 2]
            assert all(r.batch_size == 2 for r in results)

    run(go())


def test_queue_full_is_refused_and_accepted_work_completes() -> None:
    async def go() -> None:
        encoder = FakeEncoder(gate=threading.Event())
        async for b in _running(encoder, queue_size=4, max_batch_size=2, max_wait_ms=0):
            first = asyncio.create_task(b.submit(["a", "b"], 5000))  # taken by the (blocked) worker
            await asyncio.sleep(0.1)
            queued = asyncio.create_task(b.submit(["c", "d", "e", "f"], 5000))
            await asyncio.sleep(0.1)
            with pytest.raises(QueueFull):
                await b.submit(["g"], 5000)
            encoder.gate.set()  # type: ignore[union-attr]
            assert len((await first).embeddings) == 2
            assert len((await queued).embeddings) == 4
            assert b.queue_depth == 0

    run(go())


def test_expired_requests_are_skipped_not_computed() -> None:
    async def go() -> None:
        encoder = FakeEncoder(gate=threading.Event())
        async for b in _running(encoder, max_batch_size=1, max_wait_ms=0):
            blocker = asyncio.create_task(b.submit(["blocker"], 5000))
            await asyncio.sleep(0.1)
            with pytest.raises(DeadlineExceeded):
                await b.submit(["late one", "late two"], deadline_ms=100)
            encoder.gate.set()  # type: ignore[union-attr]
            await blocker
            await b.submit(["after"], 5000)
            computed = [length for batch in encoder.batches for length in batch]
            assert computed == [3, 3]  # blocker and after; the late inputs (4 tokens) never ran
            assert b.queue_depth == 0

    run(go())


def test_sort_by_length_groups_similar_lengths() -> None:
    async def go() -> None:
        lengths = [1, 12, 2, 11, 1, 12, 2, 11]
        texts = [" ".join(["w"] * n) for n in lengths]
        padded: dict[bool, int] = {}
        for sort in (False, True):
            encoder = FakeEncoder(gate=threading.Event())
            async for b in _running(encoder, max_batch_size=4, max_wait_ms=100, sort_by_length=sort):
                tasks = [asyncio.create_task(b.submit([t], 5000)) for t in ["w"] + texts]
                await asyncio.sleep(0.3)
                encoder.gate.set()  # type: ignore[union-attr]
                await asyncio.gather(*tasks)
                padded[sort] = sum(len(batch) * max(batch) for batch in encoder.batches)
        assert padded[True] < padded[False]

    run(go())


def test_long_inputs_truncated_or_rejected() -> None:
    async def go() -> None:
        long_text = " ".join(["w"] * 40)
        async for b in _running(FakeEncoder(), long_input="truncate", max_wait_ms=0):
            result = await b.submit(["ok", long_text], 5000)
            assert result.token_counts == [3, 16]
        async for b in _running(FakeEncoder(), long_input="reject", max_wait_ms=0):
            with pytest.raises(InputTooLong) as info:
                await b.submit(["ok", long_text], 5000)
            assert info.value.index == 1
            assert b.queue_depth == 0

    run(go())


def test_overlap_switch_moves_tokenisation_off_the_worker() -> None:
    async def go() -> None:
        for overlap, thread in ((True, "embed-tokenizer"), (False, "embed-worker")):
            encoder = FakeEncoder()
            async for b in _running(encoder, overlap_tokenize=overlap, max_wait_ms=0):
                await b.submit(["x"], 5000)
            assert encoder.tokenize_threads == {thread}

    run(go())


def test_stop_drains_accepted_work() -> None:
    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.05)
        batcher = Batcher(encoder, BatcherConfig(max_batch_size=2, max_wait_ms=1000), ServiceMetrics())
        batcher.start()
        tasks = [asyncio.create_task(batcher.submit([f"r{i}"], 5000)) for i in range(6)]
        await asyncio.sleep(0.05)
        await asyncio.to_thread(batcher.stop, 10.0)
        results = await asyncio.gather(*tasks)
        assert len(results) == 6 and sum(len(batch) for batch in encoder.batches) == 6

    run(go())


def test_busy_fraction_and_metrics_track_compute() -> None:
    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.1)
        async for b in _running(encoder, max_wait_ms=0):
            await b.submit(["a", "b c"], 5000)
            assert 0.01 <= b.busy_fraction(window_s=10) <= 1.0  # >= 0.1 s of compute in 10 s
            text = b.metrics.render().decode()
            assert "embedperf_inputs_total 2.0" in text
            assert "embedperf_tokens_total 7.0" in text
            assert "embedperf_batch_size_count 1.0" in text

    run(go())
