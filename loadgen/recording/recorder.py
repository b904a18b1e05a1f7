"""The recorder: one row per request (REQUEST_SCHEMA), tagged with its stage, written incrementally.

Rows reach the recorder from local users or, in distributed mode, in batches forwarded by workers; either way
the process that owns the run folder tags each row with the stage whose real boundaries contain its intended
start, then appends it to an Arrow stream part (PartsWriter, written off the request path; the raw response
headers are parsed there, a batch at a time). `close()` streams the parts into requests.parquet."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from embedperf.parts import PartsWriter
from embedperf.schema import (
    REQUEST_COLUMNS,
    REQUEST_SCHEMA,
    RequestRow,
    RunFolder,
    StageRecord,
    StepEnding,
    compact_parts,
)
from loadgen.traffic.context import Stage
from loadgen.traffic.headers import TIMING_VALUE_COLUMNS, header_text_column, parse_raw_timing

STAGE_INDEX_POS = REQUEST_COLUMNS.index("stage_index")
T_INTENDED_POS = REQUEST_COLUMNS.index("t_intended_unix_s")
RUN_ID_POS = REQUEST_COLUMNS.index("run_id")
TIMING_POS = REQUEST_COLUMNS.index(TIMING_VALUE_COLUMNS[0])
SERVED_MODEL_POS = REQUEST_COLUMNS.index("served_model")


class StageTimeline:
    """Real stage boundaries as they happen; looked up by timestamp to tag rows."""

    def __init__(self) -> None:
        self.stages: list[StageRecord] = []
        self._starts: list[float] = []
        self._tags: list[Stage] = []  # per stage, the values of a row's stage columns
        self._lock = threading.Lock()

    def begin(
        self, index: int, label: str, t_unix_s: float, users: int | None = None, rate: float | None = None,
        warmup_s: float = 0.0,
    ) -> None:
        self.end(t_unix_s)
        with self._lock:
            self.stages.append(
                StageRecord(index=index, label=label, users=users, rate=rate, start_unix_s=t_unix_s, warmup_s=warmup_s)
            )
            self._starts.append(t_unix_s)
            self._tags.append((index, label, users, rate))

    def end(self, t_unix_s: float) -> None:
        with self._lock:
            if self.stages and self.stages[-1].end_unix_s is None:
                self.stages[-1].end_unix_s = t_unix_s

    def record_ending(self, index: int, ending: StepEnding) -> None:
        """Why an adaptive step ended (written into its stage record, and so the manifest)."""
        with self._lock:
            for stage in self.stages:
                if stage.index == index:
                    stage.ending = ending

    @property
    def current(self) -> StageRecord | None:
        return self.stages[-1] if self.stages else None

    def tag(self, t_unix_s: float | None) -> Stage | None:
        """Stage columns for a row intended at t (None: the current stage; before the first: the first)."""
        tags = self._tags
        if not tags:
            return None
        if t_unix_s is None or t_unix_s >= self._starts[-1]:
            return tags[-1]
        return tags[max(bisect.bisect_right(self._starts, t_unix_s) - 1, 0)]


def _parse_headers(columns: list[Any]) -> None:
    """Rows carry raw header values (embedperf.schema.RequestRow); each batch parses them at once."""
    parse_raw_timing(columns, TIMING_POS)
    columns[SERVED_MODEL_POS] = header_text_column(columns[SERVED_MODEL_POS])


class Recorder:
    """Owns requests.parts/<worker>.arrows for one run; thread- and greenlet-safe."""

    def __init__(
        self, folder: RunFolder, timeline: StageTimeline, part_name: str = "requests",
        watch: Callable[[list[Any]], None] | None = None,
    ) -> None:
        self.folder = folder
        self._watch = watch  # sees every tagged row (loadgen.recording.until_watch: adaptive steps)
        self.run_id = folder.run_id
        self.timeline = timeline
        self._writer = PartsWriter(folder.requests_parts, REQUEST_SCHEMA, part_name, prepare=_parse_headers)
        self._append = self._writer.write_values
        self._closed = False
        self.rows_received = 0

    def write(self, row: RequestRow) -> None:
        """Write one request's row (the local run's sink), tagged as recorded; runs once per request."""
        row.run_id = self.run_id
        if row.stage_index is None and (tag := self.timeline.tag(row.t_intended_unix_s)) is not None:
            row.stage_index, row.stage_label, row.target_users, row.target_rate = tag
        self.write_values(row.values())

    def write_values(self, values: list[Any]) -> None:
        """Write a row given as values in REQUEST_COLUMNS order (the forwarded form); runs once per request."""
        if self._closed:
            return
        values[RUN_ID_POS] = self.run_id
        if values[STAGE_INDEX_POS] is None:
            tag = self.timeline.tag(values[T_INTENDED_POS])
            if tag is not None:
                values[STAGE_INDEX_POS : STAGE_INDEX_POS + 4] = tag
        self.rows_received += 1
        if self._watch is not None:
            self._watch(values)
        self._append(values)

    def write_many(self, rows: Iterable[Sequence[Any]]) -> None:
        for values in rows:
            self.write_values(list(values))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> int:
        """Flush, then compact the parts into requests.parquet; returns the row count."""
        if self._closed:
            return self.rows_received
        self._closed = True
        self._writer.close()
        return compact_parts(self.folder.requests_parts, self.folder.requests, REQUEST_SCHEMA)


assert REQUEST_COLUMNS[STAGE_INDEX_POS : STAGE_INDEX_POS + 4] == (
    "stage_index", "stage_label", "target_users", "target_rate"
), "recorder assumes the stage columns are adjacent in REQUEST_SCHEMA"
