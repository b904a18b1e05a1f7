"""Batcher under faults: poison inputs, callers that give up, out-of-memory, device errors, load shedding."""

from __future__ import annotations

import asyncio
import os
import threading

import numpy as np
import pytest

from modelcore.encoder import StopCheck
from service.batch_errors import ComputeFailed, InvalidInput, Overloaded, QueueFull
from service.batch_job import CLIENT_DISCONNECTED, COMPUTE_NICE, BatcherConfig, BatchResult
from service.batcher import Batcher
from service.degrade import DeviceHealth, is_out_of_memory
from service.metrics import ServiceMetrics
from tests.unit.service.test_batcher import FakeEncoder, _running, run


class PoisonEncoder(FakeEncoder):
    """Tokenising any text that holds a lone surrogate fails the whole call, as the Rust tokeniser does."""

    def __init__(self, tokenize_s: float = 0.0) -> None:
        super().__init__(tokenize_s=tokenize_s)
        self.calls: list[int] = []

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        self.calls.append(len(texts))
        if any("\ud800" in text for text in texts):
            raise ValueError("surrogates not allowed")
        return super().tokenize(texts, max_length)


class OomEncoder(FakeEncoder):
    """Runs out of memory on batches larger than fits; raises a plain device error while `broken` is set."""

    def __init__(self, fits: int) -> None:
        super().__init__()
        self.fits = fits
        self.broken = False

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        if self.broken:
            raise RuntimeError("device lost: ACL stream synchronize failed")
        if len(batch) > self.fits:
            raise RuntimeError(f"NPU out of memory. Tried to allocate 2.00 GiB (batch {len(batch)})")
        return super().embed_token_ids(batch, should_stop)


def test_a_poison_input_fails_only_its_own_request() -> None:
    async def go() -> None:
        encoder = PoisonEncoder(tokenize_s=0.2)
        async for b in _running(encoder, max_wait_ms=0):
            first = asyncio.create_task(b.submit(["first"], 5000))
            await asyncio.sleep(0.05)  # "first" is being tokenised; the rest queue into one combined call
            good = [asyncio.create_task(b.submit([f"good {i}"], 5000)) for i in range(5)]
            poison = asyncio.create_task(b.submit(["bad \ud800"], 5000))
            results = await asyncio.gather(first, *good, poison, return_exceptions=True)
            assert all(not isinstance(r, BaseException) for r in results[:-1]), results
            assert isinstance(results[-1], InvalidInput)
            assert 6 in encoder.calls  # the combined call failed and was retried per request
            assert b.queue_depth == 0

    run(go())


def test_a_cancelled_caller_releases_its_queue_space_and_is_not_computed() -> None:
    async def go() -> None:
        encoder = FakeEncoder(gate=threading.Event())
        async for b in _running(encoder, max_batch_size=1, max_wait_ms=0, queue_size=4):
            blocker = asyncio.create_task(b.submit(["blocker"], 5000))
            await asyncio.sleep(0.1)
            gone = asyncio.create_task(b.submit(["gone a", "gone b", "gone c"], 5000))
            await asyncio.sleep(0.1)
            assert b.queue_depth == 3
            gone.cancel()
            with pytest.raises(asyncio.CancelledError):
                await gone
            assert b.queue_depth == 0
            encoder.gate.set()  # type: ignore[union-attr]
            await blocker
            await b.submit(["after"], 5000)
            assert [len(batch) for batch in encoder.batches] == [1, 1]  # blocker, after; never "gone"
            assert 'embedperf_abandoned_total{reason="cancelled"} 1.0' in b.metrics.render().decode()

    run(go())


async def running_and_queued(
    b: Batcher, encoder: FakeEncoder
) -> tuple[asyncio.Task[BatchResult], asyncio.Task[BatchResult]]:
    """A request computing (encoder's compute_s) and one of two inputs queued behind it: (running, queued)."""
    running = asyncio.create_task(b.submit(["running"], 5000))
    assert await asyncio.to_thread(encoder.computing.wait, 5)
    queued = asyncio.create_task(b.submit(["queued", "twice"], 5000))
    while b.queue_depth < 2:
        await asyncio.sleep(0.01)
    return running, queued


