"""Tick scheduler: samples land on wall-clock interval boundaries, with no drift over hours.

Ticks come from a monotonic clock anchored once to the wall clock (tick k = anchor + k * interval),
never from sleep(interval), so per-sample overhead does not accumulate. A wall-clock step (NTP,
an operator) larger than half an interval re-anchors.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TickScheduler:
    """Yields the scheduled wall time of each tick; late ticks are skipped, never bunched up."""

    interval_s: float
    wall: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    missed_ticks: int = 0
    reanchors: int = 0
    _anchor_wall_s: float = field(init=False, default=0.0)
    _anchor_mono_s: float = field(init=False, default=0.0)
    _k: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self._anchor()

    def _anchor(self) -> None:
        wall_now, mono_now = self.wall(), self.monotonic()
        self._anchor_wall_s = math.ceil(wall_now / self.interval_s) * self.interval_s
        self._anchor_mono_s = mono_now + (self._anchor_wall_s - wall_now)
        self._k = 0

    def next_tick(self) -> tuple[float, float]:
        """(scheduled wall time, monotonic deadline) of the next tick not yet in the past."""
        now = self.monotonic()
        due = math.ceil((now - self._anchor_mono_s) / self.interval_s - 1e-9)
        if due > self._k:
            self.missed_ticks += due - self._k
            self._k = due
        offset_s = self._k * self.interval_s
        return self._anchor_wall_s + offset_s, self._anchor_mono_s + offset_s

    def wait(self, stop: threading.Event) -> float | None:
        """Block until the next tick; its scheduled wall time, or None once `stop` is set."""
        tick_wall_s, deadline = self.next_tick()
        while True:
            remaining = deadline - self.monotonic()
            if remaining <= 0:
                break
            if stop.wait(remaining):
                return None
        if stop.is_set():
            return None
        self._k += 1
        if abs(self.wall() - tick_wall_s) > self.interval_s / 2:
            self.reanchors += 1  # the wall clock was stepped: realign to its boundaries
            self._anchor()
        return tick_wall_s
