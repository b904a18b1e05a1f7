"""Meter admitted requests through the event loop so that a burst cannot stall everyone else.

One event-loop iteration runs every callback that was ready when it began. When 1,000 connections send
at once, 1,000 admitted requests become ready together and their handlers (body parsing, validation,
queueing) run back to back for a few hundred milliseconds; a `/health` probe or a request that is about
to be refused with 429 arrives meanwhile and waits for all of them. The gate lets at most `per_turn`
admitted requests start their handler per iteration; the rest wait their turn in arrival order, and
everything cheap (health, readiness, metrics, refusals) is handled between two turns. Total work is
unchanged: the admitted requests were going to wait for the batcher anyway.

The service's HTTP protocol hands the gate the start of a request it let in (`admit`) rather than a
running handler, so a request waiting for its turn costs no task at all: in an opening burst of 1,000
connections, creating ~450 handler tasks and running each up to the gate took ~25 ms of the loop in the
same iteration that read the requests, and a refusal answered in that iteration waited for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

REQUESTS_PER_TURN = 32  # ~32 x 0.1-0.2 ms of handler work between two looks at new connections

Start = Callable[[], bool]  # starts one request's handler; False when there was nothing left to start


class LoopGate:
    """At most `per_turn` handlers start per event-loop iteration; the others queue, first come first served."""

    def __init__(self, per_turn: int = REQUESTS_PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be >= 1")
        self.per_turn = per_turn
        self.started_this_turn = 0
        self.turns = 0
        self._queue: deque[Start] = deque()
        self._turn_scheduled = False
        self._promised = 0

    @property
    def waiting(self) -> int:
        """Requests held here, plus those let in whose handler has not reached the batcher yet."""
        return len(self._queue) + self._promised

    def promise(self) -> None:
        """Count a request let in whose handler runs on the next loop iteration, until then.

        The protocol decides on a whole batch of parsed requests in one loop iteration, before any of their
        handlers runs; without this, each decision would see an empty gate and all of them would be let in.
        The handlers run at the start of the next iteration, before it reads new requests, so the count is
        dropped then (a callback queued ahead of them): it cannot leak, whatever happens to a request.
        """
        if not self._promised:
            asyncio.get_running_loop().call_soon(self._forget_promises)
        self._promised += 1

    def _forget_promises(self) -> None:
        self._promised = 0

    def admit(self, start: Start) -> None:
        """Start a request let in at the door: now while this iteration has room and nobody queues, else on a
        later turn. `start` is skipped, giving its place to the next, when it returns False (client gone)."""
        if self._has_room():
            self.started_this_turn += 1
            self._schedule_turn()
            start()
            self.promise()
            return
        self._queue.append(start)
        self._schedule_turn()

    async def enter(self) -> None:
        """For a handler already running: return at once while this iteration has room and nobody queues;
        else wait for a later turn."""
        if self._has_room():
            self.started_this_turn += 1
            self._schedule_turn()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(lambda: _release(waiter))
        self._schedule_turn()
        await waiter  # a waiter cancelled meanwhile (client gone) is skipped by the turn

    def _has_room(self) -> bool:
        return self.started_this_turn < self.per_turn and not self._queue

    def _schedule_turn(self) -> None:
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """Runs once per iteration while there is traffic: new room, and the next queued requests started."""
        self._turn_scheduled = False
        self.turns += 1
        self.started_this_turn = 0
        while self._queue and self.started_this_turn < self.per_turn:
            if self._queue.popleft()():
                self.started_this_turn += 1
                self.promise()  # it runs on the next iteration, after that iteration's new requests are read
        if self._queue:
            self._schedule_turn()


def _release(waiter: asyncio.Future[None]) -> bool:
    if waiter.done():  # cancelled: its client has gone
        return False
    waiter.set_result(None)
    return True
