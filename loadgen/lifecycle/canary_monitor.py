"""A canary judged live: the rows on disk cut into windows, each judged as soon as its rows are in.

Runs where the run folder is written (local or master), driven by the shape's tick, reading what the recorder
and collectors flushed (PartsTail), so a distributed canary is judged like a local one and the request path
pays nothing. A window is judged `settle_s` after it ends (the writers' flush delay; locally the monitor
flushes the recorder itself); later rows are in the report, not the verdict. canary.json is rewritten after
each judged window. Stage s's window k spans [start_s + k * window_s, start_s + (k + 1) * window_s), cut at
the stage's end; a request belongs to the window it was sent in, while the availability seconds count
completions in the window."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decisions.canary_verdict import CanaryVerdict, judge, stage_windows
from embedperf.availability import bin_count, bin_of, spanned_bins, unavailable_seconds
from embedperf.canary_record import SIDES, CanaryRecord, SideWindow, WindowJudgement, write_canary_record
from embedperf.error_kinds import error_kind
from embedperf.schema import StageRecord
from loadgen.lifecycle.session import RunSession
from loadgen.recording.live import PartsTail, cell_float
from loadgen.traffic.context import fetch_service_info
from loadgen.traffic.payloads import VALIDATION_PREFIX

PERCENTILES_PCT: tuple[float, float, float] = (50.0, 95.0, 99.0)


@dataclass
class _SideRows:
    """One side's requests sent in one window."""

    requests: int = 0
    ok_latencies_ms: list[float] = field(default_factory=list)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    agreement: list[float] = field(default_factory=list)
    slowest_s: float = 0.0


@dataclass
class _Completion:
    """When a request of one side ended (or hung), for the availability seconds."""

    t_sent_unix_s: float | None
    t_done_unix_s: float | None
    ok: bool


