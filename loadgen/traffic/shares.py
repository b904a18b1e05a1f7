"""Shares of one open-loop schedule among N dispatchers (one per worker), from a common wall-clock origin.
Constant arrivals are dealt out like cards (dispatcher i sends arrivals i, i+N, ...), so their union is the
schedule exactly; Poisson arrivals are N independent Poisson(rate/N) streams, whose superposition is Poisson
with the summed rate. Workers on other hosts need clocks synchronised within the late tolerance."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.traffic.schedule import Arrival, arrivals
from scenarios.models import Step

SEED_STRIDE = 1_000_003  # distinct, well-separated seeds per dispatcher of a Poisson schedule


@dataclass(frozen=True)
class ScheduleShare:
    """Which part of the schedule one dispatcher sends, and from which common origin."""

    index: int = 0
    count: int = 1
    origin_unix_s: float | None = None  # None: start now (a dispatcher without a shape)

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"share index {self.index} outside 0..{self.count - 1}")


def share_arrivals(steps: Sequence[Step], process: str, seed: int, share: ScheduleShare) -> Iterator[Arrival]:
    """The arrivals of `share`; over every share of a count they make up `arrivals(steps, process, seed)`."""
    if share.count == 1:
        yield from arrivals(steps, process, seed=seed)
    elif process == "poisson":
        scaled = [s.model_copy(update={"rate": s.rate / share.count}) if s.rate else s for s in steps]
        yield from arrivals(scaled, process, seed=seed + SEED_STRIDE * (share.index + 1))
    else:
        for position, arrival in enumerate(arrivals(steps, process, seed=seed)):
            if position % share.count == share.index:
                yield arrival


def encode_shares(client_ids: Sequence[str], origin_unix_s: float) -> str:
    """The master's assignment, as the JSON string that travels to workers in Locust's parsed options."""
    return json.dumps({"origin_unix_s": origin_unix_s, "clients": list(client_ids)})


def share_from_options(encoded: str, client_id: str | None) -> ScheduleShare | None:
    """This worker's share from the master's assignment; None when it was given none (joined later)."""
    if not encoded or client_id is None:
        return None
    doc: dict[str, Any] = json.loads(encoded)
    clients = [str(c) for c in doc["clients"]]
    if client_id not in clients:
        return None
    return ScheduleShare(clients.index(client_id), len(clients), float(doc["origin_unix_s"]))
