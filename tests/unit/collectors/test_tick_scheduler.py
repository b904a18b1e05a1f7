"""Tick scheduler: wall-clock boundaries from a monotonic anchor, skipped late ticks, re-anchoring."""

from __future__ import annotations

import threading
import time

from collectors.clock import TickScheduler


class FakeClocks:
    def __init__(self, wall_s: float) -> None:
        self.mono_s = 100.0
        self.offset_s = wall_s - self.mono_s  # wall = monotonic + offset

    def wall(self) -> float:
        return self.mono_s + self.offset_s

    def monotonic(self) -> float:
        return self.mono_s


def test_ticks_land_on_boundaries_and_late_ones_are_skipped() -> None:
    clocks = FakeClocks(1000.3)
    sched = TickScheduler(1.0, wall=clocks.wall, monotonic=clocks.monotonic)
    ts, deadline = sched.next_tick()
    assert ts == 1001.0 and abs(deadline - 100.7) < 1e-9
    sched._k += 1
    clocks.mono_s += 3.6  # the sampler stalled across several ticks
    ts, _ = sched.next_tick()
    assert ts == 1004.0  # the next boundary still ahead (wall is 1003.9)
    assert sched.missed_ticks == 2  # 1002 and 1003 were never sampled


def test_wall_clock_step_reanchors() -> None:
    clocks = FakeClocks(1000.0)
    sched = TickScheduler(0.05, wall=clocks.wall, monotonic=clocks.monotonic)
    clocks.offset_s += 5.0  # NTP stepped the wall clock
    stop = threading.Event()
    sched.wait(stop)
    assert sched.reanchors == 1
    ts = sched.wait(stop)
    assert ts is not None and abs(ts - clocks.wall()) < 0.05 + 1e-6


def test_real_ticks_are_on_interval_boundaries() -> None:
    sched = TickScheduler(0.1)
    stop = threading.Event()
    ticks = [sched.wait(stop) for _ in range(5)]
    assert all(t is not None for t in ticks)
    for t in ticks:
        assert t is not None
        assert abs(round(t / 0.1) * 0.1 - t) < 1e-6
    assert time.time() - ticks[-1] < 0.1  # woke at the tick, not an interval later


def test_stop_interrupts_wait() -> None:
    sched = TickScheduler(60.0)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    started = time.monotonic()
    assert sched.wait(stop) is None
    assert time.monotonic() - started < 5
