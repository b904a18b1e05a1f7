"""Paced calls run in order, a slice per turn with a pause between, through failures and across event loops."""

from __future__ import annotations

import asyncio
import logging

import pytest

from service.paced_calls import PacedCalls


def test_calls_run_in_order_a_slice_per_turn_with_a_pause_between() -> None:
    async def go() -> list[tuple[int, float]]:
        loop = asyncio.get_running_loop()
        calls = PacedCalls(slice_size=2, pause_s=0.05)
        ran: list[tuple[int, float]] = []
        for index in range(5):
            calls.add(lambda i: ran.append((i, loop.time())), index)
        assert ran == [] and len(calls) == 5  # nothing runs inside add()
        await asyncio.sleep(0)
        assert [i for i, _ in ran] == [0, 1]  # the first slice on the next iteration
        while len(calls):
            await asyncio.sleep(0.01)
        return ran

    ran = asyncio.run(go())
    assert [i for i, _ in ran] == [0, 1, 2, 3, 4]
    at = [t for _, t in ran]
    assert at[1] - at[0] < 0.01 and at[3] - at[2] < 0.01  # two per turn, in one go
    assert at[2] - at[1] >= 0.045 and at[4] - at[3] >= 0.045  # turns pause_s apart


def test_a_failing_call_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    ran: list[int] = []

    def fail() -> None:
        raise RuntimeError("socket already gone")

    async def go() -> None:
        calls = PacedCalls(slice_size=8, pause_s=0.001)
        calls.add(ran.append, 1)
        calls.add(fail)
        calls.add(ran.append, 2)
        await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR, logger="service.paced_calls"):
        asyncio.run(go())
    assert ran == [1, 2]
    assert "a paced clean-up call failed" in caplog.text


def test_calls_left_by_a_closed_event_loop_run_on_the_next() -> None:
    calls = PacedCalls(slice_size=1, pause_s=10.0)
    ran: list[str] = []

    async def leave_one_queued() -> None:
        calls.add(ran.append, "first")
        calls.add(ran.append, "left")  # its turn is 10 s away when the loop closes
        await asyncio.sleep(0.01)

    async def add_another() -> None:
        calls.add(ran.append, "next loop")
        await asyncio.sleep(0.01)

    asyncio.run(leave_one_queued())
    assert ran == ["first"]
    asyncio.run(add_another())
    assert ran == ["first", "left"]  # scheduled again on this loop: one slice per turn
    assert len(calls) == 1


def test_a_backlog_runs_in_larger_slices_when_asked_to() -> None:
    async def go() -> tuple[int, int]:
        plain, bounded = PacedCalls(slice_size=2, pause_s=1.0), PacedCalls(2, 1.0, backlog_turns=10)
        ran: list[str] = []
        for _ in range(100):
            plain.add(ran.append, "plain")
            bounded.add(ran.append, "bounded")
        await asyncio.sleep(0)
        return ran.count("plain"), ran.count("bounded")

    assert asyncio.run(go()) == (2, 10)  # 100 // 10 turns