def test_a_hang_up_abandons_the_work_wherever_it_is_and_is_counted_as_one() -> None:
    """The HTTP layer cancels a hung-up client's handler with CLIENT_DISCONNECTED: its queued inputs stop
    counting at once and are never computed, and a running batch of gone callers stops at its next layer."""

    async def go() -> None:
        encoder = FakeEncoder(compute_s=2.0)
        async for b in _running(encoder, max_batch_size=1, max_wait_ms=0):
            running, queued = await running_and_queued(b, encoder)
            for task in (running, queued):
                task.cancel(CLIENT_DISCONNECTED)
            for task in (running, queued):
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert b.queue_depth == 0
            result = await b.submit(["after"], 5000)
            assert result.embeddings.shape[0] == 1
            assert encoder.stopped == [[3]]  # "running" was stopped part-way
            assert encoder.batches == [[3]]  # "after" only: "queued" never ran
            text = b.metrics.render().decode()
            assert 'embedperf_abandoned_total{reason="disconnected"} 2.0' in text
            assert 'embedperf_abandoned_total{reason="cancelled"}' not in text

    run(go())


def test_inputs_of_a_caller_gone_while_tokenised_stop_counting_so_no_worker_waits_for_them() -> None:
    """A worker waits up to max_wait for inputs still being tokenised; those of a caller that hung up meanwhile
    must stop counting at once, or the worker waits for them in vain."""

    async def go() -> None:
        encoder = FakeEncoder(tokenize_s=0.3)
        async for b in _running(encoder, max_batch_size=8, max_wait_ms=60_000):
            gone = asyncio.create_task(b.submit(["gone"], 5000))
            await asyncio.sleep(0.05)  # being tokenised
            live = asyncio.create_task(b.submit(["live"], 5000))  # waits for the tokeniser behind "gone"
            await asyncio.sleep(0.01)
            gone.cancel(CLIENT_DISCONNECTED)
            with pytest.raises(asyncio.CancelledError):
                await gone
            assert b.queue_depth == 1  # "live" only
            result = await live  # had the worker waited for "gone", this would take max_wait (60 s)
            assert result.embeddings.shape[0] == 1
            assert encoder.batches == [[3]]  # "live" alone
            assert b.queue_depth == 0

    run(go())


def test_callers_leaving_at_every_stage_release_exactly_their_queue_space() -> None:
    async def go() -> None:
        encoder = FakeEncoder(tokenize_s=0.3)
        async for b in _running(encoder, max_batch_size=8, max_wait_ms=0, queue_size=8):
            tokenising = asyncio.create_task(b.submit(["being tokenised"], 5000))
            await asyncio.sleep(0.1)
            queued = asyncio.create_task(b.submit(["in the tokeniser's queue", "twice"], 5000))
            await asyncio.sleep(0.01)
            assert b.queue_depth == 3
            for task in (tokenising, queued):
                task.cancel()
            await asyncio.gather(tokenising, queued, return_exceptions=True)
            assert b.queue_depth == 0  # at once, not when the tokeniser gets to them
            result = await b.submit([f"w{i}" for i in range(8)], 5000)  # the whole queue is free again
            assert result.embeddings.shape[0] == 8
            assert b.queue_depth == 0
            assert encoder.batches == [[3] * 8]  # the abandoned inputs were never computed
            assert 'embedperf_abandoned_total{reason="cancelled"} 2.0' in b.metrics.render().decode()

    run(go())


