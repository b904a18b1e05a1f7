"""Tick scheduler: wall-clock boundaries from a monotonic anchor, skipped late ticks, re-anchoring."""

from __future__ import annotations

import threading
import time

import pytest

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


class FakeStop(threading.Event):
    """A stop event that is never set: waiting on it advances the fake clocks instead of sleeping."""

    def __init__(self, clocks: FakeClocks) -> None:
        super().__init__()
        self.clocks = clocks
        self.waited_s: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout > 0
        self.waited_s.append(timeout)
        self.clocks.mono_s += timeout
        return False


def test_real_ticks_are_on_interval_boundaries() -> None:
    """On the real clocks: every tick is a multiple of the interval, and a tick the host was too busy to
    take is counted as missed, never bunched up (the wake-up time itself is checked on fake clocks)."""
    sched = TickScheduler(0.1)
    stop = threading.Event()
    ticks: list[float] = []
    missed_before_first = 0
    for _ in range(5):
        tick = sched.wait(stop)
        assert tick is not None
        ticks.append(tick)
        missed_before_first = missed_before_first if len(ticks) > 1 else sched.missed_ticks
    for t in ticks:
        assert abs(round(t / 0.1) * 0.1 - t) < 1e-6
    steps = [round((b - a) / 0.1) for a, b in zip(ticks, ticks[1:], strict=False)]
    assert all(step >= 1 for step in steps)  # strictly later, each on its own boundary
    if sched.reanchors == 0:  # (a wall clock stepped mid-test starts a new series of boundaries)
        assert sum(steps) == len(steps) + sched.missed_ticks - missed_before_first  # skipped ones counted


def test_wait_returns_at_the_tick_not_an_interval_later() -> None:
    clocks = FakeClocks(1000.03)
    sched = TickScheduler(0.1, wall=clocks.wall, monotonic=clocks.monotonic)
    stop = FakeStop(clocks)
    for k in range(1, 6):
        tick = sched.wait(stop)
        assert tick == pytest.approx(1000.0 + 0.1 * k, abs=1e-9)
        assert clocks.wall() == pytest.approx(tick, abs=1e-9)  # woke at the tick itself
        clocks.mono_s += 0.03  # sampling takes a while: the next tick stays on its boundary
    assert sum(stop.waited_s) == pytest.approx(0.07 + 4 * 0.07, abs=1e-9)
    assert sched.missed_ticks == 0 and sched.reanchors == 0


def test_stop_interrupts_wait() -> None:
    sched = TickScheduler(60.0)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    started = time.monotonic()
    assert sched.wait(stop) is None
    assert time.monotonic() - started < 5
