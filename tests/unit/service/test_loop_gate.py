"""LoopGate: a burst of admitted requests starts a few per event-loop iteration, in arrival order,
and what arrives in between (a health probe) runs before the rest of the burst."""

from __future__ import annotations

import asyncio

import pytest

from service.loop_gate import LoopGate


def test_a_burst_starts_per_turn_at_a_time_in_arrival_order() -> None:
    async def main() -> tuple[list[int], list[int], int]:
        gate = LoopGate(per_turn=8)
        order: list[int] = []
        turns: list[int] = []

        async def request(i: int) -> None:
            await gate.enter()
            order.append(i)
            turns.append(gate.turns)

        await asyncio.gather(*(request(i) for i in range(100)))
        return order, turns, gate.waiting

    order, turns, waiting = asyncio.run(main())
    assert order == list(range(100))
    per_turn = {t: turns.count(t) for t in set(turns)}
    assert max(per_turn.values()) <= 8
    assert len(per_turn) >= 100 // 8
    assert waiting == 0


def test_a_probe_arriving_during_the_burst_runs_before_the_rest_of_it() -> None:
    async def main() -> tuple[int, int]:
        gate = LoopGate(per_turn=4)
        started: list[str] = []

        async def request(i: int) -> None:
            await gate.enter()
            started.append(f"r{i}")

        async def probe() -> None:
            await asyncio.sleep(0)  # arrives one iteration after the burst
            started.append("probe")

        await asyncio.gather(*(request(i) for i in range(200)), probe())
        return started.index("probe"), len(started)

    probe_position, total = asyncio.run(main())
    assert total == 201
    assert probe_position <= 2 * 4, "the probe waited behind the whole burst"


def test_cancelled_waiters_give_their_place_to_the_next() -> None:
    async def main() -> list[int]:
        gate = LoopGate(per_turn=1)
        entered: list[int] = []

        async def request(i: int) -> None:
            await gate.enter()
            entered.append(i)

        tasks = [asyncio.create_task(request(i)) for i in range(6)]
        await asyncio.sleep(0)
        tasks[2].cancel()
        tasks[3].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return entered

    assert asyncio.run(main()) == [0, 1, 4, 5]


def test_per_turn_must_be_positive() -> None:
    with pytest.raises(ValueError, match="per_turn"):
        LoopGate(per_turn=0)


def test_promises_count_as_waiting_until_the_next_turn_then_vanish() -> None:
    async def main() -> tuple[int, int, int]:
        gate = LoopGate(per_turn=4)
        for _ in range(5):
            gate.promise()
        same_turn = gate.waiting
        await asyncio.sleep(0)  # one loop iteration: the handlers of those requests would have run by now
        next_turn = gate.waiting
        gate.promise()
        return same_turn, next_turn, gate.waiting

    same_turn, next_turn, again = asyncio.run(main())
    assert (same_turn, next_turn, again) == (5, 0, 1)


def test_requests_let_in_at_the_door_start_per_turn_at_a_time_and_count_as_waiting_until_they_run() -> None:
    async def main() -> tuple[list[tuple[int, int]], list[int], int]:
        gate = LoopGate(per_turn=8)
        started: list[tuple[int, int]] = []  # (request, turn it started in)
        waiting_seen: list[int] = []

        def start(i: int) -> bool:
            started.append((i, gate.turns))
            return True

        for i in range(30):
            gate.admit(lambda i=i: start(i))
        waiting_seen.append(gate.waiting)  # 8 started (not yet run) + 22 queued
        for _ in range(6):
            await asyncio.sleep(0)
            waiting_seen.append(gate.waiting)
        return started, waiting_seen, gate.turns

    started, waiting_seen, turns = asyncio.run(main())
    assert [i for i, _ in started] == list(range(30))  # arrival order
    per_turn = {t: [i for i, turn in started if turn == t] for _, t in started}
    assert max(len(ids) for ids in per_turn.values()) <= 8
    assert len(per_turn) == 4  # 8 at once, then 8, 8, 6 on the next turns
    assert waiting_seen[0] == 30
    assert waiting_seen[-1] == 0 and turns == 3  # the first 8 started before any turn


def test_a_request_whose_client_left_while_queued_gives_its_turn_to_the_next() -> None:
    async def main() -> list[int]:
        gate = LoopGate(per_turn=2)
        started: list[int] = []
        gone = {3, 4}

        def start(i: int) -> bool:
            if i in gone:
                return False
            started.append(i)
            return True

        for i in range(7):
            gate.admit(lambda i=i: start(i))
        await asyncio.sleep(0)  # one turn: 2 and 5 start (3 and 4 are skipped, not counted)
        return list(started)

    assert asyncio.run(main()) == [0, 1, 2, 5]
