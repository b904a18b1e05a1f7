"""Batcher fairness and bounded cost: round-robin batches, tokenising in slices, the per-request token budget,
the wait a new request is admitted on, and the fallback model's switch."""

from __future__ import annotations

import asyncio
import gc
import threading
import time

import numpy as np
import pytest

from modelcore.encoder import StopCheck
from service.batch_errors import Overloaded, TooManyTokens
from service.batch_job import TOKENIZE_SLICE, BatcherConfig
from service.batcher import Batcher
from service.degrade import Fallback, FallbackSwitch
from service.metrics import ServiceMetrics
from tests.unit.service.test_batcher import FakeEncoder, _running, run


class TaggedEncoder(FakeEncoder):
    """Every text becomes [101, ord(first letter), 102]; records each batch's letters and each tokeniser call."""

    def __init__(self, gate: threading.Event | None = None, tokenize_s: float = 0.0) -> None:
        super().__init__(gate=gate, tokenize_s=tokenize_s)
        self.letters: list[str] = []  # one string per computed batch
        self.calls: list[list[str]] = []  # the texts of each tokeniser call

    def tokenize(self, texts: list[str], max_length: int | None = None) -> list[list[int]]:
        self.calls.append(list(texts))
        time.sleep(self.tokenize_s)
        return [[101, ord(text[0]), 102] for text in texts]

    def embed_token_ids(self, batch: list[list[int]], should_stop: StopCheck | None = None) -> np.ndarray:
        vectors = super().embed_token_ids(batch, should_stop)
        self.letters.append("".join(chr(ids[1]) for ids in batch))
        return vectors


def test_a_small_request_behind_a_large_one_rides_in_the_next_batch() -> None:
    async def go() -> None:
        encoder = TaggedEncoder(gate=threading.Event())
        async for b in _running(encoder, max_batch_size=4, max_wait_ms=0):
            large = asyncio.create_task(b.submit([f"b{i}" for i in range(40)], 10_000))
            while b.queue_depth != 36:  # the worker holds the first batch of four at the gate
                await asyncio.sleep(0.01)
            small = asyncio.create_task(b.submit(["s"], 10_000))
            while b.queue_depth != 37:
                await asyncio.sleep(0.01)
            encoder.gate.set()  # type: ignore[union-attr]
            await asyncio.gather(large, small)
            assert encoder.letters[0] == "bbbb"
            assert "s" in encoder.letters[1]  # not after the ten batches of the large request
            assert len(encoder.letters) == 11 and "".join(encoder.letters).count("b") == 40

    run(go())


def test_requests_of_one_input_are_served_in_arrival_order() -> None:
    async def go() -> None:
        encoder = TaggedEncoder(gate=threading.Event())
        letters = "abcdefghijklmnop"
        async for b in _running(encoder, max_batch_size=4, max_wait_ms=0):
            tasks = []
            for letter in letters:
                tasks.append(asyncio.create_task(b.submit([letter], 10_000)))
                await asyncio.sleep(0.005)
            encoder.gate.set()  # type: ignore[union-attr]
            await asyncio.gather(*tasks)
            assert "".join(encoder.letters) == letters

    run(go())


def test_a_large_request_is_tokenised_a_slice_at_a_time_so_others_are_not_held_behind_it() -> None:
    async def go() -> None:
        encoder = TaggedEncoder(tokenize_s=0.2)
        async for b in _running(encoder, max_batch_size=32, max_wait_ms=0):
            large = asyncio.create_task(b.submit([f"b{i}" for i in range(3 * TOKENIZE_SLICE)], 10_000))
            while not encoder.calls:
                await asyncio.sleep(0.01)
            small = await b.submit(["s"], 10_000)  # arrives while the first slice is being tokenised
            await large
            assert small.embeddings.shape[0] == 1
            assert [len(call) for call in encoder.calls[:1]] == [TOKENIZE_SLICE]
            assert "s" in encoder.calls[1]  # tokenised with the second slice, not after all three
            assert sum(len(call) for call in encoder.calls) == 3 * TOKENIZE_SLICE + 1

    run(go())


def test_a_request_over_the_token_budget_is_refused_before_it_is_computed() -> None:
    async def go() -> None:
        encoder = TaggedEncoder()
        async for b in _running(encoder, max_wait_ms=0, max_request_tokens=20):
            fits = await b.submit(["a", "b", "c", "d", "e", "f"], 5000)  # 6 x 3 tokens
            assert fits.embeddings.shape[0] == 6
            with pytest.raises(TooManyTokens) as info:
                await b.submit(["x"] * 7, 5000)  # 21 tokens
            assert info.value.limit == 20 and info.value.tokens == 21 and "at most 20" in str(info.value)
            encoder.calls.clear()
            with pytest.raises(TooManyTokens) as large:
                await b.submit(["y"] * (10 * TOKENIZE_SLICE), 5000)
            assert "at least" in str(large.value)
            assert sum(len(call) for call in encoder.calls) == TOKENIZE_SLICE  # refused after one slice
            assert "x" not in "".join(encoder.letters) and "y" not in "".join(encoder.letters)
            assert b.queue_depth == 0

    run(go())


