"""Live figures of the run in progress, read back from the run folder's row parts as they are flushed.

The web UI's live tab and the Prometheus endpoint both show these. They read what the recorder and the
collectors have already written (requests.parts/, telemetry.parts/), so local and distributed runs look the
same and nothing is added to the request hot path; figures lag the writers' flush interval (a few seconds)."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from embedperf.error_kinds import error_kind
from embedperf.errors import RunFolderError
from embedperf.parts import PART_SUFFIX, part_files
from embedperf.schema import REQUEST_COLUMNS, RunFolder, read_manifest
from loadgen.traffic.payloads import VALIDATION_PREFIX

# Upper bounds of the latency histogram buckets (the last, +Inf, is implicit).
LATENCY_BUCKETS_MS: tuple[float, ...] = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
SERVER_STAGES: tuple[str, ...] = ("queue", "tokenize", "compute", "post")
# Telemetry shown live: the serving devices' figures, or the host and service without a device.
DEVICE_METRICS: tuple[str, ...] = ("device_util_pct", "aicore_util_pct", "power_w", "temp_c", "mem_used_mb")
HOST_METRICS: dict[str, tuple[str, ...]] = {"cpu": ("cpu_util_pct",), "proc:service": ("busy_frac", "cpu_util_pct")}
LIVE_COLUMNS = ("endpoint", "ok", "error", "status_code", "latency_ms", "n_inputs")


class TelemetrySample(NamedTuple):
    ts_unix_s: float
    source: str
    value: float


class PartsTail:
    """Record batches appended to one folder's Arrow stream parts since the last read: each part is read on
    from the end of its last complete message, so a refresh costs only what was appended."""

    def __init__(self, parts_dir: Path) -> None:
        self.parts_dir = parts_dir
        self._offsets: dict[Path, int] = {}
        self._schemas: dict[Path, pa.Schema] = {}

    def read_new(self) -> Iterator[dict[str, Any]]:
        for path in part_files(self.parts_dir):
            if path.suffix != PART_SUFFIX:
                continue
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            reader = pa.BufferReader(pa.py_buffer(data))
            consumed = 0
            while True:
                try:
                    message = pa.ipc.read_message(reader)
                except (pa.ArrowInvalid, OSError, EOFError):
                    break  # end of what is on disk, or a message still being written
                if message is None:
                    break
                consumed = reader.tell()
                if message.type == "schema":
                    self._schemas[path] = pa.ipc.read_schema(message)
                elif path in self._schemas:
                    yield from pa.ipc.read_record_batch(message, self._schemas[path]).to_pylist()
            self._offsets[path] = offset + consumed


def cell_float(value: object) -> float | None:
    """A cell (CSV text or a typed Parquet value) as a finite float; None when empty or not a number."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@dataclass
class StepFigures:
    """What the rows recorded so far say about one step (validation probes left out)."""

    index: int
    label: str
    target_users: int | None = None
    target_rate: float | None = None
    requests: int = 0
    ok: int = 0
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    latency_bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    latency_sum_ms: float = 0.0
    embeddings: float = 0.0  # inputs of the ok requests (one each where a row carries no n_inputs)
    first_sent_unix_s: float | None = None
    last_done_unix_s: float | None = None
    server_sum_ms: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SERVER_STAGES, 0.0))
    server_count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SERVER_STAGES, 0))

    def add(self, row: Mapping[str, Any]) -> None:
        self.requests += 1
        ok = row.get("ok") in ("true", True)
        latency_ms = cell_float(row.get("latency_ms"))
        if ok:
            self.ok += 1
            self.embeddings += cell_float(row.get("n_inputs")) or 1.0
            for stage in SERVER_STAGES:
                value = cell_float(row.get(f"srv_{stage}_ms"))
                if value is not None:
                    self.server_sum_ms[stage] += value
                    self.server_count[stage] += 1
        else:
            status = cell_float(row.get("status_code"))
            self.errors_by_kind[error_kind(status, str(row.get("error") or ""))] += 1
        if latency_ms is not None:
            self.latency_sum_ms += latency_ms
            bucket = next((i for i, b in enumerate(LATENCY_BUCKETS_MS) if latency_ms <= b), len(LATENCY_BUCKETS_MS))
            self.latency_bucket_counts[bucket] += 1
        sent, done = cell_float(row.get("t_sent_unix_s")), cell_float(row.get("t_done_unix_s"))
        if sent is not None and (self.first_sent_unix_s is None or sent < self.first_sent_unix_s):
            self.first_sent_unix_s = sent
        if done is not None and (self.last_done_unix_s is None or done > self.last_done_unix_s):
            self.last_done_unix_s = done

    @property
    def errors(self) -> int:
        return self.requests - self.ok

    @property
    def embeddings_per_s(self) -> float:
        """Embeddings of successful requests per second, over the same span as goodput_rps."""
        return self.goodput_rps * self.embeddings / self.ok if self.ok else 0.0

    @property
    def goodput_rps(self) -> float:
        """Successful requests per second over the step's span of recorded requests so far."""
        if self.first_sent_unix_s is None or self.last_done_unix_s is None:
            return 0.0
        span_s = self.last_done_unix_s - self.first_sent_unix_s
        return self.ok / span_s if span_s > 0 else 0.0

    def latency_bound_ms(self, q: float) -> float | None:
        """The bucket bound under which a fraction q of latencies lie (inf: above all; None: none yet)."""
        total = sum(self.latency_bucket_counts)
        if not total:
            return None
        seen = 0
        for bound, count in zip((*LATENCY_BUCKETS_MS, math.inf), self.latency_bucket_counts, strict=True):
            seen += count
            if seen >= q * total:
                return bound
        return math.inf

    def server_mean_ms(self) -> dict[str, float]:
        """Mean of each Server-Timing stage; stages the target does not report are absent."""
        return {s: self.server_sum_ms[s] / n for s, n in self.server_count.items() if n}