@pytest.mark.parametrize(
    ("leaving", "staying", "stopped", "computed"),
    [
        (["gone", "gone too"], [], [[3, 4]], [[4]]),
        (["gone", "gone x", "gone x x"], ["stays"], [[3, 3, 4, 5]], [[3], [4]]),
        (["gone"], ["stays here"], [], [[3, 4], [4]]),
    ],
    ids=["every-caller-left", "three-of-four-left", "one-of-two-left"],
)
def test_a_running_batch_stops_once_at_most_a_quarter_of_its_callers_remain(
    leaving: list[str], staying: list[str], stopped: list[list[int]], computed: list[list[int]]
) -> None:
    """Stopped: the callers still there go back to the queue and are computed again, alone; the worker is
    free for the next request. Not stopped: the batch runs to the end."""

    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.4)
        size = len(leaving) + len(staying)
        async for b in _running(encoder, max_batch_size=size, max_wait_ms=500):
            gone = [asyncio.create_task(b.submit([text], 5000)) for text in leaving]
            stays = [asyncio.create_task(b.submit([text], 5000)) for text in staying]
            assert await asyncio.to_thread(encoder.computing.wait, 5)
            for task in gone:
                task.cancel()
            for text, task in zip(staying, stays, strict=True):  # each gets its own vector
                assert (await task).embeddings.tolist() == [[len(text.split()) + 2, len(text.split()[0])]]
            assert (await b.submit(["next one"], 5000)).embeddings[:, 0].tolist() == [4.0]
            assert encoder.stopped == stopped and encoder.batches == computed
            assert f"embedperf_stopped_batches_total {float(len(stopped))}" in b.metrics.render().decode()
            assert b.queue_depth == 0

    run(go())


def test_out_of_memory_splits_the_batch_and_lowers_the_limit() -> None:
    async def go() -> None:
        encoder = OomEncoder(fits=4)
        async for b in _running(encoder, max_batch_size=16, max_wait_ms=0):
            result = await b.submit([f"w{i}" for i in range(16)], 5000)
            assert result.embeddings.shape[0] == 16
            assert result.embeddings[:, 1].tolist() == [2.0] * 10 + [3.0] * 6  # every input, in order
            assert max(len(batch) for batch in encoder.batches) == 4
            assert b.health.batch_limit() == 4 and b.health.oom_total >= 2
            assert b.health.healthy()  # out of memory with a splittable batch is not a device fault
            text = b.metrics.render().decode()
            assert "embedperf_batch_limit 4.0" in text
            assert "embedperf_oom_splits_total 3.0" in text  # 16 -> 8+8 -> 4+4+4+4
            await b.submit([f"v{i}" for i in range(16)], 5000)
            assert encoder.batches[-4:] == [[3] * 4] * 4  # the lowered limit holds: no new OOM
            assert "embedperf_oom_splits_total 3.0" in b.metrics.render().decode()

    run(go())


def test_device_errors_fail_their_batch_and_mark_the_device_unhealthy() -> None:
    async def go() -> None:
        encoder = OomEncoder(fits=64)
        async for b in _running(encoder, max_wait_ms=0):
            encoder.broken = True
            for _ in range(3):
                with pytest.raises(ComputeFailed):
                    await b.submit(["x"], 5000)
            assert not b.health.healthy() and b.health.recent_errors() == 3
            assert "embedperf_device_errors_total 3.0" in b.metrics.render().decode()
            encoder.broken = False
            assert (await b.submit(["x y"], 5000)).embeddings.shape == (1, 2)  # the worker survived

    run(go())


def test_admission_sheds_when_the_estimated_wait_exceeds_the_deadline() -> None:
    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.05, gate=threading.Event())
        encoder.gate.set()  # type: ignore[union-attr]
        async for b in _running(encoder, max_batch_size=1, max_wait_ms=0, admit_wait_share=1.0):
            await b.submit(["measure"], 5000)  # per-input service time >= 50 ms from now on
            encoder.gate.clear()  # type: ignore[union-attr]
            held = [asyncio.create_task(b.submit([f"q{i}"], 60_000)) for i in range(10)]
            await asyncio.sleep(0.1)
            assert b.estimated_wait_s() >= 0.45
            with pytest.raises(Overloaded) as info:
                await b.submit(["one more"], deadline_ms=400)
            assert info.value.retry_after_s >= 1 and info.value.estimated_wait_s >= 0.45
            assert 'embedperf_shed_total{reason="estimated_wait"} 1.0' in b.metrics.render().decode()
            encoder.gate.set()  # type: ignore[union-attr]
            await asyncio.gather(*held)  # admitted work still completes

    run(go())


