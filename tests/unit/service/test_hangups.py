"""Hung-up requests' handlers are woken a slice per turn, every one of them, a backlog within a bounded time,
with a result rather than an exception (no cyclic garbage)."""

from __future__ import annotations

import asyncio

from service.hangups import BACKLOG_TURNS, HangupQueue


def test_hung_up_waits_end_a_slice_per_turn_and_all_of_them_end() -> None:
    async def go() -> None:
        queue = HangupQueue(slice_size=4, pause_s=0.01)
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(10)]
        for future in futures:
            queue.end(future, "gone")
        assert not any(future.done() for future in futures)  # nothing inside the caller's own turn
        await asyncio.sleep(0)
        assert sum(future.done() for future in futures) == 4  # the first slice, on the next turn
        await asyncio.sleep(0.005)
        assert sum(future.done() for future in futures) == 4  # the pause: the loop is free meanwhile
        await asyncio.sleep(0.1)
        assert all(future.result() == "gone" for future in futures)
        assert len(queue) == 0

    asyncio.run(go())


def test_a_large_backlog_drains_within_a_bounded_number_of_turns() -> None:
    async def go() -> None:
        queue = HangupQueue(slice_size=1, pause_s=0.001)
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(64 * BACKLOG_TURNS)]
        for future in futures:
            queue.end(future, "gone")
        await asyncio.sleep(0)
        assert sum(future.done() for future in futures) == 64  # backlog / BACKLOG_TURNS, not one
        for _ in range(200):
            if all(future.done() for future in futures):
                break
            await asyncio.sleep(0.01)
        assert all(future.result() == "gone" for future in futures)

    asyncio.run(go())