def test_a_new_request_is_admitted_on_its_fair_wait_not_on_the_whole_queue() -> None:
    """Behind one large request a one-input request waits about one input per queued request, so it is let in
    where the time to drain the whole queue would exceed the deadline; a request of 20 inputs is judged on its
    whole work (20 of the large one's inputs interleave with its 20) and refused there."""

    async def go() -> None:
        encoder = FakeEncoder(compute_s=0.05, gate=threading.Event())
        encoder.gate.set()  # type: ignore[union-attr]
        async for b in _running(encoder, max_batch_size=1, max_wait_ms=0, admit_wait_share=1.0):
            await b.submit(["measure"], 5000)  # per-input service time >= 50 ms from now on
            encoder.gate.clear()  # type: ignore[union-attr]
            large = asyncio.create_task(b.submit([f"w{i}" for i in range(40)], 60_000))
            while b.queue_depth != 39:
                await asyncio.sleep(0.01)
            assert b.estimated_wait_s() * 10 < b.drain_s()  # 2 inputs before its first, not 39
            b.check_admission(1, deadline_ms=b.drain_s() * 1000 / 2)  # admitted
            with pytest.raises(Overloaded):
                b.check_admission(20, deadline_ms=b.drain_s() * 1000 / 2)
            b.check_admission(20, deadline_ms=b.drain_s() * 1000 * 1.2)  # 40 of 59 inputs' time fits
            encoder.gate.set()  # type: ignore[union-attr]
            await large

    run(go())


def test_the_fallback_takes_over_while_busy_and_hands_back_once_a_window_has_passed() -> None:
    now_s = [0.0]
    busy = [0.95]
    fallback = Fallback("light", FakeEncoder(), threshold=0.9, window_s=10.0)
    switch = FallbackSwitch("main", fallback, lambda window_s: busy[0], clock=lambda: now_s[0])
    assert switch.model_for_new_request() == "main"  # no full window yet
    now_s[0] = 10.0
    assert switch.model_for_new_request() == "light" and switch.on_fallback
    busy[0] = 0.3
    now_s[0] = 15.0
    assert switch.model_for_new_request() == "light"  # the window since the switch is not over
    now_s[0] = 20.0
    assert switch.model_for_new_request() == "main" and not switch.on_fallback
    busy[0] = 0.89
    now_s[0] = 40.0
    assert switch.model_for_new_request() == "main"  # below the threshold


def test_a_request_is_computed_whole_by_the_model_chosen_when_it_was_submitted() -> None:
    async def go() -> None:
        main, light = TaggedEncoder(), TaggedEncoder()
        busy = [0.0]
        batcher = Batcher(
            main,
            BatcherConfig(max_batch_size=4, max_wait_ms=0, model_id="main"),
            ServiceMetrics(),
            fallback=Fallback("light", light, threshold=0.5, window_s=0.0),
        )
        batcher.switch = FallbackSwitch("main", batcher.switch.fallback, lambda window_s: busy[0])  # type: ignore[union-attr]
        batcher.start()
        try:
            first = await batcher.submit(["a", "b", "c", "d", "e"], 5000)
            busy[0] = 1.0
            second = await batcher.submit(["f", "g", "h", "i", "j"], 5000)
            busy[0] = 0.0
            third = await batcher.submit(["k"], 5000)
        finally:
            await asyncio.to_thread(batcher.stop, 10.0)
        assert (first.model, second.model, third.model) == ("main", "light", "main")
        assert "".join(main.letters) == "abcdek" and "".join(light.letters) == "fghij"

    run(go())


def test_requests_for_different_models_never_share_a_batch() -> None:
    async def go() -> None:
        gate = threading.Event()
        main, light = TaggedEncoder(gate=gate), TaggedEncoder(gate=gate)
        busy = [0.0]
        batcher = Batcher(
            main,
            BatcherConfig(max_batch_size=8, max_wait_ms=0, model_id="main"),
            ServiceMetrics(),
            fallback=Fallback("light", light, threshold=0.5, window_s=0.0),
        )
        batcher.switch = FallbackSwitch("main", batcher.switch.fallback, lambda window_s: busy[0])  # type: ignore[union-attr]
        batcher.start()
        try:
            held = asyncio.create_task(batcher.submit(["a"], 5000))  # the worker holds it at the gate
            while not main.calls or batcher.queue_depth:
                await asyncio.sleep(0.01)
            busy[0] = 1.0
            light_task = asyncio.create_task(batcher.submit(["f", "g"], 5000))
            await asyncio.sleep(0)
            busy[0] = 0.0
            main_task = asyncio.create_task(batcher.submit(["k"], 5000))
            while batcher.queue_depth != 3:
                await asyncio.sleep(0.01)
            gate.set()
            results = await asyncio.gather(held, light_task, main_task)
        finally:
            gate.set()
            await asyncio.to_thread(batcher.stop, 10.0)
        assert [r.model for r in results] == ["main", "light", "main"]
        assert sorted("".join(main.letters)) == ["a", "k"] and "".join(light.letters) == "fg"

    run(go())


def test_a_refused_request_leaves_no_cycle_holding_its_texts() -> None:
    """A request's error is raised through asyncio's frames; kept as a future's exception (or in a local of the
    frame that raised it), it formed a cycle with them that held the request's texts until a full garbage
    collection: RSS grew by megabytes with every large refused request."""
    found: list[str] = []

    async def go() -> None:
        async for b in _running(TaggedEncoder(), max_wait_ms=0, max_request_tokens=20):
            gc.collect()
            gc.disable()
            try:
                with pytest.raises(TooManyTokens):
                    await b.submit(["x"] * 100, 5000)
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                found.extend(
                    f"{type(thing).__name__}:{getattr(getattr(thing, 'f_code', None), 'co_name', '')}"
                    for thing in gc.garbage
                )
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()

    run(go())
    assert not [name for name in found if name.startswith(("TooManyTokens", "BatchJob", "frame:submit"))], found