class LiveRun:
    """The live view of one run folder. `refresh()` reads what was flushed since the last call."""

    def __init__(self, folder: RunFolder) -> None:
        self.folder = folder
        self.steps: dict[int, StepFigures] = {}
        self.latest: dict[tuple[str, str], TelemetrySample] = {}  # (device, metric) -> newest sample
        self.final = False
        self._requests = PartsTail(folder.requests_parts)
        self._telemetry = PartsTail(folder.telemetry_parts)
        self._lock = threading.Lock()

    def refresh(self) -> LiveRun:
        with self._lock:
            if not self.final and self.folder.requests.is_file() and not self.folder.requests_parts.is_dir():
                self._load_final()
            for row in self._requests.read_new():
                self._add(row)
            for row in self._telemetry.read_new():
                ts, value = cell_float(row.get("ts_unix_s")), cell_float(row.get("value"))
                if ts is None or value is None:
                    continue
                key = (row.get("device") or "", row.get("metric") or "")
                known = self.latest.get(key)
                if known is None or ts >= known.ts_unix_s:
                    self.latest[key] = TelemetrySample(ts, row.get("source") or "", value)
        return self

    def _add(self, row: Mapping[str, Any]) -> None:
        if str(row.get("endpoint") or "").startswith(VALIDATION_PREFIX):
            return
        index_value = cell_float(row.get("stage_index"))
        if index_value is None:
            return
        index = int(index_value)
        step = self.steps.get(index)
        if step is None:
            users = cell_float(row.get("target_users"))
            step = self.steps[index] = StepFigures(
                index=index, label=str(row.get("stage_label") or ""),
                target_users=int(users) if users is not None else None,
                target_rate=cell_float(row.get("target_rate")),
            )
        step.add(row)

    def _load_final(self) -> None:
        """The run ended and its parts were compacted: recount every step from requests.parquet."""
        self.final = True
        self.steps = {}
        wanted = [c for c in REQUEST_COLUMNS if c.startswith(("stage_", "target_", "t_", "srv_")) or c in LIVE_COLUMNS]
        for batch in pq.ParquetFile(self.folder.requests).iter_batches(columns=wanted):
            for row in batch.to_pylist():
                self._add(row)

    @property
    def current_step(self) -> StepFigures | None:
        return self.steps[max(self.steps)] if self.steps else None

    def device_figures(self) -> dict[tuple[str, str], TelemetrySample]:
        """Newest sample of each device figure; host CPU and service busy fraction when no device reports."""
        figures = {
            k: v for k, v in self.latest.items() if k[1] in DEVICE_METRICS and k[0].startswith(("npu", "gpu"))
        } or {k: v for k, v in self.latest.items() if k[1] in HOST_METRICS.get(k[0], ())}
        return dict(sorted(figures.items()))


class RunFollower:
    """The live view of the run `current_run()` returns (or None); keeps the last one after it ends."""

    def __init__(self, current_run: Callable[[], Any]) -> None:
        self.current_run = current_run
        self.live: LiveRun | None = None
        self._finished = False

    @property
    def running(self) -> bool:
        return self.current_run() is not None

    @property
    def finished(self) -> bool:
        """The followed run has ended and its final manifest is on disk (its report can be built)."""
        if self.live is None or self.running:
            return False
        if not self._finished:
            try:
                self._finished = read_manifest(self.live.folder).complete
            except (RunFolderError, ValueError):
                return False
        return self._finished

    def __call__(self) -> LiveRun | None:
        run = self.current_run()
        if run is not None and (self.live is None or self.live.folder.root != run.folder.root):
            self.live = LiveRun(run.folder)
            self._finished = False
        return self.live.refresh() if self.live is not None else None
