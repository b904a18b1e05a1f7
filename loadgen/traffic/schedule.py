"""Open-loop arrival schedules: when each request should start, independent of any response."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from scenarios.models import Step


@dataclass(frozen=True, slots=True)
class Arrival:
    """One scheduled request: its intended start (seconds from the schedule's origin) and stage."""

    offset_s: float
    stage_index: int


def stage_offsets_s(steps: Sequence[Step]) -> list[float]:
    """Start offset of each step from the schedule's origin."""
    offsets, t = [], 0.0
    for step in steps:
        offsets.append(t)
        t += step.duration_s
    return offsets


def arrivals(steps: Sequence[Step], process: str, seed: int = 0) -> Iterator[Arrival]:
    """Arrival offsets for stepped rates: `constant` (evenly spaced) or `poisson` (exponential gaps).

    Each step restarts its own process at its start, so a step's arrivals stay inside it. A step
    with `ramp_s` moves its rate linearly from the previous step's (0 for the first) over ramp_s.
    """
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
