"""Incremental, crash-tolerant row parts: rows appended as Arrow IPC stream batches every few seconds.

Used for request rows (recorder) and telemetry rows (collectors). One stream file per writer, one
record batch per flush (fsynced), so a killed writer leaves a file that reads back up to its last
complete batch. `schema.compact_parts` streams the parts into Parquet at the end of a run; readers
also read parts left behind by a crash, and CSV parts written by older versions.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from embedperf.errors import RunFolderError

FLUSH_INTERVAL_S = 2.0
WRITE_BUFFER_BYTES = 1 << 20
SYNC_INTERVAL_S = 2.0  # fsync at most this often (and at close): what a crash may lose
FLUSH_MAX_ROWS = 20_000
YIELD_S = 0.0005  # a flush pauses this long between columns: the loop polls its sockets and timers
PART_SUFFIX = ".arrows"
LEGACY_PART_SUFFIX = ".csv"


ColumnsHook = Callable[[list[Any]], None]


def columns_to_batch(
    schema: pa.Schema,
    rows: Sequence[Sequence[Any]],
    prepare: ColumnsHook | None = None,
    pause: Callable[[], None] | None = None,
) -> pa.RecordBatch:
    """Rows (sequences in schema order) -> one record batch, built column by column.

    `prepare` may rewrite the per-column sequences in place first (a column it turns into an Arrow
    array is only cast), so a writer can keep raw values on the hot path and convert a whole
    batch at once. Non-finite floats become null, as a value a source did not report is absent, never NaN.
    `pause`, when given, runs between two steps (a writer sharing an event loop yields there).
    """
    columns: list[Any] = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    if prepare is not None and rows:
        if pause is not None:
            pause()
        prepare(columns)
    arrays = []
    for field, values in zip(schema, columns, strict=True):
        if pause is not None:
            pause()
        if isinstance(values, pa.Array):
            array = values.cast(field.type)
        elif pa.types.is_floating(field.type):
            # NaN and inf in one vectorised pass: from_pandas=True would test every value for NaN
            # in Python-object conversion, the dearest part of building a batch of request rows.
            array = pa.array(values, type=field.type)
            if array.null_count < len(array):
                finite = pc.is_finite(array)
                if not pc.all(finite).as_py():
                    array = pc.if_else(finite, array, pa.scalar(None, field.type))
        else:
            array = pa.array(values, type=field.type, from_pandas=True)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class PartsWriter:
    """Append rows (mappings or sequences in schema order) to `<parts_dir>/<name>.arrows`.

    `write` only appends to a list: a background thread writes the buffered rows as one record batch every
    `flush_interval_s` (and `write` does when `FLUSH_MAX_ROWS` are waiting), fsynced at most every
    `SYNC_INTERVAL_S`, so a crash loses at most a few seconds and the request path pays no encoding.
    Thread-safe. In a gevent process (Locust) the background thread is a greenlet sharing the users' loop.
    """

    def __init__(
        self,
        parts_dir: Path,
        schema: pa.Schema,
        name: str,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        prepare: ColumnsHook | None = None,
    ) -> None:
        self.schema = schema
        self.prepare = prepare
        self.columns: tuple[str, ...] = tuple(schema.names)
        parts_dir.mkdir(parents=True, exist_ok=True)
        self.path = _fresh_path(parts_dir, name)
        self.flush_interval_s = flush_interval_s
        self._buffer: list[Sequence[Any]] = []
        self._lock = threading.Lock()
        self.rows_written = 0
        # The first batch's one-time work happens here, before any load, not in the first flush: pyarrow
        # imports pandas for its null handling on first use, and in a gevent process (Locust) an import
        # cannot yield, so the 0.2-0.5 s it takes would stall every request in flight at that moment.
        columns_to_batch(schema, [[None] * len(schema)], prepare)
        self._file = pa.OSFile(str(self.path), "wb")
        # A batch's buffers reach the file in one write per flush instead of one per column buffer.
        self._sink = pa.BufferedOutputStream(self._file, WRITE_BUFFER_BYTES)
        self._stream = pa.ipc.new_stream(self._sink, schema)
        self._sink.flush()
        self._synced_s = time.monotonic()
        self._closed = False
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"parts-{name}", daemon=True)
        self._flusher.start()

    def write(self, row: Mapping[str, Any] | Sequence[Any]) -> None:
        self.write_values(row if not isinstance(row, Mapping) else [row.get(c) for c in self.columns])

    def write_values(self, values: Sequence[Any]) -> None:
        """A row already in schema order: the per-request path (no type checks, no conversion)."""
        buffer = self._buffer
        buffer.append(values)
        if len(buffer) >= FLUSH_MAX_ROWS:
            self.flush()

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.flush()

    def flush(self) -> None:
        with self._lock:
            rows, self._buffer = self._buffer, []
            if self._closed or not rows:
                return
            self._stream.write_batch(columns_to_batch(self.schema, rows, self.prepare, _yield_to_others))
            self._sink.flush()
            self.rows_written += len(rows)
            if time.monotonic() - self._synced_s >= SYNC_INTERVAL_S:
                self._sync()

    def _sync(self) -> None:
        os.fsync(self._file.fileno())
        self._synced_s = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self.flush()
        with self._lock:
            if not self._closed:
                self._closed = True
                self._stream.close()
                self._sink.flush()
                self._sync()
                self._sink.close()

    def __enter__(self) -> PartsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _yield_to_others() -> None:
    """Between two steps of a flush: in a gevent process (Locust) `time.sleep` is gevent's, so the users'
    greenlets and the open-loop schedule run here instead of waiting for the whole batch (tens of ms on
    a busy host); elsewhere it only lets other threads take the GIL."""
    time.sleep(YIELD_S)


def _fresh_path(parts_dir: Path, name: str) -> Path:
    """Create and return a part file no other writer has: `name`, else `name-2`, `name-3`...

    A stream file cannot be reopened for append, and writers of one name may start at the same
    moment (two agents), so the name is reserved by an exclusive create, never by a check first.
    """
    n = 1
    while True:
        path = parts_dir / (f"{name}{PART_SUFFIX}" if n == 1 else f"{name}-{n}{PART_SUFFIX}")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            n += 1


# Reading parts back (one batch at a time)
def part_files(parts_dir: Path) -> list[Path]:
    if not parts_dir.is_dir():
        return []
    return sorted(p for p in parts_dir.iterdir() if p.suffix in (PART_SUFFIX, LEGACY_PART_SUFFIX))


def iter_part_batches(parts_dir: Path, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Every complete batch of every part, in schema order; a torn tail (crash mid-write) ends a part."""
    for part in part_files(parts_dir):
        if part.suffix == PART_SUFFIX:
            yield from _stream_batches(part, schema)
        else:
            yield from read_csv_part(part, schema).to_batches()


