"""Open-loop arrival schedules: when each request should start, independent of any response."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from scenarios.models import Step


@dataclass(frozen=True, slots=True)
class Arrival:
    """One scheduled request: its intended start (seconds from the schedule's origin) and stage."""

    offset_s: float
    stage_index: int


def stage_offsets_s(steps: Sequence[Step]) -> list[float]:
    """Start offset of each step from the schedule's origin."""
    return list(itertools.accumulate((step.duration_s for step in steps), initial=0.0))[:-1]


class StageCuts:
    """Adaptive open-loop steps that ended early: a cut is an offset in the planned schedule; the step's later
    arrivals are not sent and every later step starts that much sooner. Cuts are decided a little ahead of now
    and reach every dispatcher (loadgen.distributed.rows) before its schedule gets there."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.planned_starts_s = stage_offsets_s(steps)
        self.planned_ends_s = [o + s.duration_s for o, s in zip(self.planned_starts_s, steps, strict=True)]
        self.cut_s: dict[int, float] = {}

    def cut(self, index: int, planned_offset_s: float) -> None:
        """End step `index` at this planned offset (the first cut of a step holds)."""
        if planned_offset_s < self.planned_ends_s[index]:
            self.cut_s.setdefault(index, planned_offset_s)

    def shift_s(self, index: int) -> float:
        """How much sooner step `index` starts than planned: what the cut steps before it gave up."""
        return sum(self.planned_ends_s[j] - c for j, c in self.cut_s.items() if j < index)

    def starts_s(self) -> list[float]:
        """Each step's start offset as the schedule now runs."""
        return [start - self.shift_s(i) for i, start in enumerate(self.planned_starts_s)]

    def end_s(self) -> float:
        """Where the schedule now ends."""
        last = len(self.planned_ends_s) - 1
        return self.cut_s.get(last, self.planned_ends_s[last]) - self.shift_s(last)

    def apply(self, schedule: Iterable[Arrival]) -> Iterator[Arrival]:
        """The arrivals still to send, moved by the cuts known when each is taken (lazily, just before it is due)."""
        for arrival in schedule:
            cut = self.cut_s.get(arrival.stage_index)
            if cut is not None and arrival.offset_s >= cut:
                continue
            shift = self.shift_s(arrival.stage_index) if self.cut_s else 0.0
            yield Arrival(arrival.offset_s - shift, arrival.stage_index) if shift else arrival


def arrivals(steps: Sequence[Step], process: str, seed: int = 0) -> Iterator[Arrival]:
    """Arrival offsets for stepped rates, `constant` or `poisson`, each step's process restarted at its start;
    a step with `ramp_s` moves linearly from the previous step's rate over ramp_s."""
    rng = random.Random(seed)
    previous_rate = 0.0
    for index, (start, step) in enumerate(zip(stage_offsets_s(steps), steps, strict=True)):
        rate = step.rate or 0.0
        from_rate, previous_rate = previous_rate, rate
        if step.ramp_s > 0:
            if process not in ("constant", "poisson"):
                raise ValueError(f"unknown arrival process {process!r}; valid: constant, poisson")
            ramp = _Ramp(from_rate, rate, step.ramp_s)
            count = 0.0
            while (t := ramp.time_at(count)) < step.duration_s:
                if process == "constant":
                    yield Arrival(start + t, index)
                    count += 1.0
                else:
                    count += rng.expovariate(1.0)
                    t = ramp.time_at(count)
                    if t < step.duration_s:
                        yield Arrival(start + t, index)
            continue
        if rate <= 0:
            continue
        end = start + step.duration_s
        if process == "constant":
            n = int(step.duration_s * rate + 1e-9)
            for i in range(n):
                yield Arrival(start + i / rate, index)
        elif process == "poisson":
            t = start + rng.expovariate(rate)
            while t < end:
                yield Arrival(t, index)
                t += rng.expovariate(rate)
        else:
            raise ValueError(f"unknown arrival process {process!r}; valid: constant, poisson")


@dataclass(frozen=True, slots=True)
class _Ramp:
    """Rate r0 -> r1 linearly over ramp_s, then r1: arrivals are where the expected count reaches 1, 2, ..."""

    r0: float
    r1: float
    ramp_s: float

    def time_at(self, count: float) -> float:
        """Inverse of the expected arrival count: the time by which `count` arrivals are due."""
        a = (self.r1 - self.r0) / (2.0 * self.ramp_s)
        b = self.r0
        at_ramp_end = b * self.ramp_s + a * self.ramp_s**2
        if count > at_ramp_end:
            return math.inf if self.r1 <= 0 else self.ramp_s + (count - at_ramp_end) / self.r1
        if abs(a) < 1e-12:
            return count / b if b > 0 else math.inf
        disc = b * b + 4.0 * a * count
        return (-b + math.sqrt(max(disc, 0.0))) / (2.0 * a)
