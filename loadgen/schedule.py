"""Open-loop arrival schedules: when each request should start, independent of any response."""

from __future__ import annotations

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

    Each step restarts its own process at its start, so a step's arrivals stay inside it.
    """
    rng = random.Random(seed)
    for index, (start, step) in enumerate(zip(stage_offsets_s(steps), steps, strict=True)):
        rate = step.rate or 0.0
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