class CanaryMonitor:
    """Judges one canary run's windows as they complete; `poll` from the shape's tick, `finish` at the end."""

    def __init__(self, run: RunSession, settle_s: float, flush: Callable[[], None] | None = None) -> None:
        self.run = run
        self._flush = flush  # the local recorder's flush: a window's rows are on disk when it is judged
        self.canary = run.scenario.canary
        self.rollback = run.scenario.rollback
        self.settle_s = settle_s
        self._requests = PartsTail(run.folder.requests_parts)
        self._telemetry = PartsTail(run.folder.telemetry_parts)
        self._sent: dict[tuple[int, int], dict[str, _SideRows]] = {}
        self._ended: dict[str, list[_Completion]] = {side: [] for side in SIDES}
        self._temps: list[tuple[float, float]] = []  # (ts, temp_c) of the candidate's devices
        # The slowest answer lately: a window waits this much longer for requests still in flight at its end.
        self._latency_hint_s = 0.0
        self._timeout_s = run.scenario.target.timeout_s
        self.windows: list[WindowJudgement] = []
        self._judged: set[tuple[int, int]] = set()
        self.verdict = CanaryVerdict("running", "")
        self.record = CanaryRecord(
            baseline_url=self.canary.baseline_url or run.host, candidate_url=self.canary.candidate_url,
            stages_pct=list(self.canary.stages_pct), window_s=self.canary.window_s,
            windows_per_stage=self.canary.windows_per_stage,
            candidate_info=fetch_service_info(self.canary.candidate_url.rstrip("/"), run.scenario),
            updated_unix_s=time.time(),
        )
        write_canary_record(run.folder.root, self.record)

    def _add(self, row: Mapping[str, Any], starts: dict[int, float]) -> None:
        side = row.get("side")
        if side not in SIDES or str(row.get("endpoint") or "").startswith(VALIDATION_PREFIX):
            return
        stage = cell_float(row.get("stage_index"))
        sent, done = cell_float(row.get("t_sent_unix_s")), cell_float(row.get("t_done_unix_s"))
        ok = bool(row.get("ok"))
        self._ended[side].append(_Completion(sent, done, ok))
        when = sent if sent is not None else cell_float(row.get("t_intended_unix_s"))
        if stage is None or when is None or int(stage) not in starts:
            return
        k = max(int((when - starts[int(stage)]) // self.canary.window_s), 0)
        if k >= self.canary.windows_per_stage or (int(stage), k) in self._judged:
            return  # after the stage's last window, or too late for a window already judged
        rows = self._sent.setdefault((int(stage), k), {s: _SideRows() for s in SIDES})[side]
        rows.requests += 1
        latency = cell_float(row.get("latency_ms"))
        if latency is not None:
            rows.slowest_s = max(rows.slowest_s, latency / 1000.0)
        if ok and latency is not None:
            rows.ok_latencies_ms.append(latency)
        elif not ok:
            rows.errors_by_kind[error_kind(cell_float(row.get("status_code")), row.get("error"))] += 1
        cosine = cell_float(row.get("agreement_cosine"))
        if cosine is not None:
            rows.agreement.append(cosine)

    def _read(self) -> None:
        stages = self.run.timeline.stages
        starts = {s.index: s.start_unix_s for s in stages}
        for row in self._requests.read_new():
            self._add(row, starts)
        hosts = set(self.canary.candidate_telemetry_hosts)
        for row in self._telemetry.read_new():
            device = str(row.get("device") or "")
            candidate = row.get("host") in hosts if hosts else device.startswith(("npu", "gpu"))
            if row.get("metric") != "temp_c" or not candidate:
                continue
            ts, value = cell_float(row.get("ts_unix_s")), cell_float(row.get("value"))
            if ts is not None and value is not None:
                self._temps.append((ts, value))

    def _side_window(self, side: str, rows: _SideRows, start: float, end: float) -> SideWindow:
        n_bins = bin_count(start, end)
        ok_bins: list[int] = []
        failed_bins: list[int] = []
        spans: list[tuple[int, int]] = []
        for c in self._ended[side]:
            if c.t_done_unix_s is not None and start <= c.t_done_unix_s < end:
                (ok_bins if c.ok else failed_bins).append(bin_of(c.t_done_unix_s, start))
            if c.ok or c.t_sent_unix_s is None:
                continue  # a slow answer that came is no outage; a hang that failed (or never ended) is
            if c.t_sent_unix_s < end and (c.t_done_unix_s or math.inf) > start:
                first, last = spanned_bins(c.t_sent_unix_s, c.t_done_unix_s, start, n_bins)
                if first <= last:
                    spans.append((first, last))
        latencies = np.asarray(rows.ok_latencies_ms, dtype=np.float64)
        pcts = [float(v) for v in np.percentile(latencies, PERCENTILES_PCT)] if len(latencies) else [None] * 3
        return SideWindow(
            requests=rows.requests, ok=len(latencies), errors_by_kind=dict(rows.errors_by_kind.most_common()),
            p50_ms=pcts[0], p95_ms=pcts[1], p99_ms=pcts[2],
            goodput_rps=len(latencies) / (end - start) if end > start else 0.0,
            unavailable_s=unavailable_seconds(n_bins, ok_bins, failed_bins, spans),
        )

    def _wait_s(self, key: tuple[int, int]) -> float:
        """How long after its end a window is judged: settle_s (see the module docstring) plus the slowest
        answer lately (its own rows so far, or the last judged window's), at most the request timeout."""
        own = self._sent.get(key)
        slowest = max((r.slowest_s for r in own.values()), default=0.0) if own else 0.0
        return self.settle_s + min(max(slowest, self._latency_hint_s), self._timeout_s)

    def _judgement(self, stage: StageRecord, k: int, start: float, end: float) -> WindowJudgement:
        sides = self._sent.pop((stage.index, k), {s: _SideRows() for s in SIDES})
        self._latency_hint_s = max((r.slowest_s for r in sides.values()), default=0.0)
        agreement = sides["baseline"].agreement + sides["candidate"].agreement
        temps = [value for ts, value in self._temps if start <= ts < end]
        return WindowJudgement(
            stage_index=stage.index, window_index=k,
            weight_pct=self.canary.stages_pct[min(stage.index, len(self.canary.stages_pct) - 1)],
            start_unix_s=start, end_unix_s=end,
            baseline=self._side_window("baseline", sides["baseline"], start, end),
            candidate=self._side_window("candidate", sides["candidate"], start, end),
            agreement_n=len(agreement), agreement_mean=float(np.mean(agreement)) if agreement else None,
            agreement_min=float(min(agreement)) if agreement else None,
            temp_c_max=max(temps) if temps else None,
        )

    def _prune(self, before_unix_s: float) -> None:
        """Completions and samples no window still to be judged can need (memory bounded by the windows)."""
        for side in SIDES:
            self._ended[side] = [
                c for c in self._ended[side] if c.t_done_unix_s is None or c.t_done_unix_s >= before_unix_s
            ]
        self._temps = [(ts, v) for ts, v in self._temps if ts >= before_unix_s]

    def poll(self, now_unix_s: float | None = None, finished: bool = False) -> CanaryVerdict:
        """Judge every window whose rows are in (all when finished); the verdict so far."""
        if self.verdict.status not in ("running",):
            return self.verdict
        now = time.time() if now_unix_s is None else now_unix_s
        if self._flush is not None and (finished or self._window_due(now)):
            self._flush()
        self._read()
        added = False
        pending: list[float] = []
        for stage in self.run.timeline.stages:
            for k, start, end in stage_windows(stage, self.canary):
                if (stage.index, k) in self._judged:
                    continue
                if not finished and end + self._wait_s((stage.index, k)) > now:
                    pending.append(start)
                    continue
                self.windows.append(self._judgement(stage, k, start, end))
                self._judged.add((stage.index, k))
                added = True
        if added:
            self._prune(min(pending) if pending else now)
        planned = len(self.canary.stages_pct) * self.canary.windows_per_stage
        all_judged = finished and len(self.windows) == planned
        annotated, verdict = judge(self.windows, self.canary, self.rollback, finished=all_judged)
        if finished and verdict.status == "running":
            verdict = CanaryVerdict("incomplete", f"INCOMPLETE: {len(self.windows)} of {planned} windows ran")
        if added or verdict != self.verdict:
            self.windows = annotated
            self.verdict = verdict
            self._write(verdict)
        return verdict

    def _window_due(self, now_unix_s: float) -> bool:
        """Some window not judged yet ended at least settle_s ago (its rows so far are worth reading)."""
        return any(
            (stage.index, k) not in self._judged and end + self.settle_s <= now_unix_s
            for stage in self.run.timeline.stages
            for k, _, end in stage_windows(stage, self.canary)
        )

    def stage_judged(self, stage: StageRecord) -> bool:
        """Every window of the stage has been judged (its rows are in)."""
        return all((stage.index, k) in self._judged for k, _, _ in stage_windows(stage, self.canary))

    def stage_started(self, index: int) -> None:
        """Say in canary.json which stage is under way (a progress view, or a test, watches it)."""
        update = {"running_stage_index": index, "updated_unix_s": time.time()}
        self.record = self.record.model_copy(update=update)
        write_canary_record(self.run.folder.root, self.record)

    def _write(self, verdict: CanaryVerdict) -> None:
        self.record = self.record.model_copy(
            update={
                "windows": self.windows, "status": verdict.status, "trigger": verdict.trigger,
                "stage_index": verdict.stage_index, "window_index": verdict.window_index,
                "line": verdict.line, "updated_unix_s": time.time(),
            }
        )
        write_canary_record(self.run.folder.root, self.record)
