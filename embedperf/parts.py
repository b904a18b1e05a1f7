"""Incremental, crash-tolerant row writer: buffered rows appended to a CSV part every few seconds.

Used for request rows (recorder) and telemetry rows (collectors). `schema.compact_parts` merges the
parts into Parquet at the end of a run; readers also read parts left behind by a crash.
"""

from __future__ import annotations

import csv
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

FLUSH_INTERVAL_S = 2.0
FLUSH_MAX_ROWS = 20_000


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    return value


def _cells(values: Sequence[Any], isfinite: Any = math.isfinite) -> list[Any]:
    """`_cell` over a row, inlined: flushing runs it for every value of every row."""
    return [
        ""
        if v is None
        else "true"
        if v is True
        else "false"
        if v is False
        else ""
        if isinstance(v, float) and not isfinite(v)
        else v
        for v in values
    ]


class PartsWriter:
    """Append rows (mappings or sequences in schema order) to `<parts_dir>/<name>.csv`.

    Rows are buffered and written when `FLUSH_INTERVAL_S` has passed or `FLUSH_MAX_ROWS` are
    waiting, so a crash loses at most a few seconds. Thread-safe.
    """

    def __init__(
        self,
        parts_dir: Path,
        schema: pa.Schema,
        name: str,
        flush_interval_s: float = FLUSH_INTERVAL_S,
    ) -> None:
        self.columns: tuple[str, ...] = tuple(schema.names)
        self.path = parts_dir / f"{name}.csv"
        self.flush_interval_s = flush_interval_s
        self._buffer: list[Sequence[Any]] = []
        self._lock = threading.Lock()
        self._last_flush = time.monotonic()
        self.rows_written = 0
        parts_dir.mkdir(parents=True, exist_ok=True)
        new_file = not self.path.exists() or self.path.stat().st_size == 0
        self._fh = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - long-lived
        self._csv = csv.writer(self._fh, lineterminator="\n")
        if new_file:
            self._csv.writerow(self.columns)
            self._fh.flush()

    def write(self, row: Mapping[str, Any] | Sequence[Any]) -> None:
        values = (
            row if type(row) is list or not isinstance(row, Mapping) else [row.get(c) for c in self.columns]
        )
        with self._lock:
            self._buffer.append(values)
            due = (
                len(self._buffer) >= FLUSH_MAX_ROWS
                or time.monotonic() - self._last_flush >= self.flush_interval_s
            )
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            rows, self._buffer = self._buffer, []
            self._last_flush = time.monotonic()
            if self._fh.closed:
                return
            self._csv.writerows([_cells(values) for values in rows])
            self.rows_written += len(rows)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        self.flush()
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> PartsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
