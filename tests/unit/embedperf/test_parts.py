"""Arrow stream parts: crash tolerance (torn batch, SIGKILL), streaming finalise into sorted Parquet."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from embedperf import parts, schema
from embedperf.parts import PartsWriter


def _telemetry_row(i: int) -> list[object]:
    return [float(i), "h", "psutil", "cpu", "cpu_util_pct", float(i) / 2]


def test_truncated_mid_batch_reads_up_to_last_complete_batch(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    writer = PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "psutil", flush_interval_s=3600)
    for batch in range(3):
        for i in range(batch * 10, batch * 10 + 10):
            writer.write(_telemetry_row(i))
        writer.flush()
    sizes = [writer.path.stat().st_size]
    writer.close()
    data = writer.path.read_bytes()
    # Cut into the third batch: the first two (20 rows) must survive.
    cut = sizes[0] - 40
    writer.path.write_bytes(data[:cut])
    table = schema.read_telemetry_table(folder)
    assert table.column("ts_unix_s").to_pylist() == [float(i) for i in range(20)]
    # A file cut inside its schema message holds nothing, and is not an error.
    writer.path.write_bytes(data[:10])
    assert schema.read_telemetry_table(folder).num_rows == 0


WRITER_SCRIPT = """
import sys, time
from pathlib import Path
from embedperf import schema
from embedperf.parts import PartsWriter
w = PartsWriter(Path(sys.argv[1]), schema.TELEMETRY_SCHEMA, "killed", flush_interval_s=0.05)
i = 0
while True:
    w.write([float(i), "h", "psutil", "cpu", "cpu_util_pct", 1.0])
    i += 1
    if i % 50 == 0:
        time.sleep(0.01)
"""


def test_sigkilled_writer_leaves_a_readable_part(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER_SCRIPT, str(folder.telemetry_parts)], cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )  # fmt: skip
    try:
        part = folder.telemetry_parts / "killed.arrows"
        deadline = time.monotonic() + 60
        while (not part.exists() or part.stat().st_size < 20_000) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    ts = schema.read_telemetry_table(folder).column("ts_unix_s").to_pylist()
    assert len(ts) > 100
    assert ts == [float(i) for i in range(len(ts))]  # a prefix, no gap, no torn row
    assert schema.compact_parts(folder.telemetry_parts, folder.telemetry, schema.TELEMETRY_SCHEMA) == len(ts)


def test_finalise_sorts_by_stage_then_time_and_merges_existing(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()

    def row(stage: int | None, t: float) -> dict[str, object]:
        values = schema.empty_request_row()
        values.update(run_id="r", worker="w", stage_index=stage, t_sent_unix_s=t, latency_ms=t, ok=True)
        return values

    with PartsWriter(folder.requests_parts, schema.REQUEST_SCHEMA, "w1") as a:
        for stage, t in [(1, 15.0), (0, 3.0), (1, 11.0)]:
            a.write(row(stage, t))
    with PartsWriter(folder.requests_parts, schema.REQUEST_SCHEMA, "w2") as b:
        for stage, t in [(0, 1.0), (None, 0.5), (0, 2.0), (1, 12.0)]:
            b.write(row(stage, t))
    assert schema.compact_parts(folder.requests_parts, folder.requests, schema.REQUEST_SCHEMA) == 7
    with PartsWriter(folder.requests_parts, schema.REQUEST_SCHEMA, "late") as c:
        c.write(row(0, 4.0))
    assert schema.compact_parts(folder.requests_parts, folder.requests, schema.REQUEST_SCHEMA) == 8
    table = schema.read_requests_table(folder)
    assert table.column("stage_index").to_pylist() == [0, 0, 0, 0, 1, 1, 1, None]
    assert table.column("t_sent_unix_s").to_pylist() == [1.0, 2.0, 3.0, 4.0, 11.0, 12.0, 15.0, 0.5]
    assert not (folder.root / ".requests.spill").exists()


def test_non_finite_floats_become_null(tmp_path: Path) -> None:
    folder = schema.RunFolder(tmp_path / "r").create()
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "a") as w:
        w.write([1.0, "h", "psutil", "cpu", "m", float("nan")])
        w.write([2.0, "h", "psutil", "cpu", "m", float("inf")])
        w.write({"ts_unix_s": 3.0, "value": 1.5})
    assert schema.read_telemetry_table(folder).column("value").to_pylist() == [None, None, 1.5]


def test_row_groups_follow_the_sort_order(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(parts, "ROW_GROUP_ROWS", 2048)
    folder = schema.RunFolder(tmp_path / "r").create()
    with PartsWriter(folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "a") as w:
        for i in reversed(range(10_000)):
            w.write(_telemetry_row(i))
    schema.compact_parts(folder.telemetry_parts, folder.telemetry, schema.TELEMETRY_SCHEMA)
    meta = pq.ParquetFile(folder.telemetry).metadata
    assert meta.num_row_groups >= 3
    bounds = [(meta.row_group(g).column(0).statistics.min, meta.row_group(g).column(0).statistics.max)
              for g in range(meta.num_row_groups)]  # fmt: skip
    assert all(hi < next_lo for (_, hi), (next_lo, _) in zip(bounds, bounds[1:], strict=False))


def test_writers_of_one_name_started_together_keep_every_row(tmp_path: Path) -> None:
    """Sources of one kind (two agents) open their parts at the same moment: each gets its own file."""
    folder = schema.RunFolder(tmp_path / "r").create()
    n_writers, rows_each = 8, 50
    barrier = threading.Barrier(n_writers)

    def one(k: int) -> None:
        barrier.wait()
        with PartsWriter(
            folder.telemetry_parts, schema.TELEMETRY_SCHEMA, "agent", flush_interval_s=3600
        ) as w:
            for i in range(rows_each):
                w.write(_telemetry_row(k * 1000 + i))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n_writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(parts.part_files(folder.telemetry_parts)) == n_writers
    values = sorted(schema.read_telemetry_table(folder).column("ts_unix_s").to_pylist())
    assert values == sorted(float(k * 1000 + i) for k in range(n_writers) for i in range(rows_each))


def test_a_reserved_part_name_is_not_handed_out_twice(tmp_path: Path) -> None:
    first = parts._fresh_path(tmp_path, "agent")
    second = parts._fresh_path(tmp_path, "agent")
    assert (first.name, second.name) == ("agent.arrows", "agent-2.arrows")
