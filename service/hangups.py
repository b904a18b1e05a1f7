"""Wake the handlers of hung-up requests a few at a time, so their clean-up does not slow live requests.

When a load stops, hundreds of clients hang up at once. Their work leaves the batcher at once (queue space,
running batches), but each of their handlers still has to wake up and unwind through the ASGI stack, ~0.1 ms
of Python each, holding the GIL. Woken all together, ~450 of them held the GIL for ~50 ms, and the first live
request after the load computed 2-3x slower than normal meanwhile; woken 16 per 5 ms, the requests of the
next ~200 ms still computed 20-40 % slower (23-26 ms against 17). Nobody reads their answers, so they are
woken SLICE at a time every PAUSE_S, ~3 % of the event loop's time: the requests after a load compute at
their idle speed. A backlog larger than BACKLOG_TURNS slices is drained in larger slices, so none of them
waits more than about BACKLOG_TURNS x PAUSE_S (~3 s), whatever the backlog.

The futures are ended with a result, not an exception: an exception kept in a future holds, through its
traceback, the frames that awaited it and so the future again. Every hung-up request then left ~23 objects of
cyclic garbage that only a full collection frees; after a few bursts, those collections walked 30,000-80,000
of them and held the event loop for 40-100 ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from service.paced_calls import PacedCalls

SLICE = 16  # handlers woken per turn (~1.6 ms of event-loop time)
PAUSE_S = 0.05  # between turns
BACKLOG_TURNS = 64  # a backlog is drained within about this many turns, whatever its size


class HangupSignal(Protocol):
    """How a request's hang-up reaches the batcher (service.request_io.ConnectionLost)."""

    lost: bool  # set the moment the connection drops, before the callbacks run; read by the worker threads

    def on_mark(self, callback: Callable[[], None]) -> None:
        """Run callback (cheap) on the event loop the moment the connection drops (now if it has)."""

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Run callback on the event loop once the hang-up is handled (now if it already has been)."""


class HangupQueue:
    """Futures of hung-up requests, ended a slice per turn on their event loop."""

    def __init__(self, slice_size: int = SLICE, pause_s: float = PAUSE_S) -> None:
        self._calls = PacedCalls(slice_size, pause_s, backlog_turns=BACKLOG_TURNS)

    def __len__(self) -> int:
        return len(self._calls)

    def end(self, future: asyncio.Future[Any], result: Any) -> None:
        """Set future's result soon: at once when nobody is queued, else after the ones queued before it.
        Call on the future's event loop."""
        self._calls.add(_set_result, future, result)


def _set_result(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
