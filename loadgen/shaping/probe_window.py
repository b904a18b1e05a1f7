"""One search probe's bounds and tally, free of Locust: its arrivals cut at its window's end, its rows counted.

loadgen.shaping.search drives the probes; these two pieces decide what a probe is allowed to send and what
it measured, and are tested without a target or a monkey-patched process."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from decisions.search.state import ProbeMeasurement
from embedperf.schema import RequestRow
from loadgen.traffic.schedule import Arrival


class ProbeTap:
    """Sits between the dispatcher and the recorder; keeps the current probe's rows' key figures."""

    def __init__(self, sink: Callable[[RequestRow], None]) -> None:
        self.sink = sink
        self.stage_index = -1
        self.rows: list[tuple[bool, float, float | None, float | None]] = []

    def __call__(self, row: RequestRow) -> None:
        if row.stage_index == self.stage_index:
            intended = row.t_intended_unix_s if row.t_intended_unix_s is not None else 0.0
            self.rows.append((bool(row.ok), intended, row.t_done_unix_s, row.latency_from_intended_ms))
        self.sink(row)

    def start(self, stage_index: int) -> None:
        self.stage_index = stage_index
        self.rows = []

    def measurement(
        self, rate: float, t_origin_unix_s: float, duration_s: float, warmup_s: float,
        started_unix_s: Iterable[float] = (), cutoff_unix_s: float | None = None,
    ) -> ProbeMeasurement:
        """The probe's figures in its steady window: requests by intended start, goodput by ok answers done
        inside it; a started request without a row yet has a latency of at least cutoff - intended."""
        steady_from = t_origin_unix_s + warmup_s
        steady_to = t_origin_unix_s + duration_s
        steady = [r for r in self.rows if r[1] >= steady_from]
        ok = [r for r in steady if r[0]]
        missing = Counter(t for t in started_unix_s if t >= steady_from)
        missing.subtract(r[1] for r in steady)
        cutoff = cutoff_unix_s if cutoff_unix_s is not None else time.time()
        unfinished_ms = [(cutoff - t) * 1000.0 for t, n in missing.items() for _ in range(max(n, 0))]
        ok_done = sum(1 for r in self.rows if r[0] and r[2] is not None and steady_from <= r[2] <= steady_to)
        return ProbeMeasurement(
            rate=rate, duration_s=duration_s - warmup_s, scheduled=len(steady) + len(unfinished_ms),
            ok=len(ok), errors=len(steady) - len(ok), ok_done=ok_done,
            ok_latency_ms=[r[3] for r in ok if r[3] is not None], unfinished_ms=unfinished_ms,
        )


class ProbeWindow:
    """One probe's arrivals cut at its window's end (the rest kept as dropped), intended starts noted."""

    def __init__(self, schedule: Iterable[Arrival], t_origin_unix_s: float, duration_s: float) -> None:
        self.schedule = schedule
        self.t_origin_unix_s = t_origin_unix_s
        self.end_unix_s = t_origin_unix_s + duration_s
        self.started_unix_s: list[float] = []
        self.left_out: list[Arrival] = []

    def __iter__(self) -> Iterator[Arrival]:
        for arrival in self.schedule:
            if time.time() > self.end_unix_s:
                self.left_out.append(arrival)
                continue
            self.started_unix_s.append(self.t_origin_unix_s + arrival.offset_s)  # as dispatch computes it
            yield arrival
