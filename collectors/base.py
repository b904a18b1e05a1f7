"""What every telemetry source implements, and the status record the runner keeps for each."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Literal

from collectors.clock import TickScheduler
from embedperf.errors import CollectorError
from embedperf.schema import CollectorStatus, TelemetrySample

# (device, canonical metric, value) at the tick's timestamp.
Reading = tuple[str, str, float]
EventKind = Literal["gap", "recovered", "device_lost", "device_back", "restart", "error", "info"]
MAX_EVENTS = 200
# Event kinds that make a source that produced samples `partial` rather than `ok`.
DEGRADING_EVENTS = frozenset({"gap", "device_lost", "restart", "error"})


class SourceStatus:
    """Thread-safe record of one source's outcome: samples written and what went wrong when."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.state: Literal["pending", "running", "skipped", "failed", "done"] = "pending"
        self.reason = ""
        self.samples = 0
        self.events: list[dict[str, Any]] = []
        self.dropped_events = 0

    def event(self, kind: EventKind, message: str, device: str = "") -> None:
        with self._lock:
            if len(self.events) >= MAX_EVENTS:
                self.dropped_events += 1
                return
            self.events.append({"ts_unix_s": round(time.time(), 3), "kind": kind, "device": device, "message": message})

    def add_samples(self, n: int) -> None:
        with self._lock:
            self.samples += n

    def set(self, state: Literal["running", "skipped", "failed", "done"], reason: str = "") -> None:
        with self._lock:
            self.state = state
            if reason:
                self.reason = reason

    def snapshot(self) -> CollectorStatus:
        with self._lock:
            events = list(self.events)
            if self.dropped_events:
                note = f"{self.dropped_events} more events not kept"
                events.append({"ts_unix_s": None, "kind": "info", "device": "", "message": note})
            degrading = sorted({e["kind"] for e in self.events if e["kind"] in DEGRADING_EVENTS})
            status: Literal["ok", "skipped", "failed", "partial"] = "ok"
            reason = self.reason
            if self.state == "skipped":
                status = "skipped"
            elif self.state == "failed" or (self.samples == 0 and self.state == "done"):
                status, reason = "failed", reason or "no samples were collected"
            elif degrading:
                status, reason = "partial", reason or f"incomplete: {', '.join(degrading)} (see events)"
            return CollectorStatus(name=self.name, status=status, reason=reason, samples=self.samples, events=events)


class Source:
    """A telemetry source. Subclasses set `name` and override what they need.

    Lifecycle (one thread per source): `probe()` -> `start()` -> `sample(ts)` once per tick until
    stop -> `finish(start, end)` -> `close()`. Sources with `periodic = False` only `finish`.
    """

    name: ClassVar[str] = ""
    periodic: ClassVar[bool] = True

    def __init__(self) -> None:
        self.status = SourceStatus(self.name)

    def probe(self) -> str | None:
        """Why this source cannot run on this host (None when it can); cheap, no side effects."""
        return None

    def start(self) -> None:
        """Acquire what sampling needs (processes, handles); raise CollectorError when impossible."""

    def sample(self, ts_unix_s: float) -> Iterable[Reading]:
        """Readings for the tick at ts_unix_s; never raises for one bad device (record an event)."""
        return ()

    def finish(self, start_unix_s: float, end_unix_s: float) -> Iterable[TelemetrySample]:
        """Rows with their own timestamps, produced once at stop (pull-style sources)."""
        return ()

    def device_health(self) -> dict[str, bool]:
        """Device -> healthy now, for the devices whose health this source knows (the agent exports it)."""
        return {}

    def close(self) -> None:
        """Release processes and handles; must not raise."""


def begin_source(source: Source) -> bool:
    """Start a source on its own thread; a CollectorError marks it failed (the other sources go on)."""
    try:
        source.start()
    except CollectorError as exc:
        source.status.set("failed", str(exc))
        return False
    source.status.set("running")
    return True


def start_source_threads(
    sources: Iterable[Source], run: Callable[[Source], None], prefix: str
) -> dict[Source, threading.Thread]:
    """One daemon thread per runnable source (skipped and failed ones get none), already started."""
    threads = {
        source: threading.Thread(target=run, args=(source,), name=f"{prefix}-{source.name}", daemon=True)
        for source in sources
        if source.status.state not in ("skipped", "failed")
    }
    for thread in threads.values():
        thread.start()
    return threads


def tick_rows(
    source: Source, interval_s: float, stop: threading.Event, host: str, wall: Callable[[], float] = time.time
) -> Iterator[list[TelemetrySample]]:
    """Each tick's finite readings as rows until `stop`; a CollectorError is an event, not the end."""
    scheduler = TickScheduler(interval_s, wall=wall)
    while (ts := scheduler.wait(stop)) is not None:
        try:
            readings = list(source.sample(ts))
        except CollectorError as exc:
            source.status.event("error", str(exc))
            continue
        yield [
            TelemetrySample(ts, host, source.name, device, metric, float(value))
            for device, metric, value in readings
            if math.isfinite(float(value))
        ]


def not_running(sources: Iterable[Source]) -> str:
    """`name (reason); ...` of the sources skipped or failed ("" when every one runs)."""
    return "; ".join(f"{s.name} ({s.status.reason})" for s in sources if s.status.state in ("skipped", "failed"))