def test_a_request_judged_before_its_body_is_not_judged_again_on_the_estimate() -> None:
    """A request admission let in is queued even when the estimate has since grown past the deadline; one not
    judged yet is shed, and the queue bound holds for all."""

    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.05, gate=threading.Event())
        encoder.gate.set()  # type: ignore[union-attr]
        async for b in _running(
            encoder, max_batch_size=1, max_wait_ms=0, admit_wait_share=1.0, queue_size=13
        ):
            await b.submit(["measure"], 5000)  # per-input service time >= 50 ms from now on
            encoder.gate.clear()  # type: ignore[union-attr]
            held = [asyncio.create_task(b.submit([f"q{i}"], 60_000)) for i in range(10)]
            await asyncio.sleep(0.1)
            assert b.estimated_wait_s() >= 0.45
            depth = b.queue_depth
            judged = asyncio.create_task(
                b.submit(["let in", "and more"], 400, judged=True)
            )  # ~0.5 s > 400 ms
            try:
                await asyncio.sleep(0.05)
                assert not judged.done() and b.queue_depth == depth + 2  # queued, not refused
                with pytest.raises(Overloaded):
                    await b.submit(["not judged"], deadline_ms=400)
                over = 13 - b.queue_depth + 1  # one input more than the queue has room for
                with pytest.raises(QueueFull):
                    await b.submit(["x"] * over, deadline_ms=60_000, judged=True)
            finally:
                encoder.gate.set()  # type: ignore[union-attr]
            await asyncio.gather(*held)
            outcome = (await asyncio.gather(judged, return_exceptions=True))[0]
            assert not isinstance(outcome, Overloaded)  # computed, or dropped at its deadline

    run(go())


def test_device_health_lowers_then_recovers_the_limit_and_readiness() -> None:
    now_s = [0.0]
    health = DeviceHealth(32, clock=lambda: now_s[0], recovery_s=30, error_window_s=60, errors_unready=3)
    health.record_oom(32)
    assert health.batch_limit() == 16
    health.record_oom(16)
    now_s[0] = 29.0
    assert health.batch_limit() == 8
    now_s[0] = 31.0
    assert health.batch_limit() == 16  # one doubling per recovery_s without an OOM
    now_s[0] = 62.0
    assert health.batch_limit() == 32 and health.healthy()
    for _ in range(3):
        health.record_error()
    assert not health.healthy() and health.retry_after_s() >= 1
    now_s[0] = 62.0 + 61
    assert health.healthy()  # errors aged out of the window: ready again by itself
    health.record_oom(1)  # a single input that does not fit is a device error
    assert health.recent_errors() == 1


@pytest.mark.parametrize(
    ("exc", "oom"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"), True),
        (RuntimeError("NPU function error: ... ACL_ERROR_RT_MEMORY_ALLOCATION"), True),
        (MemoryError(), True),
        (RuntimeError("device-side assert triggered"), False),
        (ValueError("out of memory"), False),
    ],
)
def test_out_of_memory_is_recognised(exc: BaseException, oom: bool) -> None:
    assert is_out_of_memory(exc) is oom


def test_default_config_sheds_nothing_before_the_first_measurement() -> None:
    batcher = Batcher(FakeEncoder(), BatcherConfig(), ServiceMetrics())
    assert batcher.estimated_wait_s(1000) == 0.0  # 1,000 inputs, no measurement yet


def test_compute_threads_yield_the_cpu_to_the_event_loop() -> None:
    async def go() -> None:
        async for b in _running(FakeEncoder(), max_wait_ms=0):
            await b.submit(["x"], 5000)
            ids = [thread.native_id for thread in b._threads]
            wanted = min(19, loop_nice + COMPUTE_NICE)  # relative to the niceness the process started with
            assert ids and all(os.getpriority(os.PRIO_PROCESS, tid) == wanted for tid in ids if tid)
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == loop_nice  # the loop keeps its own

    loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    run(go())