def _stream_batches(part: Path, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    with pa.OSFile(str(part), "rb") as source:
        try:
            reader = pa.ipc.open_stream(source)
        except (pa.ArrowInvalid, OSError):
            return  # killed before the schema reached the disk: nothing was recorded
        while True:
            try:
                batch = reader.read_next_batch()
            except (StopIteration, pa.ArrowInvalid, OSError):
                return  # the end, or a torn final batch
            yield conform(batch, schema)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch in `schema`'s column order and types; a column an older writer did not have is null."""
    if batch.schema == schema:
        return batch
    names = set(batch.schema.names)
    arrays = [
        batch.column(field.name).cast(field.type)
        if field.name in names
        else pa.nulls(batch.num_rows, field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_csv_part(part: Path, schema: pa.Schema) -> pa.Table:
    """A CSV part of an older run folder; a torn last line is dropped, not fatal."""
    data = part.read_bytes()
    if not data.strip():
        return schema.empty_table()
    if not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]  # torn final row
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=None),
            convert_options=pacsv.ConvertOptions(
                column_types={f.name: f.type for f in schema},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                true_values=["true", "True", "1"],
                false_values=["false", "False", "0"],
            ),
        )
        return pa.Table.from_batches([conform(b, schema) for b in table.to_batches()], schema=schema)
    except (pa.ArrowInvalid, KeyError) as exc:
        raise RunFolderError(f"{part} is not a valid parts file: {exc}") from exc


def remove_parts(parts_dir: Path) -> None:
    for part in part_files(parts_dir):
        part.unlink()
    if parts_dir.is_dir() and not any(parts_dir.iterdir()):
        parts_dir.rmdir()


# Finalising: parts -> one sorted Parquet file, streamed
ROW_GROUP_ROWS = 262_144  # a step or a minute of a long run spans few row groups
FINALISE_MEMORY_LIMIT = "512MB"


def finalise_parts(parts_dir: Path, target: Path, schema: pa.Schema, sort_keys: Sequence[str]) -> int:
    """Stream every part (and an existing target) through DuckDB's external sort into target.

    The sort spills to a temporary folder beside the target, so memory is bounded by
    FINALISE_MEMORY_LIMIT, not by the run's length; row groups come out ordered by sort_keys, so
    their min/max statistics let a reader skip to one step or one time window.
    """
    import duckdb  # the finaliser alone needs it; the recording path stays light

    def batches() -> Iterator[pa.RecordBatch]:
        if target.is_file():
            parquet = pq.ParquetFile(target)
            for batch in parquet.iter_batches(batch_size=ROW_GROUP_ROWS):
                yield conform(batch, schema)
        yield from iter_part_batches(parts_dir, schema)

    reader = pa.RecordBatchReader.from_batches(schema, (b for b in batches() if b.num_rows))
    tmp = target.with_suffix(".parquet.tmp")
    spill = target.parent / f".{target.stem}.spill"
    order = ", ".join(f'"{key}" NULLS LAST' for key in sort_keys)
    con = duckdb.connect(config={"memory_limit": FINALISE_MEMORY_LIMIT, "threads": 2})
    try:
        con.execute(f"SET temp_directory = '{spill}'")
        con.register("parts", reader)
        con.execute(
            f"COPY (SELECT * FROM parts ORDER BY {order}) TO '{tmp}' "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
        )
        rows = int(pq.ParquetFile(tmp).metadata.num_rows)
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    os.replace(tmp, target)
    return rows
