"""The DuckDB side of the engine: a bounded connection, the run's request files, the prepared-rows view.

Every out-of-core reader opens its connection here, so the memory limit, the thread count and the
spill folder are the same everywhere; `create_views` assigns each row its stage and steady window once.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.model.steps import TIMEOUT_STATUS_CODES, VALIDATION_ENDPOINT_PREFIX
from embedperf.parts import finalise_parts, part_files
from embedperf.schema import REQUEST_SCHEMA, REQUEST_SORT_KEYS, RunFolder, StageRecord

MEMORY_LIMIT = "1GB"
THREADS = 2
# Below one DuckDB row group (122,880 rows) there is nothing for a second thread to share, only its
# scheduling: on 50k rows two threads spent 16% more CPU for the same wall time; from 300k rows they win.
ONE_THREAD_BELOW_ROWS = 100_000
# A run below this many request rows is read once into a table: its dozens of per-step queries then skip
# re-reading the Parquet and re-deriving stage and outcome. It saved 31% of the CPU on 144k rows and 22% on
# 200k; 1M rows in a table would hold 200 MB more, so longer runs stay on the Parquet.
IN_MEMORY_BELOW_ROWS = 250_000


@contextmanager
def connect(
    work_dir: Path | None = None, memory_limit: str = MEMORY_LIMIT, threads: int = THREADS
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with a memory limit, `threads` threads and a spill folder (removed afterwards)."""
    spill = Path(tempfile.mkdtemp(prefix="duckdb-spill-", dir=work_dir))
    con = duckdb.connect(config={"memory_limit": memory_limit, "threads": threads})
    try:
        con.execute(f"SET temp_directory = '{spill}'")
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def row_count(files: Sequence[Path]) -> int:
    """The rows of the Parquet files, from their footers."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def threads_for(files: Sequence[Path]) -> int:
    """THREADS for inputs of ONE_THREAD_BELOW_ROWS rows or more, else 1."""
    return 1 if row_count(files) < ONE_THREAD_BELOW_ROWS else THREADS


def table_files(
    whole: Path, parts: Path, leftover: Path, schema: pa.Schema, sort_keys: Sequence[str]
) -> list[Path]:
    """A run's table file, plus the parts an interrupted run left, streamed into a Parquet (leftover)."""
    files = [whole] if whole.is_file() else []
    if part_files(parts):
        finalise_parts(parts, leftover, schema, sort_keys)
        files.append(leftover)
    return files


def request_files(folder: RunFolder, work_dir: Path) -> list[Path]:
    """requests.parquet, plus the parts an interrupted run left, streamed into a Parquet beside it."""
    leftover = work_dir / "requests.parts.parquet"
    return table_files(folder.requests, folder.requests_parts, leftover, REQUEST_SCHEMA, REQUEST_SORT_KEYS)


@dataclass(frozen=True)
class StepWindows:
    """Steady window per stage, as the in-memory stage_windows (tests/oracles/in_memory/steps.py) computes it."""

    windows: dict[int, tuple[float, float]]

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection, stages: list[StageRecord]) -> StepWindows:
        windows: dict[int, tuple[float, float]] = {}
        ordered = sorted(stages, key=lambda s: s.start_unix_s)
        for i, stage in enumerate(ordered):
            end = stage.end_unix_s
            if end is None and i + 1 < len(ordered):
                end = ordered[i + 1].start_unix_s
            if end is None:
                last_done = "SELECT max(t_done_unix_s) FROM src WHERE stage_index = ?"
                [(done,)] = con.execute(last_done, [stage.index]).fetchall()
                end = float(done) if done is not None else stage.start_unix_s
            windows[stage.index] = (min(stage.start_unix_s + stage.warmup_s, end), float(end))
        return cls(windows)


def create_views(con: duckdb.DuckDBPyConnection, files: list[Path], stages: list[StageRecord]) -> StepWindows:
    """`src` (raw rows), `tagged` (stage, outcome, probe; a table below IN_MEMORY_BELOW_ROWS rows) and
    `prepared` (steady, analysable rows). The rules are those of the in-memory prepare_requests
    (tests/oracles/in_memory/steps.py): a missing stage_index comes from t_sent within the recorded stage
    starts; timeouts are 408/504 or an error saying so; probes are validation endpoints; ok rows without a
    latency and rows sent during a warm-up are left out.
    """
    paths = ", ".join(f"'{p}'" for p in files)
    con.register("requests_empty", REQUEST_SCHEMA.empty_table())
    # every schema column, NULL where an older file lacks it (as the in-memory reader does)
    union = f" UNION ALL BY NAME SELECT * FROM read_parquet([{paths}], union_by_name = true)"
    con.execute(f"CREATE VIEW src AS SELECT * FROM requests_empty{union if files else ''}")
    windows = StepWindows.of(con, stages)
    ordered = sorted(stages, key=lambda s: s.start_unix_s)
    by_time = " ".join(f"WHEN t_sent_unix_s >= {s.start_unix_s!r} THEN {s.index}" for s in reversed(ordered))
    last = ordered[-1].index if ordered else "NULL"
    stage_expr = (
        f"CASE WHEN stage_index IS NOT NULL THEN stage_index WHEN t_sent_unix_s IS NULL THEN {last} "
        f"{by_time} ELSE NULL END" if ordered else "stage_index"
    )
    timeout_codes = ", ".join(str(c) for c in sorted(TIMEOUT_STATUS_CODES))
    con.execute(
        f"""CREATE {"TEMP TABLE" if row_count(files) < IN_MEMORY_BELOW_ROWS else "VIEW"} tagged AS SELECT *,
            ({stage_expr}) AS stage,
            CASE WHEN coalesce(ok, false) THEN 0
                 WHEN status_code IN ({timeout_codes})
                      OR coalesce(contains(lower(error), 'timeout') OR contains(lower(error), 'timed out'), false)
                 THEN 2 ELSE 1 END AS outcome,
            coalesce(starts_with(endpoint, '{VALIDATION_ENDPOINT_PREFIX}'), false) AS probe
        FROM src"""
    )
    known = ", ".join(repr(float(i)) for i in windows.windows) or "NULL"
    steady = " ".join(f"WHEN {i} THEN {w[0]!r}" for i, w in windows.windows.items())
    steady_expr = f"CASE stage {steady} END" if steady else "NULL"
    con.execute(
        f"""CREATE VIEW checked AS SELECT *,
            stage IN ({known}) AS known,
            (latency_ms IS NULL OR isnan(latency_ms)) AND outcome = 0 AS null_latency,
            coalesce(t_sent_unix_s < {steady_expr}, false) AS in_warmup
        FROM tagged"""
    )
    con.execute(
        "CREATE VIEW prepared AS SELECT * FROM checked WHERE known AND NOT null_latency AND NOT in_warmup"
    )
    return windows


