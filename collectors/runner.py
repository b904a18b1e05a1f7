"""Runs every source in its own thread on a shared tick grid; writes rows, status and the Parquet file.

A source that fails never stops the others. collectors.json is refreshed every few seconds so a
crashed run still says what was collected.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable

from collectors.base import Source, begin_source, start_source_threads, tick_rows
from collectors.config import CollectorConfig
from embedperf.errors import CollectorError
from embedperf.files import write_atomically
from embedperf.parts import PartsWriter
from embedperf.schema import TELEMETRY_SCHEMA, RunFolder, TelemetrySample, compact_parts

STATUS_REFRESH_S = 5.0
# All sources together get this long to finish after stop: the load runs wait about 15 s after SIGTERM.
JOIN_TIMEOUT_S = 10.0


class CollectorRunner:
    """Owns the source threads. `run()` blocks until the duration ends or `stop()` is called."""

    def __init__(self, config: CollectorConfig, sources: list[Source]) -> None:
        self.config = config
        self.sources = sources
        self.folder = RunFolder(config.out_dir).create()
        self.stop_event = threading.Event()
        self._threads: dict[Source, threading.Thread] = {}
        self.start_unix_s = time.time()

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> int:
        """Sample until stopped; then flush, compact telemetry.parquet, write collectors.json. Returns rows."""
        self._threads = start_source_threads(self.sources, self._run_source, "collector")
        deadline = None if self.config.duration_s is None else time.monotonic() + self.config.duration_s
        while not self.stop_event.is_set():
            wait_s = (STATUS_REFRESH_S if deadline is None else min(STATUS_REFRESH_S, deadline - time.monotonic()))
            if wait_s <= 0 or self.stop_event.wait(wait_s):
                break
            self.write_status()
        self.stop_event.set()
        join_deadline = time.monotonic() + JOIN_TIMEOUT_S
        for thread in self._threads.values():
            thread.join(max(0.0, join_deadline - time.monotonic()))
        for source, thread in self._threads.items():
            if thread.is_alive():
                source.status.event("error", f"did not stop within {JOIN_TIMEOUT_S:.0f} s")
        self.write_status()
        rows = compact_parts(self.folder.telemetry_parts, self.folder.telemetry, TELEMETRY_SCHEMA)
        self.write_status()
        return rows

    def _run_source(self, source: Source) -> None:
        writer = PartsWriter(self.folder.telemetry_parts, TELEMETRY_SCHEMA, source.name)
        try:
            if not begin_source(source):
                return
            if source.periodic:
                for rows in tick_rows(source, self.config.interval_s, self.stop_event, self.config.host_label):
                    self._write(writer, source, rows)
            self.stop_event.wait()  # returns at once after ticks; pull-style sources only wait to finish
            end_unix_s = self.config.prometheus_end_unix_s or time.time()
            start_unix_s = self.config.prometheus_start_unix_s or self.start_unix_s
            try:
                self._write(writer, source, source.finish(start_unix_s, end_unix_s))
            except CollectorError as exc:
                source.status.set("failed", str(exc))
                return
            source.status.set("done")
        except Exception as exc:  # a bug in one source must not take the others down
            source.status.event("error", f"{type(exc).__name__}: {exc}")
            source.status.set("failed", f"crashed: {type(exc).__name__}: {exc}")
        finally:
            source.close()
            writer.close()

    @staticmethod
    def _write(writer: PartsWriter, source: Source, rows: Iterable[TelemetrySample]) -> None:
        n = 0
        for row in rows:
            if not math.isfinite(row.value):
                continue
            writer.write((row.ts_unix_s, row.host, row.source, row.device, row.metric, row.value))
            n += 1
        source.status.add_samples(n)

    def write_status(self) -> None:
        """collectors.json: a JSON list of CollectorStatus dicts, replaced atomically."""
        statuses = [source.status.snapshot().model_dump() for source in self.sources]
        write_atomically(self.folder.collectors_status, json.dumps(statuses, indent=2))
