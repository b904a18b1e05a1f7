"""How hard the workers work: busy time over a sliding window (the share of the last seconds spent computing),
and the per-input service time (how fast the queue drains, the basis of admission by estimated wait)."""

from __future__ import annotations

import collections
import threading
import time

BUSY_WINDOW_S = 10.0
SERVICE_TIME_SMOOTHING = 0.2  # weight of the newest batch in the per-input service time estimate
BACK_TO_BACK_S = 0.05  # a batch starting within this of the previous one's end means the worker had a backlog


class BusyWindow:
    """Compute spans of the last horizon_s, shared by `lanes` workers (the fraction is their mean)."""

    def __init__(self, lanes: int = 1, horizon_s: float = BUSY_WINDOW_S) -> None:
        self.lanes = lanes
        self.horizon_s = horizon_s
        self._spans: collections.deque[tuple[float, float]] = collections.deque()  # (end, duration) in s
        self._lock = threading.Lock()

    def record(self, t_end_s: float, compute_s: float) -> None:
        with self._lock:
            self._spans.append((t_end_s, compute_s))
            while self._spans and self._spans[0][0] < t_end_s - self.horizon_s:
                self._spans.popleft()

    def fraction(self, window_s: float = BUSY_WINDOW_S) -> float:
        """Share of the last window_s spent computing, 0..1 (spans cut at the window's start)."""
        start_s = time.perf_counter() - window_s
        with self._lock:
            spans = list(self._spans)
        busy_s = sum(max(0.0, end_s - max(start_s, end_s - dur_s)) for end_s, dur_s in spans if end_s > start_s)
        return min(1.0, busy_s / (window_s * self.lanes))


class ServiceTime:
    """Smoothed worker seconds per input, 0 until the first batch. Each worker thread keeps its own clock."""

    def __init__(self) -> None:
        self.per_input_s = 0.0
        self._clock = threading.local()  # per worker thread: when its previous batch ended

    def record_batch(self, t_start_s: float, t_end_s: float, inputs: int) -> None:
        """Back to back with the previous batch, the whole cycle counts (batch assembly, GIL and CPU contention
        included): that is the rate the queue really drains at. After idle time only the compute does, and such
        a sample may lower the estimate but never raise it: a batch that found no backlog was small, and says
        nothing of how fast a queue would drain. So a slow period is forgotten as soon as the engine computes
        faster, and an idle engine never keeps refusing on an old figure."""
        t_prev_end_s = self.last_end_s()
        backlog = t_start_s - t_prev_end_s < BACK_TO_BACK_S
        cycle_s = t_end_s - t_prev_end_s if backlog else t_end_s - t_start_s
        self._clock.t_end_s = t_end_s
        sample_s = cycle_s / inputs
        if not self.per_input_s:
            self.per_input_s = sample_s
        elif backlog or sample_s < self.per_input_s:
            self.per_input_s += SERVICE_TIME_SMOOTHING * (sample_s - self.per_input_s)

    def record_stop(self, t_end_s: float) -> None:
        """A batch stopped part-way: its time is no sample of the service time, but the worker was busy."""
        self._clock.t_end_s = t_end_s

    def last_end_s(self) -> float:
        return float(getattr(self._clock, "t_end_s", 0.0))
