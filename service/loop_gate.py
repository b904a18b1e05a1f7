"""Meter admitted requests through the event loop so that a burst cannot stall everyone else.

One event-loop iteration runs every callback that was ready when it began. When 1,000 connections send
at once, 1,000 admitted requests become ready together and their handlers (body parsing, validation,
queueing) run back to back for a few hundred milliseconds; a `/health` probe or a request that is about
to be refused with 429 arrives meanwhile and waits for all of them. The gate lets at most `per_turn`
admitted requests start their handler per iteration; the rest wait their turn in arrival order, and
everything cheap (health, readiness, metrics, refusals) is handled between two turns. Total work is
unchanged: the admitted requests were going to wait for the batcher anyway.
"""

from __future__ import annotations

import asyncio
from collections import deque

REQUESTS_PER_TURN = 32  # ~32 x 0.1-0.2 ms of handler work between two looks at new connections


class LoopGate:
    """At most `per_turn` holders start per event-loop iteration; the others queue, first come first served."""

    def __init__(self, per_turn: int = REQUESTS_PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be >= 1")
        self.per_turn = per_turn
        self.started_this_turn = 0
        self.turns = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._turn_scheduled = False
        self._promised = 0

    @property
    def waiting(self) -> int:
        """Requests held here, plus those let in at the door whose handler has not started yet."""
        return len(self._waiters) + self._promised

    def promise(self) -> None:
        """Count a request the HTTP protocol just let in, until its handler can reach `enter`.

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

    async def enter(self) -> None:
        """Return at once while this iteration has room and nobody queues; else wait for a later turn."""
        if self.started_this_turn < self.per_turn and not self._waiters:
            self.started_this_turn += 1
            self._schedule_turn()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._schedule_turn()
        await waiter  # a waiter cancelled meanwhile (client gone) is skipped by the turn

    def _schedule_turn(self) -> None:
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """Runs once per iteration while there is traffic: new room, and the next waiters let in."""
        self._turn_scheduled = False
        self.turns += 1
        self.started_this_turn = 0
        while self._waiters and self.started_this_turn < self.per_turn:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.started_this_turn += 1
        if self._waiters:
            self._schedule_turn()
