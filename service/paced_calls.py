"""Calls run on the event loop a slice per turn, with a pause between turns, so that a burst of clean-up never
holds the loop (and the GIL) in one piece. Both halves of a mass hang-up use it: waking the hung-up requests'
handlers (service/hangups.py) and closing and cleaning up their connections (service/teardown.py)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("service.paced_calls")


class PacedCalls:
    """Calls queued on the running event loop and run in order: on its next iteration when nothing is queued,
    else slice_size per turn, pause_s apart. With backlog_turns, a longer backlog is run in larger slices, so
    none of it waits more than about backlog_turns x pause_s."""

    def __init__(self, slice_size: int, pause_s: float, backlog_turns: int = 0) -> None:
        self.slice_size = slice_size
        self.pause_s = pause_s
        self.backlog_turns = backlog_turns
        self._waiting: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._scheduled_on: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, call: Callable[..., None], *args: Any) -> None:
        """Run call(*args) on this event loop's next turns, after the calls queued before it."""
        self._waiting.append((call, args))
        loop = asyncio.get_running_loop()
        if self._scheduled_on is not loop:  # also when a previous loop closed with calls still queued
            self._scheduled_on = loop
            loop.call_soon(self._turn)

    def _turn(self) -> None:
        count = self.slice_size
        if self.backlog_turns:
            count = max(count, len(self._waiting) // self.backlog_turns)
        for _ in range(min(count, len(self._waiting))):
            call, args = self._waiting.popleft()
            try:
                call(*args)
            except Exception:  # one clean-up must not stop the others'
                log.exception("a paced clean-up call failed")
        if self._waiting:
            asyncio.get_running_loop().call_later(self.pause_s, self._turn)
        else:
            self._scheduled_on = None
